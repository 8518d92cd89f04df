"""The golden digest: every checker's verdict and witness over a fixed set of runs, so that a
refactoring of the checkers (or of anything they read) is proved to change nothing.

    python benchmarks/golden.py --write     # record benchmarks/golden-digest.json
    python benchmarks/golden.py             # compare with it; list every difference (exit 1)
    python benchmarks/golden.py --adapters reference --schedules 50   # a quicker subset

`make golden` is the check mode. The runs: every scenario file (scenarios/*.toml) and 1,000
generated schedules (seed 22, indexes 0..999) on each adapter that runs on the simulator: the
built-in ones (reference, naive) and every planted bug of tests/planted (the reference with
one bug, on the scenarios and the first 200 schedules; without them the digest would hold
few failing witnesses to protect). Each run
goes through `run_schedule` in-process, with no shrinking; its history is captured by a
checker that only keeps it, and `run_checkers` then judges it with every checker of
`harness.checkers.ALL`, timed with `time.process_time` (the checker cost per schedule that
benchmarks/RESULTS.md records).

An entry is `adapter/schedule :: invariant` -> `verdict | witness`: the verdict (pass, fail,
unknown; `/unreached` when the run never reached the invariant's window), every violation's
sentence with the history records it cites (not only the first three a report prints), or the
note of an unknown result. The file is sorted JSON, one entry a line, so a difference reads in
a diff too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.adapters import load_adapter  # noqa: E402
from harness.adapters.base import Adapter  # noqa: E402
from harness.checkers import ALL  # noqa: E402
from harness.checkers.base import CheckConfig, Result, run_checkers  # noqa: E402
from harness.history import History  # noqa: E402
from harness.run import RunOptions, run_schedule  # noqa: E402
from harness.schedules.generate import generate  # noqa: E402
from harness.schedules.model import Schedule  # noqa: E402
from harness.schedules.scenario_file import load_scenario  # noqa: E402

DIGEST = ROOT / "benchmarks" / "golden-digest.json"
SEED = 22
SCHEDULES = 1000
# A planted bug's runs: the scenarios and the first 200 generated schedules (its witnesses
# are what the digest protects; 1,000 each would take four times as long).
PLANTED_SCHEDULES = 200
BUILTIN = ("reference", "naive")


class _Keep:
    """Not an invariant: a checker that keeps the history it is given (the whole of it: it
    declares no `reads`), so that the real checkers can judge it again, timed."""

    name = "golden.keep"
    description = "keeps the history"

    def __init__(self) -> None:
        self.history: History | None = None

    def check(self, history: History, config: CheckConfig) -> Result:
        self.history = history
        return Result(self.name, True)


@dataclass(frozen=True)
class Cost:
    runs: int = 0
    check_cpu: float = 0.0


def adapters(names: Sequence[str] | None) -> list[Adapter]:
    """The simulator adapters by name: the built-in ones, then the planted bugs."""
    from tests.planted import MODULES, load

    found: list[Adapter] = [load_adapter("reference"), load_adapter("naive")]
    found += [load(module).ADAPTER for module in MODULES]
    if names:
        unknown = sorted(set(names) - {a.name for a in found})
        if unknown:
            raise SystemExit(f"golden: unknown adapter(s) {unknown}; choose from "
                             f"{[a.name for a in found]}")
        found = [a for a in found if a.name in names]
    return found


def runs(count: int) -> Iterator[tuple[str, Schedule]]:
    for path in sorted((ROOT / "scenarios").glob("*.toml")):
        yield f"scenario:{path.stem}", load_scenario(path)
    for index in range(count):
        yield f"generated:{SEED}/{index}", generate(SEED, index)


def judge(adapter: Adapter, key: str, schedule: Schedule,
          digest: dict[str, str]) -> float:
    """Run `schedule`, judge its history, add its entries to `digest`; the CPU seconds the
    checkers took."""
    keep = _Keep()
    outcome = run_schedule(adapter, schedule, RunOptions(
        adapter_spec=adapter.name, report_dir=None, save_history=False, checkers=(keep,)))
    where = f"{adapter.name}/{key}"
    if keep.history is None:  # the run could not be judged: the digest says why
        digest[f"{where} :: run"] = f"error | {outcome.error}"
        return 0.0
    config = adapter.check_config()
    started = time.process_time()
    results = run_checkers(ALL, keep.history, config)
    spent = time.process_time() - started
    for result in results:
        verdict = result.outcome + ("" if result.reached else "/unreached")
        if result.valid is None:
            witness = result.note
        else:
            witness = "\n".join(f"{v.message} {list(v.records)}" for v in result.violations)
        digest[f"{where} :: {result.checker}"] = f"{verdict} | {witness}"
    return spent


def one_adapter(task: tuple[str, int]) -> tuple[str, dict[str, str], Cost]:
    """Every run of one adapter (a unit of work of a worker process)."""
    name, count = task
    (adapter,) = adapters([name])
    digest: dict[str, str] = {}
    cpu = 0.0
    n = 0
    for key, schedule in runs(count):
        cpu += judge(adapter, key, schedule, digest)
        n += 1
    return name, digest, Cost(n, cpu)


def build(names: Sequence[str] | None, count: int,
          jobs: int = 1) -> tuple[dict[str, str], dict[str, Cost]]:
    digest: dict[str, str] = {}
    costs: dict[str, Cost] = {}
    tasks = [(a.name, count if a.name in BUILTIN else min(count, PLANTED_SCHEDULES))
             for a in adapters(names)]
    with multiprocessing.get_context("spawn").Pool(jobs) if jobs > 1 else \
            contextlib.nullcontext() as pool:
        done = pool.imap_unordered(one_adapter, tasks) if pool else map(one_adapter, tasks)
        for name, part, cost in done:
            digest.update(part)
            costs[name] = cost
            print(f"golden: {name}: {cost.runs} runs, checkers {cost.check_cpu:.2f} CPU s "
                  f"({1000 * cost.check_cpu / cost.runs:.2f} ms a run)", file=sys.stderr,
                  flush=True)
    return digest, costs


def write(digest: dict[str, str], path: Path) -> None:
    lines = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(digest.items())]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")


def compare(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """Every difference between two digests, one paragraph each."""
    out = []
    for key in sorted(old.keys() | new.keys()):
        was, now = old.get(key), new.get(key)
        if was == now:
            continue
        out.append(f"{key}\n  was: {was!r}\n  now: {now!r}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="record the digest")
    parser.add_argument("--adapters", nargs="*", help="only these adapters (check: only "
                        "their entries are compared)")
    parser.add_argument("--schedules", type=int, default=SCHEDULES,
                        help="generated schedules per adapter (check: only those compared)")
    parser.add_argument("--digest", type=Path, default=DIGEST)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (an adapter "
                        "each; the digest does not depend on it)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    digest, costs = build(args.adapters, args.schedules, args.jobs)
    runs_total = sum(c.runs for c in costs.values())
    cpu = sum(c.check_cpu for c in costs.values())
    print(f"golden: {runs_total} runs in {time.monotonic() - started:.0f} s; checkers "
          f"{cpu:.2f} CPU s, {1000 * cpu / max(runs_total, 1):.3f} ms CPU a run",
          file=sys.stderr)
    if args.write:
        if args.digest.exists():  # what the new digest changes, listed before it replaces it
            before: dict[str, str] = json.loads(args.digest.read_text(encoding="utf-8"))
            for difference in compare(before, digest):
                print(difference)
        write(digest, args.digest)
        print(f"golden: wrote {len(digest)} entries to {args.digest}")
        return 0
    if not args.digest.exists():
        print(f"golden: {args.digest} is missing; record it with --write", file=sys.stderr)
        return 2
    recorded: dict[str, str] = json.loads(args.digest.read_text(encoding="utf-8"))
    # A subset run compares only its own entries.
    prefixes = {f"{a.name}/" for a in adapters(args.adapters)}
    subset = {k: v for k, v in recorded.items()
              if any(k.startswith(p) for p in prefixes) and _within(k, args.schedules)}
    differences = compare(subset, digest)
    for difference in differences:
        print(difference)
    print(f"golden: {len(digest)} entries, {len(differences)} difference(s)")
    return 1 if differences else 0


def _within(key: str, count: int) -> bool:
    marker = f"generated:{SEED}/"
    if marker not in key:
        return True
    index = int(key.split(marker, 1)[1].split(" ", 1)[0])
    return index < count


if __name__ == "__main__":
    sys.exit(main())
