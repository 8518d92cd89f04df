"""What a run produced: plain frozen values that the report, JUnit and the CLI read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.checkers.base import Result
from harness.history import fmt_duration


def printable(text: str) -> str:
    """`text` safe for a terminal: control characters (an ESC that would start an escape
    sequence, a carriage return that would overwrite the line) written as escapes; newlines
    and tabs kept."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in "\n\t" else
                   ch.encode("unicode_escape").decode("ascii") for ch in text)


@dataclass(frozen=True)
class SkippedStep:
    """A step of the schedule the runtime could not take, and the capability it lacks."""

    step: int  # its position in the schedule
    action: str  # "background", "provider", "arm", ...
    at: float  # scenario seconds
    lacks: str  # "Backgroundable", "world endpoint 'provider'", "fault point 'x'"

    def describe(self) -> str:
        return (f"step {self.step} ({self.action} at {fmt_duration(self.at)}) skipped: the "
                f"runtime lacks {self.lacks}")


@dataclass(frozen=True)
class RunOutcome:
    """One schedule (a scenario file or a generated schedule) run against one adapter."""

    name: str
    adapter: str
    seed: int
    source: str  # "scenario" | "generated"
    results: tuple[Result, ...]
    schedule_toml: str  # the schedule as a scenario file you can save and replay
    replay_command: str
    history_path: str | None = None
    virtual_time: float = 0.0
    wall_time: float = 0.0
    faults: dict[str, int] = field(default_factory=dict)  # fault kind -> count injected
    fault_points: dict[str, int] = field(default_factory=dict)  # point -> times reached
    skipped_faults: tuple[str, ...] = ()  # faults the adapter lacked a capability for
    error: str | None = None  # the adapter crashed: every result is unknown
    expected: str | None = None  # a scenario's expected outcome, if it states one
    # Deployments alive over time: (virtual time, number alive) after each change.
    alive: tuple[tuple[float, int], ...] = ()
    # The swimlane timeline of the run (hosts, deployments, invocations, faults), see report.
    timeline: dict[str, Any] = field(default_factory=dict)
    opened: bool = True  # False when the adapter's open() failed: nothing ran at all
    # Steps applied late, dropped (an answer with no open card, an unknown session) or
    # skipped (a fault the runtime lacks the capability for), one line each.
    step_notes: tuple[str, ...] = ()
    # Steps not applied because the runtime lacks what they need (one per step).
    skipped_steps: tuple[SkippedStep, ...] = ()
    # Invariants the adapter's design does not claim (its `claims`, or `--invariants`): still
    # judged, for the reader, but never a failure or an unknown of the run. `results` holds
    # the claimed ones only.
    unclaimed: tuple[Result, ...] = ()
    # A schedule shrunk from a failure, whose shrinking the time budget cut short: the
    # smallest failing schedule found by then, not a minimal one.
    shrink_cut_short: bool = False
    # Invariants the scenario says must be violated (`[expect] fails`): it pins a known bug.
    expected_failures: tuple[str, ...] = ()
    # The kinds of step the schedule holds (`Schedule.step_kinds`, in `STEP_KINDS` order):
    # what the report counts per kind over the generated schedules.
    step_kinds: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        """A violation the scenario did not expect, or an expected one that did not show."""
        return bool(self.unexpected_violations or self.unmet_expectations)

    @property
    def unexpected_violations(self) -> tuple[Result, ...]:
        return tuple(r for r in self.results
                     if r.valid is False and r.checker not in self.expected_failures)

    @property
    def unmet_expectations(self) -> tuple[str, ...]:
        """Invariants `[expect] fails` names that held (or were not checked at all). A run
        that could not be judged meets and misses nothing: it is unknown."""
        if self.error is not None:
            return ()
        by_name = {r.checker: r for r in self.results}
        return tuple(name for name in self.expected_failures
                     if name not in by_name or by_name[name].valid is True)

    @property
    def expected_violations(self) -> tuple[Result, ...]:
        """The violations `[expect] fails` asked for (an expected failure)."""
        return tuple(r for r in self.results
                     if r.valid is False and r.checker in self.expected_failures)

    @property
    def unknown(self) -> bool:
        return self.error is not None or any(r.valid is None for r in self.results)


@dataclass(frozen=True)
class SuiteOutcome:
    """A whole `durable-chaos run` (or a pytest session) against one or more adapters."""

    adapters: tuple[str, ...]
    seed: int
    runs: tuple[RunOutcome, ...]
    wall_time: float
    complete: bool = True  # False when interrupted (Ctrl-C) or the adapter crashed
    # The signal that stopped the suite ("SIGINT", "SIGTERM"), None when it was not stopped.
    interrupted: str | None = None
    environment: dict[str, str] = field(default_factory=dict)
    shrunk: tuple[RunOutcome, ...] = ()  # minimal failing schedules found by shrinking
    # Which scenario sets ran, e.g. ("builtin (15)", "my/scenarios (2)").
    scenario_sets: tuple[str, ...] = ()

    @property
    def unknown_runs(self) -> int:
        """Runs that could not be judged (and found no violation either)."""
        return sum(1 for run in self.runs if run.unknown and not run.failed)

    @property
    def violations(self) -> int:
        """Unexpected violations, plus expected ones (`[expect] fails`) that did not show."""
        return sum(len(run.unexpected_violations) + len(run.unmet_expectations)
                   for run in self.runs)

    def of_adapter(self, adapter: str) -> Sequence[RunOutcome]:
        return [run for run in self.runs if run.adapter == adapter]
