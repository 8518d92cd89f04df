"""The pytest plugin's generated items fan out too (`--chaos-workers N`, ini `chaos_workers`),
under pytest-xdist as well: the same seed finds the same minimal schedule whatever N."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
BUG = "tests.planted.unfenced_append:ADAPTER"


def _minimal(pytester: pytest.Pytester, report: str, *extra: str) -> str:
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--chaos-adapter", BUG, "--chaos-seed", "0",
        "--chaos-schedules", "200", "--chaos-scenarios", "none", "--chaos-report", report,
        "-k", "generated and fencing", *extra)
    result.assert_outcomes(failed=1)
    saved = sorted((pytester.path / report / "runs").glob("*/fencing-shrunk-*/schedule.toml"))
    assert len(saved) == 1, result.stdout.str()
    return saved[0].read_text(encoding="utf-8")


def test_chaos_workers_under_xdist_find_the_same_minimal_schedule(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the planted bugs live in the repository
    serial = _minimal(pytester, "one")
    pytester.makeini("[pytest]\nchaos_workers = 2\n")
    fanned = _minimal(pytester, "two", "-n", "2")
    assert fanned == serial
    assert "[[step]]" in serial


def test_a_bad_chaos_workers_names_where_it_came_from(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nchaos_workers = zero\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--chaos-adapter",
                                           "reference")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*chaos_workers in the ini file tox.ini*expected a number of "
                                 "worker processes >= 1, got 'zero'*"])
