"""The real path's time machinery without a real engine: the autojump clock, the harness's
timer table (what the workers' `TimerPort` registers), and the tolerance the checkers derive
from a run's measured engine latency."""

from __future__ import annotations

import pytest

from harness.checkers.base import CheckConfig, measured, run_checkers
from harness.checkers.pinning import PinningBound
from harness.clock import AutojumpClock
from harness.history import History
from harness.world_server import TimerTable


class FakeReal:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_autojump_clock_counts_real_time_and_jumps_forward_only() -> None:
    real = FakeReal()
    clock = AutojumpClock(real=real)
    assert clock.now() == 0.0
    real.t += 2.5
    assert clock.now() == 2.5
    assert clock.jump_to(300.0) == pytest.approx(297.5)
    real.t += 1.0
    assert clock.now() == pytest.approx(301.0)
    # Behind is a no-op, never a step back.
    assert clock.jump_to(10.0) == 0.0
    assert clock.now() == pytest.approx(301.0)
    assert clock.jumped == pytest.approx(297.5)
    clock.restart(0.0)
    assert clock.now() == 0.0 and clock.jumped == 0.0


def test_timer_table_is_idempotent_and_ordered_by_deadline() -> None:
    now = [0.0]
    table = TimerTable(lambda: now[0])
    assert table.sleep({"id": "a", "awakeable": "a", "seconds": 300, "invocation": "i1"}) == 300
    now[0] = 5.0
    # A step re-run after a crash registers the same timer: same deadline, nothing new.
    assert table.sleep({"id": "a", "awakeable": "a", "seconds": 300, "invocation": "i1"}) == 300
    assert table.send({"id": "s", "service": "P", "handler": "expire", "key": "k",
                       "arg": {"wait": 1}, "seconds": 10}) == 15.0
    assert len(table) == 2
    assert table.next_deadline() == 15.0
    assert table.due(14.9) == []
    due = table.due(300.0)
    assert [t.id for t in due] == ["s", "a"]
    assert due[0].kind == "send" and due[0].arg == {"wait": 1}
    assert due[1].kind == "sleep" and due[1].invocation == "i1"
    assert table.next_deadline() is None


def _suspended(history: History, seconds: float) -> None:
    history.add("deployment.registered", time=0.0, deployment="d1", data={"version": "v1"})
    history.add("invocation.started", time=0.0, invocation="inv1", deployment="d1")
    history.add("invocation.suspended", time=1.0, invocation="inv1", deployment="d1")
    history.add("invocation.resumed", time=1.0 + seconds, invocation="inv1", deployment="d1")
    history.add("invocation.completed", time=2.0 + seconds, invocation="inv1")
    history.add("run.end", time=10.0 + seconds)


def test_measured_latency_is_added_to_the_tolerance_and_named_in_the_witness() -> None:
    config = CheckConfig()
    bound = config.hand_off_after + config.tolerance
    plain = History()
    _suspended(plain, bound + 1.0)
    [result] = run_checkers([PinningBound()], plain, config)
    assert result.valid is False
    assert "measured latency" not in result.witness()

    # The same run on an engine that measured 2 s of latency: within the bound.
    slow = History()
    _suspended(slow, bound + 1.0)
    slow.add("clock.latency", time=slow[-1].time, data={"seconds": 2.0})
    assert measured(config, slow).tolerance == config.tolerance + 2.0
    [result] = run_checkers([PinningBound()], slow, config)
    assert result.valid is True, result.witness()

    # Too long even so: the witness says how much of the tolerance was latency.
    slower = History()
    _suspended(slower, bound + 5.0)
    slower.add("clock.latency", time=slower[-1].time, data={"seconds": 2.0})
    [result] = run_checkers([PinningBound()], slower, config)
    assert result.valid is False
    assert "2s is the engine's measured latency" in result.witness()
