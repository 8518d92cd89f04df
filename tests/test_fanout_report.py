"""The report computes its summary once: the page and the JUnit file share one `Summary`, so
each history file is read from disk once per report (each writer used to read them all)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from harness.history import History
from harness.outcome import SuiteOutcome
from harness.report import write_report
from harness.report.summary import Summary, shrunk_for
from harness.suite import run_suite

BUG = "tests.planted.pinning_minutes:ADAPTER"  # found and shrunk in a second or two


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> SuiteOutcome:
    """One suite with a failing run and its minimal schedule (shrinking costs seconds)."""
    return run_suite([BUG], [], schedules=100, seed=0,
                     report_dir=tmp_path_factory.mktemp("suite"), progress=False, workers=1)


def test_each_history_file_is_read_once_per_report(suite: SuiteOutcome, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with_history = [r.history_path for r in (*suite.runs, *suite.shrunk) if r.history_path]
    assert len(with_history) >= 2  # the failing run and its minimal schedule

    loads: Counter[str] = Counter()
    real = History.load.__func__  # type: ignore[attr-defined]

    def counting(cls: type[History], path: str | Path) -> History:
        loads[str(path)] += 1
        history: History = real(cls, path)
        return history

    monkeypatch.setattr(History, "load", classmethod(counting))
    write_report(suite, tmp_path / "b")
    assert loads and max(loads.values()) == 1, loads
    assert "<failure" in (tmp_path / "b" / "junit.xml").read_text(encoding="utf-8")


def test_the_summary_names_invariants_adapters_and_minimal_schedules_once(
        suite: SuiteOutcome) -> None:
    summary = Summary.of(suite)
    assert summary.adapters == ("planted-pinning-minutes",)
    assert "pinning-bound" in summary.invariants
    failing = suite.runs[-1]
    assert summary.shrunk_for(failing) is shrunk_for(failing, suite)
    assert summary.shrunk_for(failing) is summary.shrunk_for(failing)  # looked up once


@pytest.mark.parametrize("workers", [1, 2])
def test_step_kinds_count_every_generated_schedule_of_a_fan_out(tmp_path: Path,
                                                                workers: int) -> None:
    """Passing runs come back from the workers without their schedule text; each is still
    one schedule of the step-kind counts (they were once all counted as one)."""
    from harness.report.summary import step_kinds_of

    suite = run_suite(["reference"], [], schedules=60, seed=3, report_dir=tmp_path,
                      progress=False, workers=workers)
    generated = [r for r in suite.runs if r.source == "generated"]
    assert len(generated) == 60
    held = step_kinds_of(suite.runs)
    assert held.schedules == 60
    assert dict(held.counts)["message"] == 60
