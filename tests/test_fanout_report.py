"""The report computes its summary once: the page and the JUnit file share one `Summary`, so
each history file is read from disk once per report (each writer used to read them all)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from harness.history import History
from harness.report import write_report
from harness.report.summary import Summary, shrunk_for
from harness.suite import run_suite
from tests.test_fanout import BUG, SEED


def test_each_history_file_is_read_once_per_report(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    suite = run_suite([BUG], [], schedules=100, seed=SEED, report_dir=tmp_path / "a",
                      progress=False, workers=1)
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
        tmp_path: Path) -> None:
    suite = run_suite([BUG], [], schedules=100, seed=SEED, report_dir=None, progress=False,
                      workers=1)
    summary = Summary.of(suite)
    assert summary.adapters == ("planted-duplicate-email",)
    assert "no-duplicate-effects" in summary.invariants
    failing = suite.runs[-1]
    assert summary.shrunk_for(failing) is shrunk_for(failing, suite)
    assert summary.shrunk_for(failing) is summary.shrunk_for(failing)  # looked up once
