"""What every checker returns, and how checkers compose.

A checker judges a finished history and returns data, never raises: `valid` is True, False
or None (unknown), with a plain-English witness naming the records that prove it. A checker
that crashes yields unknown. `reached` says whether the run ever reached the window the
invariant is about (a property that passes because nothing reached its window says so).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from harness.history import History, Record

Valid = bool | None


@dataclass(frozen=True, slots=True)
class CheckConfig:
    """Thresholds the checkers judge against; the real path scales them like the runtime."""

    hand_off_after: float = 300.0
    max_wait: float = 8 * 86400.0
    # Slack for work that legitimately happens after the bound (a step, a retry back-off).
    tolerance: float = 60.0
    # After the last fault heals, every session must be idle within this bound.
    liveness_bound: float = 3600.0


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
    """Compose checkers: each runs alone; one that crashes yields unknown, never a crash."""
    results = []
    for checker in checkers:
        try:
            results.append(checker.check(history, config))
        except Exception as exc:
            results.append(Result(checker.name, None, reached=False,
                                  note=f"checker crashed: {type(exc).__name__}: {exc}"))
    return results


CheckFn = Callable[[History, CheckConfig], Result]
