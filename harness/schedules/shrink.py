"""Shrinking a failing schedule to a minimal one that fails the same way.

Deterministic and greedy, in passes until a pass changes nothing:

1. delete steps: runs of steps (half the schedule, a quarter, ..., one step), each kept out
   if the schedule still fails; at the end no single step can be deleted;
2. simplify what is left, one step at a time: an earlier time (0, the previous step's time,
   just after it, halfway to it, a whole hour or minute), fewer tools on a message, an
   approval rather than a denial, the owner host, the shortest pause, a service fault
   earlier in `contract.services.SERVICE_FAULTS` (a 500 before the work is the simplest
   story) and once rather than several times;
3. the run seed 0.

`fails(schedule)` runs the candidate and says whether it still fails the invariant that
failed first (the caller decides). The same failing schedule always shrinks to the same
minimal one. A `deadline` (on `clock`) stops shrinking between two runs; the smallest
failing schedule so far is returned, with `complete=False`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from harness.faults import FAULTS
from harness.schedules.model import Schedule, Step

# Enough passes for every story seen so far (each pass that changes something makes the
# schedule strictly smaller); a bound, so that shrinking always ends.
MAX_PASSES = 8


@dataclass(frozen=True)
class Shrunk:
    schedule: Schedule
    runs: int
    complete: bool


class _OutOfTime(Exception):
    """The deadline passed between two runs: the smallest failing schedule so far stands."""


def shrink(
    schedule: Schedule,
    fails: Callable[[Schedule], bool],
    *,
    deadline: float | None = None,
    clock: Callable[[], float] | None = None,
) -> Shrunk:
    """The smallest schedule found that still `fails`; see the module docstring."""
    runs = 0

    def still_fails(candidate: Schedule) -> bool:
        nonlocal runs
        if deadline is not None and clock is not None and clock() > deadline:
            raise _OutOfTime()
        runs += 1
        return fails(candidate)

    best = schedule
    try:
        for _ in range(MAX_PASSES):
            before = best
            best = _delete_steps(best, still_fails)
            best = _simplify_steps(best, still_fails)
            if best.seed != 0:
                zero = replace(best, seed=0, name=_named(best.name, 0))
                if still_fails(zero):
                    best = zero
            if best == before:
                break
    except _OutOfTime:
        return Shrunk(best, runs, complete=False)
    return Shrunk(best, runs, complete=True)


def _named(name: str, seed: int) -> str:
    # Generated schedules are named after their run seed (`generated-<seed>`).
    prefix = "generated-"
    return f"{prefix}{seed}" if name.startswith(prefix) else name


def _with(schedule: Schedule, steps: list[Step]) -> Schedule:
    return replace(schedule, steps=tuple(sorted(steps, key=lambda s: s.at)))


def _delete_steps(schedule: Schedule, fails: Callable[[Schedule], bool]) -> Schedule:
    steps = list(schedule.steps)
    chunk = max(1, len(steps) // 2)
    while True:
        i = 0
        while i < len(steps) and steps:
            candidate = steps[:i] + steps[i + chunk:]
            if candidate and fails(_with(schedule, candidate)):
                steps = candidate
            else:
                i += chunk
        if chunk == 1:
            break
        chunk = max(1, chunk // 2)
    return _with(schedule, steps)


def _simplify_steps(schedule: Schedule, fails: Callable[[Schedule], bool]) -> Schedule:
    steps = list(schedule.steps)
    for i in range(len(steps)):
        for simpler in _simpler(steps, i):
            candidate = [*steps[:i], simpler, *steps[i + 1:]]
            if fails(_with(schedule, candidate)):
                steps = sorted(candidate, key=lambda s: s.at)
                break
    return _with(schedule, steps)


def _simpler(steps: list[Step], i: int) -> Iterator[Step]:
    """Simpler versions of step `i`, simplest first."""
    step = steps[i]
    params = dict(step.params)
    previous = steps[i - 1].at if i > 0 else 0.0
    # Earlier, simplest first: at 0, with the step before, just after it, halfway to it, on
    # a whole hour or minute.
    after = (previous + 1, previous + 60, previous + 3600, (previous + step.at) // 2)
    for at in dict.fromkeys((0.0, previous, *after, step.at // 3600 * 3600,
                             step.at // 60 * 60)):
        if at < step.at:
            yield Step(at, step.action, step.params)
    tools = params.get("tools")
    if isinstance(tools, list) and tools:
        for k in range(len(tools)):
            yield _set(step, "tools", tools[:k] + tools[k + 1:])
    if params.get("decision") == "deny":
        yield _set(step, "decision", "approve")
    if params.get("host") not in (None, "owner"):
        yield _set(step, "host", "owner")
    fault = FAULTS.get(step.action)
    if fault is not None:  # a shorter pause, a plainer service fault: the kind says
        for key, value in fault.simpler(step):
            yield _set(step, key, value)
    times = params.get("times")
    if isinstance(times, int) and times > 1:
        yield _set(step, "times", 1)


def _set(step: Step, key: str, value: Any) -> Step:
    return Step(step.at, step.action, tuple((k, value if k == key else v)
                                            for k, v in step.params))
