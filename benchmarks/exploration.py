"""Exploration speed: generated schedules per second on one core, and simulated seconds per
wall second, at the fixed size Size(sessions=3, turns=10, faults=5).

Two measurements, both on the reference adapter (simulator + every checker):

(a) ``run_schedule``: schedules generated beforehand (not timed), then run one by one;
(b) ``explore``: the whole loop, generation included (what ``durable-chaos run`` does for
    its generated part).

Both run inside one ``wall_clock_follows`` scope, as ``run_suite`` does (starting freezegun
costs more than a schedule, so the suite starts it once).

    python benchmarks/exploration.py [--schedules 200] [--repeats 5] [--json]
    python benchmarks/exploration.py --reach [--schedules 1000] [--seeds 1 2 3] [--adapter A]
    python benchmarks/exploration.py --fanout [--schedules 600] [--ray]
    PYTHONPATH=other/checkout python benchmarks/exploration.py --explore-only
    python -m cProfile -s cumtime benchmarks/exploration.py --schedules 300 --repeats 1

``--fanout``: the fan-out of ``durable-chaos run`` (harness.fanout) with 1 and 2 worker
processes (and, with ``--ray``, a local Ray instance with 2 workers): generated schedules per
second including worker start-up, and the time to the first failure of each planted bug
(seed 0, merged in batch order, before shrinking).

Wall time comes from ``harness.run.wall`` (the real perf_counter, out of freezegun's
reach). Timing lives here, never in tests (the machines are shared and noisy).

Besides the rates, each measurement prints the work of one schedule (history records,
coroutine steps of the simulator, invocations created; counted in a separate untimed pass
over the same schedules) and what one unit of it costs in CPU time at the median rate per
CPU second (on a shared machine the CPU rate moves less than the wall-clock one).

``--reach`` measures what exploration reaches instead of how fast: per invariant, the share
of generated schedules (default size, ``Size()``, as ``durable-chaos run`` uses) whose run
reached the invariant's window (``Result.reached``), and every run that failed an invariant
(on the reference, each one is a false positive of a checker or a bug of the reference).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from harness.adapters import load_adapter
from harness.clock import VirtualClock, wall_clock_follows
from harness.exploration import explore
from harness.run import RunOptions, run_schedule, wall
from harness.schedules.generate import Size, schedules
from harness.schedules.model import Schedule

# Kept before any freezer starts (freezegun may patch time functions).
_cpu = time.process_time
SIZE = Size(sessions=3, turns=10, faults=5)


def generate(count: int, seed: int = 1, size: Size = SIZE) -> list[Schedule]:
    """``count`` schedules of the generator ``explore`` uses (deterministic for a seed)."""
    return list(schedules(seed, count, size))


class _Counting:
    """An adapter that opens the wrapped one's runtimes and keeps each run's history and
    runtime, so that the work a run did can be counted after it (outside any timing)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.opened: list[tuple[Any, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def open(self, ctx: Any) -> Any:
        runtime = self.inner.open(ctx)
        self.opened.append((ctx.history, runtime))
        return runtime


def work(batch: list[Schedule], adapter_name: str = "reference") -> dict[str, float]:
    """The work of one schedule, averaged over ``batch`` (a separate, untimed pass; the
    simulator is deterministic, so the timed passes did the same): history records,
    coroutine steps of the simulator, invocations created, and steps of the schedule."""
    adapter = _Counting(load_adapter(adapter_name))
    options = RunOptions(report_dir=None, save_history=False)
    with wall_clock_follows(VirtualClock()):
        for schedule in batch:
            run_schedule(adapter, schedule, options)  # type: ignore[arg-type]
    records = sum(len(history) for history, _ in adapter.opened)
    steps = sum(getattr(getattr(rt, "sim", None), "steps", 0) for _, rt in adapter.opened)
    invocations = sum(1 for history, _ in adapter.opened for r in history
                      if r.kind == "invocation.created")
    n = max(1, len(batch))
    return {"schedules": len(batch), "records": records / n, "coroutine_steps": steps / n,
            "invocations": invocations / n,
            "schedule_steps": sum(len(s.steps) for s in batch) / n}


def per_unit(ms_per_schedule: float, per_schedule: dict[str, float]) -> dict[str, float]:
    """What one unit of work costs, from the milliseconds one schedule takes."""
    return {"us_per_record": 1000 * ms_per_schedule / per_schedule["records"],
            "us_per_coroutine_step": 1000 * ms_per_schedule / per_schedule["coroutine_steps"],
            "ms_per_invocation": ms_per_schedule / max(per_schedule["invocations"], 1e-9)}


def summary(values: list[float]) -> dict[str, float]:
    s = sorted(values)
    return {"median": statistics.median(s), "min": s[0], "max": s[-1], "n": len(s)}


def run_pregenerated(batch: list[Schedule]) -> tuple[float, float, int, float]:
    """(schedules/s, simulated s per wall s, failing runs, schedules per CPU second) for one
    pass over ``batch``."""
    adapter = load_adapter("reference")
    options = RunOptions(report_dir=None, save_history=False)
    virtual = 0.0
    failed = 0
    start, cpu = wall(), _cpu()
    for schedule in batch:
        outcome = run_schedule(adapter, schedule, options)
        virtual += outcome.virtual_time
        failed += outcome.failed
    elapsed, cpu = wall() - start, _cpu() - cpu
    return len(batch) / elapsed, virtual / elapsed, failed, len(batch) / cpu


def run_explore(count: int, seed: int) -> tuple[float, float, int, float]:
    """(schedules/s, simulated s per wall s, examples, schedules per CPU second) of one
    ``explore`` call."""
    adapter = load_adapter("reference")
    options = RunOptions(report_dir=None, save_history=False)
    start, cpu = wall(), _cpu()
    # No invariant is named "(none)": a failing schedule is counted, not shrunk, so the rate
    # is that of exploring (shrinking is timed by benchmarks/bug_finding.py).
    found = explore(adapter, count, seed, options, size=SIZE, invariant="(none)")
    elapsed, cpu = wall() - start, _cpu() - cpu
    virtual = sum(r.virtual_time for r in found.runs)
    return found.examples / elapsed, virtual / elapsed, found.examples, found.examples / cpu


def measure(schedules_per_run: int = 200, repeats: int = 5) -> dict[str, Any]:
    batch = generate(schedules_per_run)
    pre_rates: list[float] = []
    pre_sim: list[float] = []
    pre_cpu: list[float] = []
    exp_rates: list[float] = []
    exp_sim: list[float] = []
    exp_cpu: list[float] = []
    failed = 0
    examples = 0
    with wall_clock_follows(VirtualClock()):
        run_pregenerated(batch[:20])  # warm-up: imports, caches
        for _ in range(repeats):
            rate, sim_rate, failed, cpu_rate = run_pregenerated(batch)
            pre_rates.append(rate)
            pre_cpu.append(cpu_rate)
            pre_sim.append(sim_rate)
        for i in range(repeats):
            rate, sim_rate, examples, cpu_rate = run_explore(schedules_per_run, seed=100 + i)
            exp_rates.append(rate)
            exp_cpu.append(cpu_rate)
            exp_sim.append(sim_rate)
    steps = [len(s.steps) for s in batch]
    explored = [schedule for i in range(repeats) for schedule in
                schedules(100 + i, examples, SIZE)]
    pre_work, exp_work = work(batch), work(explored)
    pre_ms = 1000 / statistics.median(pre_cpu)
    exp_ms = 1000 / statistics.median(exp_cpu)
    return {
        "run_schedule_work_per_schedule": pre_work,
        "run_schedule_cpu_cost_per_unit": per_unit(pre_ms, pre_work),
        "explore_work_per_schedule": exp_work,
        "explore_cpu_cost_per_unit": per_unit(exp_ms, exp_work),
        "size": {"sessions": SIZE.sessions, "turns": SIZE.turns, "faults": SIZE.faults},
        "schedules_per_run": len(batch),
        "mean_steps": statistics.mean(steps),
        "failing_runs": failed,
        "explore_examples": examples,
        "run_schedule_per_s": summary(pre_rates),
        "run_schedule_per_cpu_s": summary(pre_cpu),
        "run_schedule_sim_s_per_wall_s": summary(pre_sim),
        "explore_per_s": summary(exp_rates),
        "explore_per_cpu_s": summary(exp_cpu),
        "explore_sim_s_per_wall_s": summary(exp_sim),
    }


def fanout_rate(count: int, workers: int, ray: str | None = None,
                seed: int = 3) -> dict[str, float]:
    """Schedules per second of one fan-out of ``count`` schedules (start-up included)."""
    from harness.fanout import explore_fanned

    adapter = load_adapter("reference")
    options = RunOptions(report_dir=None, save_history=False)
    start = wall()
    found = explore_fanned(adapter, "reference", count, seed, options, workers=workers,
                           ray=ray)
    elapsed = wall() - start
    return {"schedules": found.examples, "wall_s": elapsed, "per_s": found.examples / elapsed}


def first_failure(spec: str, workers: int, seed: int = 0, count: int = 2000) -> dict[str, Any]:
    """Wall seconds and schedules until the first failing run is merged (no shrinking
    counted: the clock stops at the failing run)."""
    from harness.fanout import explore_fanned

    adapter = load_adapter(spec)
    options = RunOptions(report_dir=None, save_history=False)
    start = wall()
    seen: dict[str, Any] = {}

    def on_run(outcome: Any) -> None:
        seen["n"] = seen.get("n", 0) + 1
        if outcome.failed and "s" not in seen:
            seen["s"] = wall() - start
            seen["at"] = seen["n"]

    explore_fanned(adapter, spec, count, seed, options, workers=workers, on_run=on_run)
    return {"found": "s" in seen, "seconds": seen.get("s"), "schedules": seen.get("at")}


def measure_fanout(count: int, ray: bool) -> dict[str, Any]:
    import os
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests import planted

    out: dict[str, Any] = {"load_average": os.getloadavg()}
    for workers in (1, 2):
        out[f"workers_{workers}"] = fanout_rate(count, workers)
    out["parallel_efficiency"] = (out["workers_2"]["per_s"]
                                  / (2 * out["workers_1"]["per_s"]))
    if ray:
        out["ray_local_2"] = fanout_rate(count, 2, ray="local")
    bugs: dict[str, Any] = {}
    for name in planted.MODULES:
        spec = f"tests.planted.{name}:ADAPTER"
        bugs[name] = {f"workers_{w}": first_failure(spec, w) for w in (1, 2)}
    out["first_failure"] = bugs
    out["load_average_after"] = os.getloadavg()
    return out


def reach(count: int, seeds: list[int], adapter_name: str = "reference") -> dict[str, Any]:
    """Per invariant, how many of ``count`` generated schedules per seed reached its window;
    and the failing runs (invariant, schedule) to look at."""
    from harness.checkers import ALL

    adapter = load_adapter(adapter_name)
    options = RunOptions(report_dir=None, save_history=False)
    reached = {c.name: 0 for c in ALL}
    failures: list[dict[str, Any]] = []
    errors: list[str] = []
    total = 0
    start = wall()
    with wall_clock_follows(VirtualClock()):
        for seed in seeds:
            for schedule in generate(count, seed, Size()):
                outcome = run_schedule(adapter, schedule, options)
                total += 1
                if outcome.error:
                    errors.append(f"{schedule.name}: {outcome.error}")
                for result in outcome.results:
                    if result.reached and result.valid is not None:
                        reached[result.checker] += 1
                    if result.valid is False:
                        failures.append({"seed": seed, "invariant": result.checker,
                                         "witness": result.witness(1),
                                         "schedule": outcome.schedule_toml})
    return {"adapter": adapter_name, "schedules": total, "seeds": seeds,
            "reached": reached, "share": {k: v / total for k, v in reached.items()},
            "failures": failures, "errors": errors, "wall_s": wall() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--schedules", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--fanout", action="store_true")
    parser.add_argument("--ray", action="store_true")
    parser.add_argument("--reach", action="store_true",
                        help="measure the share of schedules reaching each window")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--adapter", default="reference")
    parser.add_argument("--explore-only", action="store_true",
                        help="only explore (seeds 100, 101, ...): runs against another "
                             "checkout too, PYTHONPATH=that/checkout")
    args = parser.parse_args()
    if args.explore_only:
        rows = []
        with wall_clock_follows(VirtualClock()):
            run_explore(10, seed=1)  # warm-up: imports, caches
            for i in range(args.repeats):
                rate, _, examples, cpu_rate = run_explore(args.schedules, seed=100 + i)
                rows.append({"seed": 100 + i, "schedules": examples, "per_s": rate,
                             "per_cpu_s": cpu_rate})
        import harness

        explored = [schedule for row in rows for schedule in
                    schedules(row["seed"], row["schedules"], SIZE)]
        per_schedule = work(explored)
        per_cpu_s = summary([r["per_cpu_s"] for r in rows])
        print(json.dumps({"harness": harness.__file__, "runs": rows,
                          "per_s": summary([r["per_s"] for r in rows]),
                          "per_cpu_s": per_cpu_s, "work_per_schedule": per_schedule,
                          "cpu_cost_per_unit": per_unit(1000 / per_cpu_s["median"],
                                                        per_schedule)},
                         indent=2))
        return
    if args.fanout:
        print(json.dumps(measure_fanout(args.schedules, args.ray), indent=2))
        return
    if args.reach:
        found = reach(args.schedules, args.seeds, args.adapter)
        if args.json:
            print(json.dumps(found, indent=2))
            return
        print(f"{found['adapter']}: {found['schedules']} schedules, seeds {found['seeds']}, "
              f"{found['wall_s']:.0f} s")
        for name, count in found["reached"].items():
            print(f"  {name:24} {count:5} reached ({100 * found['share'][name]:.0f}%)")
        print(f"  {len(found['failures'])} failing results, {len(found['errors'])} errors")
        for failure in found["failures"][:10]:
            print(f"--- seed {failure['seed']} {failure['invariant']}: {failure['witness']}")
            print(failure["schedule"])
        return
    out = measure(args.schedules, args.repeats)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for name in ("run_schedule_per_s", "run_schedule_per_cpu_s", "explore_per_s",
                 "explore_per_cpu_s",
                 "run_schedule_sim_s_per_wall_s", "explore_sim_s_per_wall_s"):
        s = out[name]
        print(f"{name}: median {s['median']:,.1f} (min {s['min']:,.1f}, max {s['max']:,.1f},"
              f" n={s['n']})")
    print(f"{out['schedules_per_run']} schedules per run, mean {out['mean_steps']:.1f} steps, "
          f"{out['failing_runs']} failing")
    for what in ("run_schedule", "explore"):
        w, c = out[f"{what}_work_per_schedule"], out[f"{what}_cpu_cost_per_unit"]
        print(f"{what} work per schedule: {w['records']:.0f} records, "
              f"{w['coroutine_steps']:.0f} coroutine steps, {w['invocations']:.1f} "
              f"invocations; CPU {c['us_per_record']:.2f} us per record, "
              f"{c['us_per_coroutine_step']:.2f} us per coroutine step, "
              f"{c['ms_per_invocation']:.3f} ms per invocation")


if __name__ == "__main__":
    main()
