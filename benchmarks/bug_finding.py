"""Bug finding: how fast the harness's exploration finds each planted bug.

For every planted bug (`tests/planted/`, one variant of the reference implementation per
invariant) and several seeds, `harness.exploration.explore` runs generated schedules (the default
generator, `Size()`), filtered on the invariant the bug breaks, until it fails, then shrinks
the failing schedule. Per bug and seed:

- `schedules`: generated schedules run until the first violation (the failing one included);
- `detect_s`: wall seconds until that violation (generation + simulation + checkers);
- `total_s`: wall seconds including the shrinking and the rerun of the minimal schedule;
- `steps`: number of steps of the shrunk minimal schedule;
- `also`: the other invariants the shrunk schedule fails.

A seed that finds nothing within `--count` schedules counts as not found (`found` = n of m).
Schedules come from the seed alone, as in tests/test_planted_bugs.py, so a seed here
generates the same schedules as there.
The control is the unmodified `reference` adapter over the same seeds and count: it must find
nothing (`--control`).

    python benchmarks/bug_finding.py [--seeds 0 1 2 3 4] [--count 200] [--bug NAME ...]
                                     [--size 2,5,5,2] [--control] [--jobs 2] [--json]
    python benchmarks/bug_finding.py --quick   # the test's configuration: seed 0, 150, 2,5,5,2
    python benchmarks/bug_finding.py --budget  # `durable-chaos run`'s default budget

`--budget` measures what a user's plain `durable-chaos run --seed S` finds: the scenario files
of `scenarios/` (in order, seed-independent), then 100 generated schedules of seed S at the
default size. Per bug and seed it reports which scenario files catch the bug's invariant, and
the generated exploration as above; the bug counts as found when either does.

Wall time comes from `harness.run.wall` (the real perf_counter, out of freezegun's reach).
The machines are shared: timings are noisy, counts and lengths are exact (deterministic).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.adapters import Adapter, load_adapter  # noqa: E402
from harness.clock import VirtualClock, wall_clock_follows  # noqa: E402
from harness.exploration import explore  # noqa: E402
from harness.outcome import RunOutcome  # noqa: E402
from harness.run import RunOptions, wall  # noqa: E402
from harness.schedules.generate import Size  # noqa: E402
from tests import planted  # noqa: E402

DEFAULT_SEEDS = (0, 1, 2, 3, 4)
DEFAULT_COUNT = 200
QUICK_SIZE = Size(sessions=2, turns=5, faults=5, hosts=2)  # as in tests/test_planted_bugs.py


def steps_of(outcome: RunOutcome) -> int:
    return sum(1 for line in outcome.schedule_toml.splitlines() if line == "[[step]]")


def hunt(adapter: Adapter, invariant: str | None, seed: int, count: int,
         size: Size | None = None) -> dict[str, Any]:
    """One exploration: when (schedules, seconds) it failed, and how small it shrank."""
    detected: list[float] = []
    started = wall()

    def on_run(outcome: RunOutcome) -> None:
        detected.append(wall() - started)

    with wall_clock_follows(VirtualClock()):
        found = explore(adapter, count, seed, RunOptions(report_dir=None, save_history=False),
                        invariant=invariant, on_run=on_run, size=size)
    total = wall() - started
    row: dict[str, Any] = {"seed": seed, "schedules": found.examples, "total_s": total,
                           "found": bool(found.shrunk)}
    if found.shrunk:
        minimal = found.shrunk[0]
        failing = [r.checker for r in minimal.results if r.valid is False]
        row.update(detect_s=detected[-1] if detected else total, steps=steps_of(minimal),
                   failing=failing,
                   also=[c for c in failing if c != invariant])
    return row


SCENARIOS = ROOT / "scenarios"
BUDGET = 100  # generated schedules of `durable-chaos run` by default


def scenario_hits(adapter: Adapter, invariant: str | None) -> tuple[list[str], float]:
    """The scenario files whose run fails `invariant` (any, for None), and the wall seconds
    spent until the first of them (all of them if none fails)."""
    from harness.run import run_schedule
    from harness.schedules.scenario_file import load_scenario

    hits: list[str] = []
    first: float | None = None
    started = wall()
    with wall_clock_follows(VirtualClock()):
        for path in sorted(SCENARIOS.glob("*.toml")):
            outcome = run_schedule(adapter, load_scenario(path),
                                   RunOptions(report_dir=None, save_history=False))
            if any(r.valid is False and (invariant is None or r.checker == invariant)
                   for r in outcome.results):
                hits.append(path.stem)
                if first is None:
                    first = wall() - started
    return hits, first if first is not None else wall() - started


def _budget_job(job: tuple[str, int]) -> tuple[str, dict[str, Any]]:
    name, seed = job
    if name == "reference":
        adapter, invariant = load_adapter("reference"), None
    else:
        module = planted.load(name)
        adapter, invariant = module.ADAPTER, module.INVARIANT
    hits, scenario_s = scenario_hits(adapter, invariant)
    row = hunt(adapter, invariant, seed, BUDGET, None)
    row.update(scenarios=hits, scenario_s=scenario_s, generated=row["found"],
               found=row["found"] or bool(hits))
    return name, row


class _Inline:
    """`ProcessPoolExecutor`'s `map` in this process (for --jobs 1)."""

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def map(self, fn: Any, items: Any) -> Any:
        return map(fn, items)


