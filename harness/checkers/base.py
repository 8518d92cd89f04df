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

from harness.history import History, Record, fmt_duration

Valid = bool | None


@dataclass(frozen=True, slots=True)
class CheckConfig:
    """Thresholds the checkers judge against, in scenario seconds on every engine."""

    hand_off_after: float = 300.0
    max_wait: float = 8 * 86400.0
    # Slack for work that legitimately happens after the bound (a step, a retry back-off).
    tolerance: float = 60.0
    # After the last fault heals, every session must be idle within this bound.
    liveness_bound: float = 3600.0
    # Of `tolerance`, the part a real engine's own latency needed (see `measured`).
    latency: float = 0.0


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
            return replace(config, tolerance=config.tolerance + latency, latency=latency)
    return config


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
    return Result(name, not violations, tuple(violations), reached, note, stats or {})


def cite(records: Iterable[Record]) -> tuple[int, ...]:
    return tuple(sorted({r.index for r in records}))


def run_checkers(
    checkers: Iterable[Checker], history: History, config: CheckConfig
) -> list[Result]:
    """Compose checkers: each runs alone; one that crashes yields unknown, never a crash.
    The tolerance includes the engine's measured latency, if the history records one."""
    config = measured(config, history)
    results = []
    for checker in checkers:
        try:
            results.append(checker.check(history, config))
        except Exception as exc:
            results.append(Result(checker.name, None, reached=False,
                                  note=f"checker crashed: {type(exc).__name__}: {exc}"))
    return results


CheckFn = Callable[[History, CheckConfig], Result]
