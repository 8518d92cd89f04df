"""What one run and one exploration cost outside the simulator, cut without changing a value.

Pinned: exploring raises the cyclic garbage collector's first threshold for its runs and
restores it (a user's higher threshold is kept); a replay command is the same whether the
program that runs it was looked up before or not, and follows a changed PATH.
"""

from __future__ import annotations

import gc
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import replay
from harness.adapters import load_adapter
from harness.exploration import GC_THRESHOLD, explore
from harness.outcome import RunOutcome
from harness.run import RunOptions

QUIET = RunOptions(report_dir=None, save_history=False)


@pytest.fixture
def threshold() -> Iterator[tuple[int, int, int]]:
    old = gc.get_threshold()
    yield old
    gc.set_threshold(*old)


def _thresholds_seen(count: int = 3) -> list[int]:
    seen: list[int] = []

    def on_run(outcome: RunOutcome) -> None:
        seen.append(gc.get_threshold()[0])

    explore(load_adapter("reference"), count, 1, QUIET, on_run=on_run, shrink=False)
    return seen


def test_exploring_collects_less_often_and_restores_the_threshold(
        threshold: tuple[int, int, int]) -> None:
    gc.set_threshold(700, 10, 10)
    assert _thresholds_seen() == [GC_THRESHOLD] * 3
    assert gc.get_threshold() == (700, 10, 10)


def test_a_higher_threshold_set_by_the_user_is_kept(threshold: tuple[int, int, int]) -> None:
    gc.set_threshold(GC_THRESHOLD * 4, 5, 5)
    assert _thresholds_seen() == [GC_THRESHOLD * 4] * 3
    assert gc.get_threshold() == (GC_THRESHOLD * 4, 5, 5)


def test_the_program_of_a_replay_command_follows_path(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    # program() is remembered per (interpreter, PATH): a changed PATH is looked up again.
    beside = Path(sys.executable).parent / "durable-chaos"
    monkeypatch.setenv("PATH", str(tmp_path))  # no durable-chaos on it
    elsewhere = replay.program()
    assert replay.program() == elsewhere
    monkeypatch.setenv("PATH", str(beside.parent))
    if beside.is_file():
        assert elsewhere == shlex.quote(str(beside))
        assert replay.program() == "durable-chaos"
    else:  # not installed as a script: the interpreter runs the module, whatever PATH says
        assert replay.program() == elsewhere == f"{shlex.quote(sys.executable)} -m harness.cli"
