"""Exploring generated schedules (Hypothesis) and shrinking the first failure."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from harness.adapters import Adapter
from harness.clock import VirtualClock, wall_clock_follows
from harness.outcome import RunOutcome
from harness.run import RunOptions, run_schedule, wall
from harness.schedules.model import Schedule


class InvariantFailed(Exception):
    """Raised inside the Hypothesis property so it shrinks the schedule; carries the run."""

    def __init__(self, outcome: RunOutcome) -> None:
        self.outcome = outcome
        failing = [r.checker for r in outcome.results if r.valid is False]
        super().__init__(f"{', '.join(failing)} failed on {outcome.name}")


_failure_types: dict[str, type[InvariantFailed]] = {}


def _failure_type(invariant: str) -> type[InvariantFailed]:
    # Hypothesis shrinks distinct failures separately by exception type: one per invariant.
    if invariant not in _failure_types:
        name = "".join(p.capitalize() for p in invariant.split("-")) + "Failed"
        _failure_types[invariant] = type(name, (InvariantFailed,), {})
    return _failure_types[invariant]


class _OutOfTime(BaseException):
    """Stops a Hypothesis search when the time budget is spent (not a failure to shrink)."""


class _ShrinkOutOfTime(BaseException):
    """Stops shrinking when the time budget is spent; the smallest failure so far stands."""


class _StopAtFailure(BaseException):
    """Ends a search without shrinking (a batch of a fan-out: the parent shrinks once). A
    BaseException, so that Hypothesis passes it through instead of shrinking it."""


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

    With `invariant`, only that invariant's failure counts (the pytest items per invariant).
    Same seed, same schedules: `durable-chaos replay --seed S` reruns the exploration.
    With `shrink=False` the search stops at the first failure and nothing is shrunk (one
    batch of a fan-out, see harness.fanout). With `keep_histories`, the failing and unknown
    runs keep their histories under `options.report_dir` (a batch brings them back).

    `deadline` (on `wall()`'s clock) bounds generating and shrinking; `shrink_deadline`, when
    given, bounds only the shrinking (a fan-out's parent replays a batch up to its failure,
    which the budget must not cut). When it passes during shrinking, shrinking stops and the
    smallest failing schedule found so far is reported, marked `shrink_cut_short`.
    """
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hyp_seed

    from harness.schedules.generate import Size, schedules, seed_only

    found = Exploration([], [])
    quiet = options if keep_histories else replace(options, save_history=False)
    failing_seen = False
    started = wall()
    shrink_until = shrink_deadline if shrink_deadline is not None else deadline
    # The invariant being shrunk and the smallest failing run of it so far (fewest steps,
    # then shortest text): what stands when the budget cuts shrinking short.
    target: str | None = None
    best: RunOutcome | None = None

    @settings(max_examples=max(1, count), database=None, deadline=None,
              phases=(Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck),
              verbosity=Verbosity.quiet, report_multiple_bugs=False)
    @hyp_seed(seed)
    @given(schedules(size or Size()))
    def prop(schedule: Schedule) -> None:
        nonlocal failing_seen, target, best
        if deadline is not None and wall() > deadline and not failing_seen:
            raise _OutOfTime()
        if failing_seen and shrink_until is not None and wall() > shrink_until:
            raise _ShrinkOutOfTime()
        outcome = run_schedule(adapter, schedule, quiet)
        if not failing_seen:
            found.examples += 1
            found.runs.append(outcome)
            if on_run is not None:
                on_run(outcome)
        failing = [r.checker for r in outcome.results
                   if r.valid is False and (invariant is None or r.checker == invariant)]
        if failing:
            failing_seen = True
            if not shrink:
                raise _StopAtFailure()
            target = target or failing[0]
            if target in failing and (best is None or _size(outcome) < _size(best)):
                best = outcome
            raise _failure_type(failing[0])(outcome)

    try:
        # One freezer for the whole search (starting freezegun costs more than a schedule);
        # each run moves it to its own virtual time. Real runtimes keep real time.
        with seed_only(), _composites_checked_once(), _suite_freezer(adapter):
            prop()
    except _OutOfTime:
        found.out_of_time = True
    except _StopAtFailure:
        pass
    except _ShrinkOutOfTime:
        assert best is not None  # shrinking starts only after a failure
        found.shrink_cut_short = True
        found.shrunk.append(replace(_rerun(adapter, best, options), shrink_cut_short=True))
    except InvariantFailed as failure:
        found.shrunk.append(_rerun(adapter, failure.outcome, options))
    found.wall_time = wall() - started
    return found


def _size(outcome: RunOutcome) -> tuple[int, int]:
    steps = sum(1 for line in outcome.schedule_toml.splitlines() if line == "[[step]]")
    return steps, len(outcome.schedule_toml)


def _rerun(adapter: Adapter, minimal: RunOutcome, options: RunOptions) -> RunOutcome:
    """Re-run the minimal schedule with histories saved, for the report and replay."""
    schedule = _schedule_from(minimal)
    return run_schedule(adapter, replace(schedule, name=f"shrunk-{minimal.name}"), options)


@contextmanager
def _composites_checked_once() -> Iterator[None]:
    """Hypothesis reads and parses the source of every `@st.composite` function it wraps, to
    warn when its `draw` goes unused; the generator defines its composites inside each draw,
    so that happened for every schedule (about a sixth of generating one, measured). Same
    code, same answer: it is asked once per code object. The data drawn do not change.
    Nothing changes if this Hypothesis has no such check (the patch is guarded)."""
    try:
        from hypothesis.strategies._internal import core
    except ImportError:  # pragma: no cover - another Hypothesis
        yield
        return
    original: Any = getattr(core, "is_first_param_referenced_in_function", None)
    if original is None:  # pragma: no cover - another Hypothesis
        yield
        return
    answers: dict[Any, bool] = {}

    def once(f: Any) -> bool:
        code = getattr(f, "__code__", None)
        if code is None:
            return bool(original(f))
        if code not in answers:
            answers[code] = bool(original(f))
        return answers[code]

    name = "is_first_param_referenced_in_function"
    setattr(core, name, once)
    try:
        yield
    finally:
        setattr(core, name, original)


@contextmanager
def _suite_freezer(adapter: Adapter) -> Iterator[None]:
    """One wall-clock freezer for many simulated runs (starting freezegun costs more than a
    whole schedule); each run moves it to its own virtual time. A real runtime keeps the
    real clock: its event loops, timeouts and scaled time must move."""
    if adapter.engine != "sim":
        yield
        return
    with wall_clock_follows(VirtualClock()):
        yield


def _schedule_from(outcome: RunOutcome) -> Schedule:
    import tomllib

    from harness.schedules.scenario_file import parse_scenario

    schedule = parse_scenario(tomllib.loads(outcome.schedule_toml), "<shrunk>", outcome.name)
    return replace(schedule, source="generated", path=None)
