"""What one run and one exploration cost outside the simulator, cut without changing a value.

Pinned: exploring raises the cyclic garbage collector's first threshold for its runs and
restores it (a user's higher threshold is kept); a replay command is the same whether the
program that runs it was looked up before or not, and follows a changed PATH.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

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
