"""What the HTML page and the JUnit file both read, computed once per report.

`write_report` builds one `Summary` and hands it to both writers: the invariants and adapters
of the suite, each run's minimal schedule, and the histories, each file read from disk once
(before, each writer loaded every history again, and `junit.py` reached into the page's
private helpers for the rest).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from harness.checkers import ALL
from harness.checkers.base import Result, Valid
from harness.history import History
from harness.outcome import RunOutcome, SuiteOutcome
from harness.schedules.model import STEP_KINDS

# Characters XML 1.0 forbids and HTML calls parse errors; shown as visible escapes instead.
_CONTROL: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def clean(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", text)


def effective(run: RunOutcome, result: Result) -> Valid:
    """A run whose adapter crashed proves nothing either way: every result is unknown. An
    invariant the scenario expects to fail (`[expect] fails`) is turned around: violated is
    as expected (True, shown as an expected failure), holding is the failure."""
    if run.error is not None:
        return None
    if result.checker in run.expected_failures and result.valid is not None:
        return not result.valid
    return result.valid


def expected_failure(run: RunOutcome, result: Result) -> bool:
    """The violation a scenario's `[expect] fails` asked for."""
    return run.error is None and result in run.expected_violations


def unmet_note(result: Result) -> str:
    """Why an invariant the scenario expects to fail counts as failed although it held."""
    return (f"{result.checker} held, but the scenario expects it to fail ([expect] fails): "
            "the known bug it pins did not show. If the bug was fixed, remove "
            f"{result.checker} from [expect] fails.")


def invariants(runs: Iterable[RunOutcome]) -> list[str]:
    """Every invariant of the runs, claimed or not, in the order the runs judged them."""
    names: dict[str, None] = {}
    for run in runs:
        for r in (*run.results, *run.unclaimed):
            names.setdefault(r.checker, None)
    # The design's order, claimed or not; a user's own checkers after, as they came.
    order = {c.name: i for i, c in enumerate(ALL)}
    return sorted(names, key=lambda n: order.get(n, len(order)))


@dataclass(frozen=True)
class SkippedKind:
    """Skipped steps of one action for one missing capability, over some runs."""

    action: str
    lacks: str
    steps: int
    runs: int
    example: str  # "RUN: step N (...) skipped: ..."

    def describe(self) -> str:
        return (f"{self.steps} {self.action} (lacks {self.lacks}) in {self.runs} run(s)")


def skipped_kinds(runs: Iterable[RunOutcome]) -> list[SkippedKind]:
    """The runs' skipped steps grouped by (action, what the runtime lacks), in first-seen
    order: what a reader must know was never tried."""
    steps: dict[tuple[str, str], int] = {}
    seen: dict[tuple[str, str], set[tuple[str, int, str]]] = {}
    example: dict[tuple[str, str], str] = {}
    for run in runs:
        for skip in run.skipped_steps:
            key = (skip.action, skip.lacks)
            steps[key] = steps.get(key, 0) + 1
            seen.setdefault(key, set()).add((run.name, run.seed, run.adapter))
            example.setdefault(key, f"{run.name}: {skip.describe()}")
    return [SkippedKind(a, lacks, n, len(seen[(a, lacks)]), example[(a, lacks)])
            for (a, lacks), n in steps.items()]


@dataclass(frozen=True)
class StepKinds:
    """How many generated schedules held each kind of step (`STEP_KINDS`): whether the
    exploration reached every step a scenario file can hold."""

    schedules: int  # distinct generated schedules (each adapter runs the same ones)
    counts: tuple[tuple[str, int], ...]  # every kind, in `STEP_KINDS` order, 0 included

    @property
    def never(self) -> list[str]:
        return [kind for kind, n in self.counts if n == 0]

    def describe(self) -> str:
        """One line: the kinds no schedule held, else the rarest."""
        if not self.schedules:
            return "no generated schedule"
        never = self.never
        if never:
            # A few names: an exploration that stopped at its first failure ran too few
            # schedules to hold most kinds, and the report lists them all.
            named = ", ".join(never[:5]) + (f" and {len(never) - 5} more" if len(never) > 5
                                            else "")
            return (f"{len(self.counts) - len(never)} of {len(self.counts)} step kinds in "
                    f"{self.schedules} generated schedule(s); never: {named}")
        kind, n = min(self.counts, key=lambda c: c[1])
        return (f"all {len(self.counts)} step kinds in {self.schedules} generated schedule(s);"
                f" rarest: {kind} in {n}")