def budget(seeds: tuple[int, ...] = DEFAULT_SEEDS, bugs: tuple[str, ...] = planted.MODULES,
           control: bool = True, jobs: int = 1) -> dict[str, Any]:
    """The default budget of `durable-chaos run` per bug and seed (see the module doc)."""
    names = (*bugs, "reference") if control else bugs
    work = [(name, seed) for name in names for seed in seeds]
    done: list[tuple[str, dict[str, Any]]] = []
    with ProcessPoolExecutor(jobs) if jobs > 1 else _Inline() as pool:
        for name, row in pool.map(_budget_job, work):
            done.append((name, row))
            # Progress on stderr, one line per bug and seed: a long run shows where it is.
            print(json.dumps({"bug": name, **row}), file=sys.stderr, flush=True)
    per: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for name, row in done:
        per[name].append(row)
    bugs_out = {}
    for name, rows in per.items():
        gen = [r for r in rows if r["generated"]]
        bugs_out[name] = {
            "invariant": None if name == "reference" else planted.load(name).INVARIANT,
            "found": f"{sum(1 for r in rows if r['found'])} of {len(rows)}",
            "generated": f"{len(gen)} of {len(rows)}",
            "scenarios": rows[0]["scenarios"] if rows else [],
            "schedules": _spread([r["schedules"] for r in gen]),
            "detect_s": _spread([r["detect_s"] for r in gen]),
            "steps": _spread([r["steps"] for r in gen]),
            "runs": rows,
        }
    return {"seeds": list(seeds), "count": BUDGET, "size": asdict(Size()), "budget": True,
            "bugs": bugs_out}


def budget_table(result: dict[str, Any]) -> str:
    head = ("bug", "invariant", "found", "by generated", "schedules", "detect s",
            "shrunk steps", "scenario files that catch it")
    lines = [head]
    for name, fig in result["bugs"].items():
        gen = [r for r in fig["runs"] if r["generated"]]
        lines.append((name, fig["invariant"] or "(control: none)", fig["found"],
                      fig["generated"], _fmt(_spread([r["schedules"] for r in gen])),
                      _fmt(_spread([r["detect_s"] for r in gen]), 1),
                      _fmt(_spread([r["steps"] for r in gen])),
                      ", ".join(s.split("-", 1)[0] for s in fig["scenarios"]) or "-"))
    widths = [max(len(str(row[i])) for row in lines) for i in range(len(head))]
    out = [f"default budget: the scenario files, then {result['count']} generated schedules "
           f"per seed {result['seeds']} at {result['size']}; median (min-max) over the seeds "
           "whose generated schedules found the bug"]
    for i, row in enumerate(lines):
        out.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _job(job: tuple[str, int, int, Size | None]) -> tuple[str, dict[str, Any]]:
    name, seed, count, size = job
    if name == "reference":
        return name, hunt(load_adapter("reference"), None, seed, count, size)
    module = planted.load(name)
    return name, hunt(module.ADAPTER, module.INVARIANT, seed, count, size)


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarise(name: str, rows: list[dict[str, Any]], count: int) -> dict[str, Any]:
    hits = [r for r in rows if r["found"]]
    out: dict[str, Any] = {
        "invariant": None if name == "reference" else planted.load(name).INVARIANT,
        "found": f"{len(hits)} of {len(rows)}",
        "count": count,
        "schedules": _spread([r["schedules"] for r in hits]),
        "detect_s": _spread([r["detect_s"] for r in hits]),
        "total_s": _spread([r["total_s"] for r in hits]),
        "steps": _spread([r["steps"] for r in hits]),
        "runs": rows,
    }
    return out


