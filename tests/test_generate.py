"""The generator steers into the invariants' windows, from the seed alone.

Counts, not speed: on a fixed seed, the share of generated schedules whose run reached each
invariant's window. Uniform steps alone reach conservative-recovery's window in about 4% of
schedules and access-rechecked's in about 20% (`benchmarks/exploration.py --reach`); the
window templates must lift every invariant to at least 30%.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.adapters import load_adapter
from harness.checkers import ALL
from harness.clock import VirtualClock, wall_clock_follows
from harness.runner import RunOptions, run_schedule
from harness.schedules.generate import Size, generate, schedules
from harness.schedules.model import Schedule

COUNT = 60


def _generate(count: int, seed: int, size: Size) -> list[Schedule]:
    return list(schedules(seed, count, size))


@pytest.fixture(scope="module", autouse=True)
def _frozen() -> Iterator[None]:
    with wall_clock_follows(VirtualClock()):
        yield


def test_every_invariant_window_is_reached_in_at_least_30_percent_of_schedules() -> None:
    adapter = load_adapter("reference")
    reached = {c.name: 0 for c in ALL}
    batch = _generate(COUNT, 0, Size())
    assert len(batch) == COUNT
    for schedule in batch:
        outcome = run_schedule(adapter, schedule, RunOptions(report_dir=None,
                                                             save_history=False))
        assert outcome.error is None
        for result in outcome.results:
            assert result.valid is not False, (result.witness(1), schedule.to_toml())
            reached[result.checker] += result.reached
    low = {name: n for name, n in reached.items() if n < 0.3 * COUNT}
    assert not low, f"windows reached by fewer than 30% of {COUNT} schedules: {low}"


def test_without_windows_the_generator_is_uniform_and_recovery_is_rare() -> None:
    """The control: with no windows, no step is placed in a window's own session."""
    batch = _generate(30, 0, Size(windows=0))
    sessions = {step.get("session") for s in batch for step in s.steps}
    assert not any(str(name).startswith("w") for name in sessions)
    steered = _generate(30, 0, Size())
    assert all(any(step.get("text", "").startswith("w") or step.action in ("arm", "provider")
                   for step in s.steps) for s in steered)


def test_same_seed_same_schedules() -> None:
    first = [s.to_toml() for s in _generate(20, 7, Size())]
    assert first == [s.to_toml() for s in _generate(20, 7, Size())]
    assert first != [s.to_toml() for s in _generate(20, 8, Size())]


def test_a_schedule_depends_on_its_seed_and_index_only() -> None:
    """Schedule i of a seed is the same drawn alone, after others, or in another process
    with another hash seed: a batch of a fan-out draws only its own schedules."""
    in_order = _generate(12, 7, Size())
    assert generate(7, 11) == in_order[11]
    assert list(schedules(7, 2, Size(), start=5)) == in_order[5:7]
    code = ("from harness.schedules.generate import generate; "
            "print(generate(7, 11).to_toml(), end='')")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True, cwd=Path(__file__).resolve().parents[1])
    assert out.stdout == in_order[11].to_toml()