def step_kinds_of(runs: Iterable[RunOutcome]) -> StepKinds:
    """Per step kind, the generated schedules holding it, each schedule counted once."""
    seen: set[str] = set()
    counts = dict.fromkeys(STEP_KINDS, 0)
    for run in runs:
        if run.source != "generated" or run.schedule_toml in seen:
            continue
        seen.add(run.schedule_toml)
        for kind in run.step_kinds:
            counts[kind] = counts.get(kind, 0) + 1
    return StepKinds(len(seen), tuple(counts.items()))


@dataclass(frozen=True)
class Unclaimed:
    """An invariant the adapter does not claim: how its runs would have been judged."""

    invariant: str
    runs: int
    would_fail: int  # runs where it was violated (shown, never counted)
    example: str  # the first such violation, "" if none


def unclaimed_of(runs: Iterable[RunOutcome]) -> list[Unclaimed]:
    """The invariants some run does not claim, with how often they would have failed."""
    counts: dict[str, list[int]] = {}
    example: dict[str, str] = {}
    for run in runs:
        for r in run.unclaimed:
            count = counts.setdefault(r.checker, [0, 0])
            count[0] += 1
            if r.valid is False and run.error is None:
                count[1] += 1
                first = r.violations[0].message if r.violations else r.note
                example.setdefault(r.checker, f"{run.name}: {first}")
    return [Unclaimed(name, n, bad, example.get(name, "")) for name, (n, bad) in counts.items()]


def not_claimed_note(adapter: str) -> str:
    """Why an unclaimed invariant is neither a pass nor a failure, one line."""
    return (f"not claimed: adapter {adapter} does not claim this invariant (its `claims`, or "
            "--invariants / chaos_invariants), so it is judged for information only and "
            "never fails the run")


class Histories:
    """Loads each run's history file once; a missing or broken file is a note, not a crash."""

    def __init__(self) -> None:
        self._cache: dict[str, History | str] = {}

    def get(self, run: RunOutcome) -> History | str:
        if not run.history_path:
            return "no history file was recorded for this run"
        path = run.history_path
        if path not in self._cache:
            try:
                self._cache[path] = History.load(path)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                self._cache[path] = (f"history file {path} could not be read: "
                                     f"{type(exc).__name__}: {exc}")
        return self._cache[path]


def shrunk_for(run: RunOutcome, suite: SuiteOutcome) -> RunOutcome | None:
    """The minimal schedule shrunk from this run: named after it (`shrunk-NAME`), or, for a
    generated run, the one the exploration of its adapter shrank for the same invariant
    (exploration stops at its first failure, so there is one such run per adapter)."""
    failing = {r.checker for r in run.results if effective(run, r) is False}
    fallback = None
    for cand in suite.shrunk:
        if cand.adapter != run.adapter:
            continue
        if not failing & {r.checker for r in cand.results if r.valid is False}:
            continue
        if cand.name in (run.name, f"shrunk-{run.name}"):
            return cand
        if run.source == "generated" and fallback is None:
            fallback = cand
    return fallback


def adapters_of(suite: SuiteOutcome) -> list[str]:
    """The suite's adapters, then any other adapter a run names, in order."""
    names = dict.fromkeys(suite.adapters)
    for run in suite.runs:
        names.setdefault(run.adapter, None)
    return list(names)


@dataclass(frozen=True)
class Summary:
    """The suite's derived data, computed once and shared by the page and the JUnit file."""

    suite: SuiteOutcome
    invariants: tuple[str, ...]
    adapters: tuple[str, ...]
    histories: Histories = field(default_factory=Histories)
    _shrunk: dict[int, RunOutcome | None] = field(default_factory=dict)

    @classmethod
    def of(cls, suite: SuiteOutcome) -> Summary:
        return cls(suite, tuple(invariants(suite.runs)), tuple(adapters_of(suite)))

    def shrunk_for(self, run: RunOutcome) -> RunOutcome | None:
        key = id(run)
        if key not in self._shrunk:
            self._shrunk[key] = shrunk_for(run, self.suite)
        return self._shrunk[key]
