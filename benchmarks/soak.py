"""The soak: the reference against a million generated schedules, in resumable chunks.

    python benchmarks/soak.py                         # 1,000,000 schedules; `make soak`
    python benchmarks/soak.py --total 20000 --chunk 5000 --first-seed 100
    python benchmarks/soak.py --status                # what the last soak has done

Each chunk is one `durable-chaos run --scenarios none --schedules CHUNK --seed S` on every
core (the seed alone decides its schedules, see docs/exploration.md), so a chunk is replayable
on its own with `durable-chaos replay --seed S --schedules CHUNK`. A chunk stops at its first
violation and shrinks it, as any exploration does; the soak goes on with the next seed, so one
bug does not hide the others. The state (seeds done, their exit status, schedules, wall time)
is kept in `.scratch/soak/STATE.json`, so a stopped soak resumes where it stopped; a chunk
with a violation keeps its report directory, the others are removed to save disk.

The figures (schedules, wall time, node-hours, seeds, violations with their replay commands)
are printed at the end as a Markdown block for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = ROOT / ".scratch" / "soak"
EXIT_MEANING = {0: "held", 1: "violation", 3: "unknown", 130: "interrupted", 143: "terminated"}


def load(state_file: Path) -> dict[str, Any]:
    if state_file.exists():
        return dict(json.loads(state_file.read_text()))
    return {"chunks": {}}


def save(state_file: Path, state: dict[str, Any]) -> None:
    tmp = state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
    os.replace(tmp, state_file)


# What a soak's verdicts depend on: the simulator, the generator, the checkers, the reference
# and the contract between them. Scenario files, tests, docs and benchmarks do not.
JUDGED = ("harness", "reference_impl", "contract")


def code_version() -> str:
    """The judged code the soak runs: a digest of the git trees of `JUDGED` at HEAD (with
    "+changes" when the work tree differs from them). Not the commit: a soak spans sessions
    and commits, and its figures count per version of the code they judged, which a commit
    of docs or tests leaves as it was."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    trees = [git("rev-parse", f"HEAD:{path}") for path in JUDGED]
    if not all(trees):
        return "unknown"
    digest = hashlib.sha1(" ".join(trees).encode()).hexdigest()[:12]
    changed = git("status", "--porcelain", "--untracked-files=no", "--", *JUDGED)
    return f"trees-{digest}" + ("+changes" if changed else "")


def run_chunk(adapter: str, seed: int, chunk: int, workers: int, out: Path) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "harness.cli", "run", "--adapter", adapter, "--scenarios", "none",
        "--schedules", str(chunk), "--seed", str(seed), "--quiet", "--report-dir", str(out),
        "--workers", str(workers),
    ]
    started = time.monotonic()
    cpu_before = os.times()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    cpu_after = os.times()
    wall_s = time.monotonic() - started
    cpu_s = (cpu_after.children_user - cpu_before.children_user) + (
        cpu_after.children_system - cpu_before.children_system
    )
    summary = [line for line in done.stdout.splitlines() if line.strip()]
    return {
        "seed": seed,
        "schedules": chunk,
        "code": code_version(),
        "commit": subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                                 capture_output=True, text=True).stdout.strip(),
        "exit": done.returncode,
        "verdict": EXIT_MEANING.get(done.returncode, f"exit {done.returncode}"),
        "wall_s": round(wall_s, 1),
        "cpu_s": round(cpu_s, 1),
        "summary": summary[-12:],
        "stderr": done.stderr.strip().splitlines()[-5:],
    }


def report(state: dict[str, Any], workers: int) -> str:
    chunks = list(state["chunks"].values())
    schedules = sum(c["schedules"] for c in chunks if c["exit"] == 0)
    attempted = sum(c["schedules"] for c in chunks)
    wall_s = sum(c["wall_s"] for c in chunks)
    cpu_s = sum(c["cpu_s"] for c in chunks)
    bad = [c for c in chunks if c["exit"] != 0]
    seeds = sorted(c["seed"] for c in chunks)
    lines = [
        f"- adapter: {state.get('adapter', 'reference')}; chunks: {len(chunks)} of "
        f"{state.get('chunk', '?')} schedules, seeds {seeds[0] if seeds else '-'}.."
        f"{seeds[-1] if seeds else '-'}",
        f"- schedules run to the end with every invariant held: {schedules:,} "
        f"(of {attempted:,} attempted)",
        f"- wall time: {wall_s / 3600:.2f} h on {workers} worker(s); CPU time "
        f"{cpu_s / 3600:.2f} h; node-hours (wall x 1 node): {wall_s / 3600:.2f}; "
        f"schedules per CPU second: {attempted / cpu_s:.1f}" if cpu_s else "- no CPU time yet",
        f"- chunks that did not hold: {len(bad)}",
    ]
    by_code: dict[str, int] = {}
    for c in chunks:
        if c["exit"] == 0:
            key = c.get("code", "unrecorded")
            by_code[key] = by_code.get(key, 0) + c["schedules"]
    lines.extend(f"  - held on code {code}: {n:,}" for code, n in sorted(by_code.items()))
    for c in bad:
        lines.append(
            f"  - seed {c['seed']}: {c['verdict']}; replay: `durable-chaos replay --seed "
            f"{c['seed']} --schedules {c['schedules']}`"
        )
        lines.extend(f"    {s}" for s in c["summary"][:4])
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", default="reference")
    parser.add_argument("--total", type=int, default=1_000_000)
    parser.add_argument("--chunk", type=int, default=10_000)
    parser.add_argument("--first-seed", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--state", type=Path, default=SCRATCH / "STATE.json")
    parser.add_argument("--status", action="store_true", help="print the figures and stop")
    args = parser.parse_args()

    args.state.parent.mkdir(parents=True, exist_ok=True)
    state = load(args.state)
    state.setdefault("adapter", args.adapter)
    state.setdefault("chunk", args.chunk)
    if args.status:
        print(report(state, args.workers))
        return 0
    chunks = args.total // args.chunk
    for index in range(chunks):
        seed = args.first_seed + index
        if str(seed) in state["chunks"]:
            continue
        out = args.state.parent / f"seed-{seed}"
        result = run_chunk(args.adapter, seed, args.chunk, args.workers, out)
        if result["exit"] in (130, 143):
            print(f"soak: stopped during seed {seed}; run again to resume", file=sys.stderr)
            return int(result["exit"])
        state["chunks"][str(seed)] = result
        save(args.state, state)
        if result["exit"] == 0:
            shutil.rmtree(out, ignore_errors=True)
        done = sum(c["schedules"] for c in state["chunks"].values())
        print(
            f"soak: seed {seed}: {result['verdict']} in {result['wall_s']} s "
            f"({done:,} of {args.total:,} schedules)",
            flush=True,
        )
    print(report(state, args.workers))
    return 0 if all(c["exit"] == 0 for c in state["chunks"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