def measure(*, quick: bool = False, seeds: tuple[int, ...] = DEFAULT_SEEDS,
            count: int = DEFAULT_COUNT, bugs: tuple[str, ...] = planted.MODULES,
            control: bool = False, jobs: int = 1, size: Size | None = None) -> dict[str, Any]:
    """Figures per bug (what `benchmarks/run_all.py` reads: {"bugs": {name: figures}}).

    `quick`: the configuration of tests/test_planted_bugs.py (seed 0, 150 schedules, the
    small generator), about half a minute.
    """
    if quick:
        seeds, count, size = (0,), 150, QUICK_SIZE
    names = (*bugs, "reference") if control else bugs
    work = [(name, seed, count, size) for name in names for seed in seeds]
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            done = list(pool.map(_job, work))
    else:
        done = [_job(job) for job in work]
    per: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for name, row in done:
        per[name].append(row)
    return {"seeds": list(seeds), "count": count, "size": asdict(size or Size()),
            "bugs": {name: summarise(name, rows, count) for name, rows in per.items()}}


def _fmt(spread: dict[str, float], digits: int = 0) -> str:
    if not spread:
        return "-"
    f = f"{{:.{digits}f}}"
    return (f"{f.format(spread['median'])} ({f.format(spread['min'])}-"
            f"{f.format(spread['max'])})")


def table(result: dict[str, Any]) -> str:
    head = ("bug", "invariant", "found", "schedules", "detect s", "total s", "shrunk steps")
    lines = [head]
    for name, fig in result["bugs"].items():
        lines.append((name, fig["invariant"] or "(control: none)", fig["found"],
                      _fmt(fig["schedules"]), _fmt(fig["detect_s"], 1),
                      _fmt(fig["total_s"], 1), _fmt(fig["steps"])))
    widths = [max(len(str(row[i])) for row in lines) for i in range(len(head))]
    out = [f"seeds {result['seeds']}, at most {result['count']} schedules each, generator "
           f"{result['size']}; "
           "median (min-max) over the seeds that found the bug"]
    for i, row in enumerate(lines):
        out.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(DEFAULT_SEEDS))
    parser.add_argument("--count", type=int, default=DEFAULT_COUNT,
                        help="at most this many generated schedules per seed")
    parser.add_argument("--bug", action="append", choices=planted.MODULES,
                        help="only this planted bug (repeatable); default: all")
    parser.add_argument("--control", action="store_true",
                        help="also explore the unmodified reference adapter (must find nothing)")
    parser.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    parser.add_argument("--size", default=None, metavar="S,T,F,H",
                        help="generator bounds: sessions,turns,faults,hosts (default: Size())")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--quick", action="store_true",
                        help="the configuration of tests/test_planted_bugs.py only")
    parser.add_argument("--budget", action="store_true",
                        help="the default budget of `durable-chaos run`: scenario files, "
                             f"then {BUDGET} generated schedules per seed")
    args = parser.parse_args(argv)
    if args.budget:
        found = budget(tuple(args.seeds), tuple(args.bug or planted.MODULES),
                       control=args.control, jobs=args.jobs)
        print(json.dumps(found, indent=2) if args.json else budget_table(found))
        return 0
    result = measure(quick=args.quick, seeds=tuple(args.seeds), count=args.count,
                     bugs=tuple(args.bug or planted.MODULES), control=args.control,
                     jobs=args.jobs,
                     size=Size(*map(int, args.size.split(","))) if args.size else None)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
