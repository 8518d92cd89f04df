"""What every checker returns, and how checkers compose.

A checker judges a finished history and returns data, never raises: `valid` is True, False
or None (unknown), with a plain-English witness naming the records that prove it. A checker
that crashes yields unknown. `reached` says whether the run ever reached the window the
invariant is about (a property that passes because nothing reached its window says so).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

# CheckConfig's home is the contract (an adapter returns one); the checkers name it from here.
from contract.thresholds import Bound as Bound
from contract.thresholds import CheckConfig as CheckConfig
from harness.history import History, Record, fmt_duration

Valid = bool | None


def limit_at(config: CheckConfig, bound: Bound) -> str:
    """A witness's limit at `bound`: the bound plus the tolerance that applied, named
    when it is the bound's own (`5.0m + 1.7m (the tolerance at hand-off)`)."""
    own = config.hand_off_tolerance if bound == "hand_off" else config.max_wait_tolerance
    value = config.hand_off_after if bound == "hand_off" else config.max_wait
    text = f"{fmt_duration(value)} + {fmt_duration(config.slack(bound))}"
    if own is not None:
        text += f" (the tolerance at {'hand-off' if bound == 'hand_off' else 'max_wait'})"
    return text + tolerance_note(config)




def measured(config: CheckConfig, history: History) -> CheckConfig:
    """`config` with the engine's measured latency added to its tolerance.

    A real engine on virtual time acts on a timer later than the simulator does, by the
    real seconds it takes to run the woken work and settle (Restate reads an invocation
    `running` until its inactivity timeout suspends it). The runtime measures the longest
    such delay of the run (`clock.latency`); the checkers allow it on top of the tolerance
    the simulator gets, and their witnesses say how much of the tolerance it is.
    """
    for record in reversed(history.records):
        if record.kind == "clock.latency":
            latency = max(0.0, float(record.data.get("seconds", 0.0)))
            return replace(
                config, tolerance=config.tolerance + latency, latency=latency,
                hand_off_tolerance=_plus(config.hand_off_tolerance, latency),
                max_wait_tolerance=_plus(config.max_wait_tolerance, latency))
    return config


def _plus(tolerance: float | None, latency: float) -> float | None:
    return None if tolerance is None else tolerance + latency


def tolerance_note(config: CheckConfig) -> str:
    """What a witness adds after its limit when part of the tolerance is measured latency."""
    if config.latency <= 0:
        return ""
    return (f", of which {fmt_duration(config.latency)} is the engine's measured latency "
            f"(clock.latency)")


@dataclass(frozen=True, slots=True)
class Violation:
    """One counterexample: a sentence and the history records that prove it."""

    message: str
    records: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Result:
    checker: str
    valid: Valid
    violations: tuple[Violation, ...] = ()
    reached: bool = True
    note: str = ""
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def outcome(self) -> str:
        return {True: "pass", False: "fail", None: "unknown"}[self.valid]

    def witness(self, limit: int = 3) -> str:
        if self.valid is None:
            return self.note or "unknown"
        lines = [v.message for v in self.violations[:limit]]
        more = len(self.violations) - limit
        if more > 0:
            lines.append(f"... and {more} more")
        return "\n".join(lines)


class Checker(Protocol):
    name: str
    description: str

    def check(self, history: History, config: CheckConfig) -> Result: ...


def verdict(
    name: str,
    violations: Sequence[Violation],
    *,
    reached: bool = True,
    note: str = "",
    stats: dict[str, float] | None = None,
) -> Result:
    # A violation is the window reached: a failing result is never "not reached".
    return Result(name, not violations, tuple(violations), reached or bool(violations), note,
                  stats or {})


def cite(records: Iterable[Record]) -> tuple[int, ...]:
    return tuple(sorted({r.index for r in records}))


def run_checkers(
    checkers: Iterable[Checker], history: History, config: CheckConfig
) -> list[Result]:
    """Compose checkers: each runs alone; one that crashes yields unknown, never a crash.
    The tolerance includes the engine's measured latency, if the history records one.

    A checker that declares the record kinds it `reads` is given only those records (see
    `dispatch`): one pass over the history for all checkers, instead of every checker
    walking every record to skip most of them."""
    checkers = tuple(checkers)
    # The engine's latency records come from the same pass, as the view of one more reader,
    # instead of a walk of their own over the history (the simulator records none, so
    # `measured` walked every record: 27 us of a generated schedule of 980 records).
    *views, latency = dispatch((*checkers, _LATENCY_READER), history)
    config = measured(config, latency)
    results = []
    for checker, view in zip(checkers, views, strict=True):
        try:
            results.append(checker.check(view, config))
        except Exception as exc:
            results.append(Result(checker.name, None, reached=False,
                                  note=f"checker crashed: {type(exc).__name__}: {exc}"))
    return results


def dispatch(checkers: Sequence[object], history: History) -> list[History]:
    """For each checker, the history it judges: the records of the kinds it `reads` (a
    frozenset of kinds; a kind ending in `.*` stands for every kind with that prefix), in
    order, and always the first and the last record (when the run started and ended); the
    whole history for a checker that declares nothing. Anything with `reads` may be
    dispatched (`run_checkers` adds a reader of `clock.latency`).

    Exact by construction: a checker skips every kind it does not read, and the records it
    reads keep their order and indexes, so it finds the same violations in its view as in
    the whole history (tests/test_checkers.py checks this on generated runs)."""
    records = history.records
    wanted = tuple(getattr(c, "reads", None) for c in checkers)
    if not records or all(w is None for w in wanted):
        return [history] * len(wanted)
    route = _routes.get(wanted)
    if route is None:
        route = _routes[wanted] = {}
    lists: list[list[Record]] = [[] for _ in wanted]
    for r in records:
        kind = r.kind
        targets = route.get(kind)
        if targets is None:
            targets = route[kind] = tuple(
                i for i, w in enumerate(wanted) if w is not None and _reads(w, kind))
        for i in targets:
            lists[i].append(r)
    first, last = records[0], records[-1]
    views: list[History] = []
    for w, lst in zip(wanted, lists, strict=True):
        if w is None:
            views.append(history)
            continue
        if not lst or lst[0] is not first:
            lst.insert(0, first)
        if lst[-1] is not last:
            lst.append(last)
        views.append(History.from_records(lst))
    global _cut
    _cut = (history, tuple(views))
    return views


# The history the views of the last `dispatch` were cut from. A checker that reads the run's
# model (harness.checkers.model) asks for the model of its view and gets the whole
# history's, built once for every checker of the run (`root_of`).
_cut: tuple[History, tuple[History, ...]] | None = None


def root_of(history: History) -> History:
    """The whole history `history` is a view of (from the last `dispatch`), else itself."""
    cut = _cut
    if cut is not None and any(view is history for view in cut[1]):
        return cut[0]
    return history


class _LatencyReader:
    """Not a checker: the reader of `clock.latency` records that `run_checkers` dispatches
    for `measured`."""

    name = "clock.latency"
    reads: frozenset[str] = frozenset({"clock.latency"})


_LATENCY_READER = _LatencyReader()


# Which checkers (by position) read each kind, per combination of `reads`: worked out once
# per kind, not once per run.
_routes: dict[tuple[frozenset[str] | None, ...], dict[str, tuple[int, ...]]] = {}


def _reads(wanted: frozenset[str], kind: str) -> bool:
    if kind in wanted:
        return True
    prefix, dot, _ = kind.partition(".")
    return bool(dot) and f"{prefix}.*" in wanted


CheckFn = Callable[[History, CheckConfig], Result]
