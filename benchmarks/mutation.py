"""Mutation testing of the reference implementation, with the default chaos budget as the oracle.

    python benchmarks/mutation.py                  # every mutant, resumable; `make mutate`
    python benchmarks/mutation.py --limit 50       # a sample, to try the set-up
    python benchmarks/mutation.py --report-only    # the score of the last session
    python benchmarks/mutation.py --only-survivors # rerun the last survivors only (minutes)
    python benchmarks/mutation.py --only-survivors --lines reference_impl/pending.py:126,141
    python benchmarks/mutation.py --retriage       # re-read the triage file, no mutant runs

The tool is cosmic-ray (maintained, runs any command as the oracle, one mutant at a time on
files). It mutates a copy of the working tree, never the checkout: a killed `make mutate` must
not leave a mutated `reference_impl/` behind. The oracle is exactly what a user runs, `durable-chaos
run` on the simulator with the scenario files and 100 generated schedules: a mutant is killed
when that command exits non-zero (1: an invariant violated, 3: a run could not be judged, 2: the
runtime could not even open), and survives when every run was judged and held.

Why cosmic-ray rather than mutmut: mutmut 3 switches mutants inside one interpreter through
trampolines and selects tests by coverage; our oracle is one command over the whole reference
(the simulator runs every handler), so that selection buys nothing, while trampolines change the
handler functions the simulator inspects. cosmic-ray edits a file and runs a command, nothing
more.

The modules mutated are the ones the simulator runs. The bindings and stores of the real
engines (`restate_binding.py`, `threadlog_pg.py`, `temporal/`, `dbos/`, the worker entry
points) are judged by the real-engine suites, not by this oracle.

Operators: Offutt's sufficient set (relational, logical connector, unary insertion, arithmetic,
constants) plus decorator removal, zero-iteration loops and exception replacement. Left out:
every replacement *to* a bitwise operator and every mutation *of* `|` (in this code `|` only
appears in annotations, which `from __future__ import annotations` never evaluates: each such
mutant is equivalent), and the many-for-one expansions of one site (Eq -> Lt, LtE, Gt, GtE,
...), of which one representative per site is kept.

Survivors are triaged in `benchmarks/mutation-triage.toml`: each is either `equivalent` (with
why) or a `gap` (why: what the harness misses; `closed_by`: what killed it, or `open`), found
by module, operator and source line. The score counts equivalent mutants out:
killed / (mutants - equivalent).

A whole session takes about an hour. After a change to the checkers or the scenario files,
`--only-survivors` reruns only the survivors listed in `mutation-latest.json` (less those
triaged equivalent; `--lines` narrows them to some lines) and merges its kills into that
score: adding ways to fail never revives a killed mutant. A change to the generator changes
the schedules, so it calls for a whole session again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODULES = (
    "reference_impl/controller.py",
    "reference_impl/effects.py",
    "reference_impl/executor.py",
    "reference_impl/pending.py",
    "reference_impl/threadlog.py",
    "reference_impl/turn.py",
)
# Regular expressions over cosmic-ray's operator names (matched from the start).
EXCLUDE_OPERATORS = (
    r"core/ReplaceBinaryOperator_.*_(BitOr|BitAnd|BitXor|LShift|RShift|Pow|Mod|FloorDiv)$",
    r"core/ReplaceBinaryOperator_BitOr_",
    r"core/ReplaceBinaryOperator_Add_(Mul|Div)$",
    r"core/ReplaceBinaryOperator_Sub_(Mul|Div)$",
    r"core/ReplaceBinaryOperator_Mul_(Add|Sub)$",
    r"core/ReplaceBinaryOperator_Div_(Add|Sub)$",
    r"core/ReplaceComparisonOperator_Eq_(Lt|LtE|Gt|GtE|Is|IsNot)$",
    r"core/ReplaceComparisonOperator_NotEq_(Lt|LtE|Gt|GtE|Is|IsNot)$",
    r"core/ReplaceComparisonOperator_Is_(Eq|NotEq|Lt|LtE|Gt|GtE)$",
    r"core/ReplaceComparisonOperator_IsNot_(Eq|NotEq|Lt|LtE|Gt|GtE)$",
    r"core/ReplaceComparisonOperator_(Lt|LtE|Gt|GtE)_(Eq|NotEq|Is|IsNot)$",
    r"core/ReplaceComparisonOperator_(In|NotIn)_(Eq|NotEq|Lt|LtE|Gt|GtE|Is|IsNot)$",
)
SCRATCH = ROOT / ".scratch" / "mutation"
TRIAGE = ROOT / "benchmarks" / "mutation-triage.toml"
LATEST = ROOT / "benchmarks" / "mutation-latest.json"


def tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout.decode()
    return [p for p in out.split("\0") if p and (ROOT / p).is_file()]


# What the oracle runs: a session is resumed only while these are unchanged.
JUDGED = ("contract/", "harness/", "reference_impl/", "scenarios/")


def fingerprint(files: list[str]) -> str:
    """A session is resumed only over the same code: the hash of what the oracle runs."""
    digest = hashlib.sha256()
    for path in sorted(p for p in files if p.startswith(JUDGED)):
        digest.update(path.encode())
        digest.update((ROOT / path).read_bytes())
    return digest.hexdigest()[:16]


def prepare(
    modules: tuple[str, ...], timeout: float, session: Path | None = None
) -> tuple[Path, Path, Path]:
    files = tracked_files()
    session_dir = session.resolve() if session else SCRATCH / fingerprint(files)
    tree = session_dir / "tree"
    config = session_dir / "cosmic-ray.toml"
    db = session_dir / "session.sqlite"
    if db.exists():
        return tree, config, db
    if tree.exists():
        shutil.rmtree(tree)
    for path in files:
        target = tree / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, target)
    # `python -m` puts the copy first on sys.path, ahead of the editable install of the checkout.
    oracle = (
        f"{sys.executable} -m harness.cli run --quiet --report-dir {session_dir / 'oracle'}"
    )
    lines = [
        "[cosmic-ray]",
        f"module-path = {json.dumps(list(modules))}",
        f"timeout = {timeout}",
        "excluded-modules = []",
        f"test-command = {json.dumps(oracle)}",
        "",
        "[cosmic-ray.distributor]",
        'name = "local"',
        "",
        "[cosmic-ray.filters.operators-filter]",
        f"exclude-operators = {json.dumps(list(EXCLUDE_OPERATORS))}",
        "",
    ]
    config.write_text("\n".join(lines))
    tool = Path(sys.executable).parent
    subprocess.run([tool / "cosmic-ray", "init", config, db], cwd=tree, check=True)
    subprocess.run([tool / "cr-filter-operators", db, config], cwd=tree, check=True)
    baseline = subprocess.run(
        [tool / "cosmic-ray", "baseline", config], cwd=tree, capture_output=True, text=True
    )
    if baseline.returncode != 0:
        db.unlink()
        sys.exit(
            "mutation: the oracle fails on the unmutated code; fix that first "
            f"(`durable-chaos run` in {tree}):\n{baseline.stdout}{baseline.stderr}"
        )
    return tree, config, db


def counts(db: Path) -> tuple[int, int]:
    with sqlite3.connect(db) as conn:
        total = conn.execute("select count(*) from work_items").fetchone()[0]
        done = conn.execute("select count(*) from work_results").fetchone()[0]
    return done, total


def limit_work(db: Path, limit: int) -> None:
    """Keep `limit` pending mutants, spread over the modules, and mark the rest skipped."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(db), WorkDB.Mode.open) as work_db:
        pending = sorted(
            work_db.pending_work_items,
            key=lambda i: (str(i.mutations[0].module_path), i.mutations[0].start_pos),
        )
        step = max(1, len(pending) // max(1, limit))
        keep = {item.job_id for item in pending[::step][:limit]}
        for item in pending:
            if item.job_id not in keep:
                work_db.set_result(
                    item.job_id,
                    WorkResult(output="left out by --limit", worker_outcome=WorkerOutcome.SKIPPED),
                )


def execute(tree: Path, config: Path, db: Path) -> None:
    tool = Path(sys.executable).parent
    stop = threading.Event()

    def progress() -> None:
        started = time.monotonic()
        while not stop.wait(30):
            done, total = counts(db)
            print(f"mutation: {done}/{total} ({time.monotonic() - started:.0f} s)", flush=True)

    watcher = threading.Thread(target=progress, daemon=True)
    watcher.start()
    try:
        subprocess.run([tool / "cosmic-ray", "exec", config, db], cwd=tree, check=True)
    finally:
        stop.set()


def results(tree: Path, db: Path) -> list[dict[str, Any]]:
    tool = Path(sys.executable).parent
    dump = subprocess.run(
        [tool / "cosmic-ray", "dump", db], cwd=tree, check=True, capture_output=True, text=True
    ).stdout
    rows = []
    for line in dump.splitlines():
        item, result = json.loads(line)
        if result is None:
            continue
        mutation = item["mutations"][0]
        module = mutation["module_path"]
        row = mutation["start_pos"][0]
        source = (tree / module).read_text().splitlines()[row - 1].strip()
        diff = result.get("diff") or ""
        rows.append(
            {
                "module": module,
                "line": row,
                "operator": mutation["operator_name"],
                "occurrence": mutation["occurrence"],
                "definition": mutation.get("definition_name"),
                "source": source,
                "mutated": mutated_line(diff),
                "worker_outcome": result["worker_outcome"],
                "test_outcome": result["test_outcome"],
                "diff": result.get("diff") or "",
            }
        )
    return rows


def mutated_line(diff: str) -> str:
    """The first line the mutant's diff adds, stripped: which of a key's mutants it is."""
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            return line[1:].strip()
    return ""


def triage() -> dict[tuple[str, ...], dict[str, str]]:
    """Triaged survivors keyed by (module, operator, source line): stable across line shifts.

    An entry with `mutated` (the line as the mutant has it) is keyed by that too and judges
    only that mutant of its key: the constants of one line, say, where some mutants are
    equivalent and one is not."""
    if not TRIAGE.exists():
        return {}
    data = tomllib.loads(TRIAGE.read_text())
    return {
        (e["module"], e["operator"], e["source"], *([e["mutated"]] if "mutated" in e else []))
        : e for e in data.get("mutant", [])
    }


def entry_for(known: dict[tuple[str, ...], dict[str, str]],
              r: dict[str, Any]) -> dict[str, str] | None:
    """The triage entry of survivor `r`: the one for its own mutation, else its key's."""
    key = (r["module"], r["operator"], r["source"])
    mutated = r.get("mutated")
    return (known.get((*key, mutated)) if mutated else None) or known.get(key)


def classify(survived: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The survivors as listed in LATEST, each with its verdict from the triage file."""
    known = triage()
    listed = []
    for r in survived:
        entry = entry_for(known, r)
        verdict = "untriaged" if entry is None else (
            "equivalent" if entry.get("verdict") == "equivalent" else "gap")
        listed.append({k: r[k] for k in ("module", "line", "operator", "source")}
                      | ({"mutated": r["mutated"]} if r.get("mutated") else {})
                      | {"triage": verdict})
    return listed


def scored(summary: dict[str, Any]) -> dict[str, Any]:
    """Fill in the verdict counts and the score: killed / (mutants judged - equivalent).

    An incompetent mutant (the oracle timed out or could not start) is a detection: the
    harness refused to call the mutated code good.
    """
    survivors = classify(summary["survivors"])
    equivalent = sum(1 for s in survivors if s["triage"] == "equivalent")
    denominator = summary["judged"] - equivalent
    detected = summary["killed"] + summary["incompetent"]
    return summary | {
        "survived": len(survivors),
        "equivalent": equivalent,
        "gaps_open": sum(1 for s in survivors if s["triage"] == "gap"),
        "untriaged": sum(1 for s in survivors if s["triage"] == "untriaged"),
        "score": detected / denominator if denominator else None,
        "by_module": dict(Counter(s["module"] for s in survivors)),
        "survivors": survivors,
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    judged = [r for r in rows if r["worker_outcome"] in ("normal", "exception")]
    return scored({
        "mutants": len(rows),
        "judged": len(judged),
        "skipped": len(rows) - len(judged),
        "killed": sum(1 for r in judged if r["test_outcome"] == "killed"),
        "incompetent": sum(1 for r in judged if r["test_outcome"] == "incompetent"),
        "survivors": [r for r in judged if r["test_outcome"] == "survived"],
    })


Key = tuple[str, str, str]


def _key(r: dict[str, Any]) -> Key:
    return (r["module"], r["operator"], r["source"])


def wanted_lines(specs: list[str]) -> set[tuple[str, int]]:
    """`module:line,line` arguments as (module, line) pairs."""
    lines = set()
    for spec in specs:
        module, _, rows = spec.rpartition(":")
        if not module or not rows:
            sys.exit(f"mutation: --lines {spec!r}: write module:line[,line...], "
                     "e.g. reference_impl/pending.py:126,141")
        lines |= {(module, int(n)) for n in rows.split(",")}
    return lines


def rerun_keys(previous: list[dict[str, Any]], lines: set[tuple[str, int]]) -> Counter[Key]:
    """The survivors to run again: those on `lines` (all if none), less the ones the triage
    file calls equivalent (no oracle can kill those)."""
    equivalent = {k for k, e in triage().items()
                  if len(k) == 3 and e.get("verdict") == "equivalent"}
    return Counter(_key(r) for r in previous
                   if (not lines or (r["module"], r["line"]) in lines)
                   and _key(r) not in equivalent)


def select_survivors(db: Path, previous: list[dict[str, Any]],
                     lines: set[tuple[str, int]]) -> Counter[Key]:
    """Leave pending only the mutants of the last survivors (on `lines`, if given).

    A survivor is found again by module, operator and source line, as the triage file finds
    it, so the rerun survives line shifts. Every other mutant is marked skipped: it was
    killed in the session the survivors came from (adding scenarios or checkers never revives
    one; a change to the generator's schedules might: then run everything again), or it is
    triaged equivalent.
    """
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    chosen = rerun_keys(previous, lines)
    with use_db(str(db), WorkDB.Mode.open) as work_db:
        for item in list(work_db.pending_work_items):
            mutation = item.mutations[0]
            module = str(mutation.module_path)
            source = (db.parent / "tree" / module).read_text().splitlines()[
                mutation.start_pos[0] - 1].strip()
            if (module, mutation.operator_name, source) not in chosen:
                work_db.set_result(item.job_id, WorkResult(
                    output="not rerun: no survivor of the last session",
                    worker_outcome=WorkerOutcome.SKIPPED))
    return chosen


def selected(tree: Path, db: Path, previous: list[dict[str, Any]],
             lines: set[tuple[str, int]]) -> Counter[Key]:
    """The survivors a session selected: those (on `lines`) with a mutant it did not skip."""
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(str(db), WorkDB.Mode.open) as work_db:
        skipped = {result_id for result_id, result in work_db.results
                   if (result.output or "").startswith("not rerun")}
        kept = set()
        for item in work_db.work_items:
            if item.job_id in skipped:
                continue
            mutation = item.mutations[0]
            module = str(mutation.module_path)
            source = (tree / module).read_text().splitlines()[mutation.start_pos[0] - 1].strip()
            kept.add((module, mutation.operator_name, source))
    return Counter(_key(r) for r in previous
                   if (not lines or (r["module"], r["line"]) in lines) and _key(r) in kept)


def merge_rerun(previous: dict[str, Any], chosen: Counter[Key],
                rows: list[dict[str, Any]], items: Counter[Key] | None = None) -> dict[str, Any]:
    """The last summary with the rerun survivors replaced by what the rerun found.

    Mutants that share a key (two constants on one line) are rerun together, killed ones
    included. A kill stays a kill (the oracle only grew), so of a key's `count` survivors, the
    ones left are the rerun's survivors plus the mutants it has not reached yet (`items`, the
    key's mutants in the session, counts those; an interrupted rerun), at most `count`.
    """
    ran = [r for r in rows if r["worker_outcome"] in ("normal", "exception")]
    by_key: dict[Key, list[dict[str, Any]]] = {}
    for r in ran:
        by_key.setdefault(_key(r), []).append(r)
    before: dict[Key, list[dict[str, Any]]] = {}
    survivors = []
    for s in previous["survivors"]:
        if _key(s) in chosen:
            before.setdefault(_key(s), []).append(s)
        else:
            survivors.append(s)
    killed = incompetent = 0
    for key, count in chosen.items():
        results = by_key.get(key, [])
        alive = [r for r in results if r["test_outcome"] == "survived"]
        unreached = (items[key] if items is not None else len(results)) - len(results)
        left = min(count, len(alive) + unreached)
        gone = count - left
        gone_incompetent = min(gone, sum(1 for r in results
                                         if r["test_outcome"] == "incompetent"))
        incompetent += gone_incompetent
        killed += gone - gone_incompetent
        survivors += (alive + before[key])[:left]
    return scored(previous | {
        "killed": previous["killed"] + killed,
        "incompetent": previous["incompetent"] + incompetent,
        "survivors": survivors,
        "reruns": previous.get("reruns", 0) + 1,
    })


def session_items(tree: Path, db: Path) -> Counter[Key]:
    """How many mutants of each key the session holds, run or not."""
    from cosmic_ray.work_db import WorkDB, use_db

    keys: Counter[Key] = Counter()
    with use_db(str(db), WorkDB.Mode.open) as work_db:
        for item in work_db.work_items:
            mutation = item.mutations[0]
            module = str(mutation.module_path)
            source = (tree / module).read_text().splitlines()[mutation.start_pos[0] - 1].strip()
            keys[(module, mutation.operator_name, source)] += 1
    return keys


def report(summary: dict[str, Any]) -> None:
    if summary["judged"]:
        # A session that judged nothing (every mutant skipped) never replaces the last score.
        LATEST.write_text(json.dumps(summary, indent=1) + "\n")
    score = summary["score"]
    print(
        f"mutation: {summary['judged']} mutants judged, {summary['killed']} killed, "
        f"{summary['incompetent']} incompetent, {summary['survived']} survived "
        f"({summary['equivalent']} equivalent, {summary['gaps_open']} gaps, "
        f"{summary['untriaged']} untriaged); score "
        + ("n/a" if score is None else f"{score:.1%}")
        + f" (details: {LATEST.relative_to(ROOT)})"
    )
    for s in summary["survivors"]:
        print(f"  {s['triage']:>10}  {s['module']}:{s['line']}  {s['operator']}  {s['source']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", nargs="+", default=list(MODULES))
    parser.add_argument("--limit", type=int, default=0, help="run only N mutants (a sample)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per mutant")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--session", type=Path, help="a session directory under .scratch/mutation")
    parser.add_argument("--only-survivors", action="store_true",
                        help=f"rerun only the survivors listed in {LATEST.name}")
    parser.add_argument("--lines", nargs="+", default=[], metavar="MODULE:LINE[,LINE]",
                        help="with --only-survivors: only the survivors on these lines")
    parser.add_argument("--retriage", action="store_true",
                        help=f"re-read the triage file into {LATEST.name}; runs nothing")
    args = parser.parse_args()
    if args.retriage:
        report(scored(json.loads(LATEST.read_text())))
        return 0
    if args.lines and not args.only_survivors:
        print("mutation: --lines goes with --only-survivors", file=sys.stderr)
        return 2
    if shutil.which("cosmic-ray", path=str(Path(sys.executable).parent)) is None:
        print("mutation: cosmic-ray is missing; `make mutate` installs it (extra 'mutate')",
              file=sys.stderr)
        return 2
    if args.only_survivors:
        previous = json.loads(LATEST.read_text())
        lines = wanted_lines(args.lines)
        session = args.session or SCRATCH / (
            fingerprint(tracked_files()) + "-rerun-" + hashlib.sha256(
                json.dumps([previous["survivors"], sorted(lines),
                            TRIAGE.read_text() if TRIAGE.exists() else ""]).encode()
            ).hexdigest()[:8])
        tree, config, db = prepare(tuple(args.modules), args.timeout, session)
        # Selected once per session: a resumed rerun goes on with the same mutants, and
        # merges the survivors it selected then (the triage file may have changed since).
        marker = db.parent / "selected"
        if marker.exists():
            chosen = selected(tree, db, previous["survivors"], lines)
        else:
            chosen = select_survivors(db, previous["survivors"], lines)
            marker.touch()
        print(f"mutation: rerunning {sum(chosen.values())} survivors", flush=True)
        if not args.report_only:
            execute(tree, config, db)
        report(merge_rerun(previous, chosen, results(tree, db), session_items(tree, db)))
        return 0
    if args.report_only:
        session_dir = args.session.resolve() if args.session else SCRATCH / fingerprint(
            tracked_files())
        if not (session_dir / "session.sqlite").exists():
            # Reporting a session that never ran would overwrite the last score with zeros.
            print(f"mutation: no session for this code in {session_dir}; run "
                  "`python benchmarks/mutation.py` first (the last score stays in "
                  f"{LATEST.relative_to(ROOT)})", file=sys.stderr)
            return 2
    tree, config, db = prepare(tuple(args.modules), args.timeout, args.session)
    if not args.report_only:
        if args.limit:
            limit_work(db, args.limit)
        execute(tree, config, db)
    report(summarize(results(tree, db)))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
