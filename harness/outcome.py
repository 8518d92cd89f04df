"""What a run produced: plain frozen values that the report, JUnit and the CLI read."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.checkers.base import Result, Violation
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
class StepNote:
    """A step not applied as written, as data: `kind` is "late", "skipped", "dropped",
    "unknown session" or "refused" (an answer the runtime refused by raising); `text` is the
    line a person reads (the summary counts by kind, never by reading the text)."""

    kind: str
    step: int
    text: str


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
    # The same notes as data, in the same order.
    notes: tuple[StepNote, ...] = ()
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
    # How many steps the schedule has (counted once, from the schedule, not its TOML).
    steps: int = 0

    def to_json(self) -> dict[str, Any]:
        """The outcome as JSON-able data (`from_json` reads it back): how an xdist worker
        hands its runs to the controller."""
        from dataclasses import asdict

        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunOutcome:
        from dataclasses import fields

        def result(r: dict[str, Any]) -> Result:
            return Result(r["checker"], r["valid"],
                          tuple(Violation(v["message"], tuple(v["records"]))
                                for v in r["violations"]),
                          r["reached"], r["note"], dict(r["stats"]))

        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["results"] = tuple(result(r) for r in data["results"])
        values["skipped_faults"] = tuple(data.get("skipped_faults", ()))
        values["skipped_steps"] = tuple(SkippedStep(**skip)
                                        for skip in data.get("skipped_steps", ()))
        values["unclaimed"] = tuple(result(r) for r in data.get("unclaimed", ()))
        values["step_notes"] = tuple(data.get("step_notes", ()))
        values["notes"] = tuple(StepNote(**note) for note in data.get("notes", ()))
        values["expected_failures"] = tuple(data.get("expected_failures", ()))
        values["step_kinds"] = tuple(data.get("step_kinds", ()))
        values["alive"] = tuple((float(t), int(n)) for t, n in data.get("alive", ()))
        return cls(**values)

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
    # Evidence that could not be written (a full disk, a read-only directory): the path and
    # why, one line; the suite could not be judged (exit 3).
    output_error: str | None = None

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


# Under pytest-xdist each worker appends its finished runs to a spool file in the report
# directory at once (`spool_runs`), so that a SIGTERM or Ctrl-C that ends the session, or a
# worker killed, still leaves every finished run to the controller's one report
# (`read_spools`).
SPOOL_GLOB = ".xdist-runs-*.jsonl"


def spool_of(report_dir: Path, worker: object) -> Path:
    """The spool file of xdist worker `worker` (its id)."""
    return report_dir / f".xdist-runs-{worker}.jsonl"


def spool_runs(spool: Path, runs: Sequence[RunOutcome],
               shrunk: Sequence[RunOutcome] = ()) -> None:
    """Append finished runs (and minimal schedules found by shrinking) to `spool`."""
    lines = [json.dumps({"shrunk": False, "run": r.to_json()}) for r in runs]
    lines += [json.dumps({"shrunk": True, "run": r.to_json()}) for r in shrunk]
    try:
        with open(spool, "a", encoding="utf-8") as handle:
            handle.write("".join(line + "\n" for line in lines))
    except OSError:
        pass  # the controller reports what it finds; the report says incomplete


def read_spools(report_dir: Path | None) -> tuple[list[RunOutcome], list[RunOutcome]]:
    """The xdist workers' finished runs and minimal schedules, from their spool files
    (removed once read); a line cut short by a kill is skipped."""
    runs: list[RunOutcome] = []
    shrunk: list[RunOutcome] = []
    if report_dir is None:
        return runs, shrunk
    for spool in sorted(report_dir.glob(SPOOL_GLOB)):
        try:
            lines = spool.read_text(encoding="utf-8").splitlines()
            spool.unlink()
        except OSError:
            continue
        for line in lines:
            try:
                data = json.loads(line)
                outcome = RunOutcome.from_json(data["run"])
            except (ValueError, KeyError, TypeError):
                continue
            (shrunk if data.get("shrunk") else runs).append(outcome)
    return runs, shrunk
