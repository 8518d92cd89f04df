"""Exploring generated schedules and shrinking the first failure."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import Any

from harness.adapters import Adapter, suite_clock
from harness.outcome import RunOutcome
from harness.run import RunOptions, run_schedule, wall
from harness.schedules.model import Schedule


@dataclass
class Exploration:
    runs: list[RunOutcome]
    shrunk: list[RunOutcome]
    examples: int = 0
    wall_time: float = 0.0
    out_of_time: bool = False
    # The time budget ended while shrinking: `shrunk` holds the smallest failing schedule
    # found by then, not a minimal one.
    shrink_cut_short: bool = False


def explore(
    adapter: Adapter,
    count: int,
    seed: int,
    options: RunOptions,
    *,
    invariant: str | None = None,
    deadline: float | None = None,
    on_run: Callable[[RunOutcome], None] | None = None,
    size: Any = None,
    shrink: bool = True,
    keep_histories: bool = False,
    shrink_deadline: float | None = None,
) -> Exploration:
    """Run up to `count` generated schedules; shrink the first failure to a minimal one.

    Schedules 0 .. `count - 1` of `seed` (`harness.schedules.generate`), in order, until the
    first failure. With `invariant`, only that invariant's failure counts (the pytest items
    per invariant). Same seed, same schedules: `durable-chaos replay --seed S` reruns the
    exploration. With `shrink=False` the search stops at the first failure and nothing is
    shrunk (one batch of a fan-out, see harness.fanout). With `keep_histories`, the failing
    and unknown runs keep their histories under `options.report_dir` (a batch brings them
    back).

    `deadline` (on `wall()`'s clock) bounds generating and shrinking; `shrink_deadline`, when
    given, bounds only the shrinking (a fan-out's parent replays a batch up to its failure,
    which the budget must not cut). When it passes during shrinking, shrinking stops and the
    smallest failing schedule found so far is reported, marked `shrink_cut_short`.
    """
    from harness.schedules.generate import Size, generate

    found = Exploration([], [])
    quiet = options if keep_histories else replace(options, save_history=False)
    started = wall()
    failed: tuple[Schedule, str] | None = None
    # One freezer for the whole search (starting freezegun costs more than a schedule);
    # each run moves it to its own virtual time. Real runtimes keep real time.
    with suite_clock(adapter) or nullcontext(), _fewer_collections():
        for index in range(max(1, count)):
            if deadline is not None and wall() > deadline:
                found.out_of_time = True
                break
            schedule = generate(seed, index, size or Size())
            outcome = run_schedule(adapter, schedule, quiet)
            found.examples += 1
            found.runs.append(outcome)
            if on_run is not None:
                on_run(outcome)
            failing = _failing(outcome, invariant)
            if failing:
                failed = (schedule, failing[0])
                break
        if failed is not None and shrink:
            until = shrink_deadline if shrink_deadline is not None else deadline
            minimal, complete = _shrink(adapter, *failed, options, invariant, until)
            found.shrink_cut_short = not complete
            found.shrunk.append(minimal)
    found.wall_time = wall() - started
    return found


def _failing(outcome: RunOutcome, invariant: str | None) -> list[str]:
    return [r.checker for r in outcome.results
            if r.valid is False and (invariant is None or r.checker == invariant)]


def _shrink(adapter: Adapter, schedule: Schedule, checker: str, options: RunOptions,
            invariant: str | None, deadline: float | None) -> tuple[RunOutcome, bool]:
    """The minimal schedule that still fails `checker` (the first invariant the run
    failed), run again from its scenario file, as a user replays it, with its history
    saved for the report; and whether shrinking completed (False: `deadline` on `wall()`
    cut it short, and the run is the smallest failing schedule found by then)."""
    import tomllib

    from harness.schedules.scenario_file import parse_scenario
    from harness.schedules.shrink import shrink

    quiet = replace(options, save_history=False)

    def fails(candidate: Schedule) -> bool:
        return checker in _failing(run_schedule(adapter, candidate, quiet), invariant)

    result = shrink(schedule, fails, deadline=deadline, clock=lambda: wall())
    minimal = result.schedule
    again = parse_scenario(tomllib.loads(minimal.to_toml()), "<shrunk>", minimal.name)
    again = replace(again, source="generated", path=None, name=f"shrunk-{minimal.name}")
    outcome = run_schedule(adapter, again, options)
    if not result.complete:
        outcome = replace(outcome, shrink_cut_short=True)
    return outcome, result.complete


# The first generation's threshold of the cyclic garbage collector while exploring (Python's
# default: 700 allocations).
GC_THRESHOLD = 5000


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Collect cyclic garbage every `GC_THRESHOLD` allocations, not 700, while exploring.

    A simulated run leaves its simulator, world and history as one cyclic structure (about
    1,700 objects) that only the collector frees. At the default threshold it runs several
    times inside every run, each time traversing the run's live objects and promoting them
    to an older generation, where they are traversed again: 2.1 of 13.2 ms per schedule on
    a quiet machine, 3.1-3.9 of 17-20 ms on a loaded one. With 5,000, more of a run's
    objects are traversed once, when they are garbage: 0.4 ms less in the collector per
    schedule on a quiet machine (1-2% of the CPU; 2,000 and 20,000 about the same, 100,000
    worse), 0.6-0.9 ms on a loaded one (median paired CPU ratios 0.90, 0.93, 1.01; 700 and
    5,000 alternated in one process). Only the collector's timing moves:
    everything is still collected, and no history depends on when (nothing in the harness
    or the reference uses finalizers or weak references; the golden histories are the same
    with a threshold of 100,000). A threshold already set higher by the user is kept, and
    the old one is restored afterwards.
    """
    old = gc.get_threshold()
    if old[0] >= GC_THRESHOLD:
        yield
        return
    gc.set_threshold(GC_THRESHOLD, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)

