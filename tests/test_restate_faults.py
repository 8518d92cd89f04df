"""Faults on real processes: an owner worker frozen (SIGSTOP) in the middle of an append.

Each deployment runs two hosts behind one endpoint. The worker reaches a fault point of the
reference code, asks the harness, and stops itself; Restate's HTTP/2 ping to it times out,
its retry of the attempt lands on the other host, which takes the thread (epoch + 1) and
finishes the turn; the harness then resumes the frozen worker, whose append goes on:

- frozen before taking the control row: the append finds a newer epoch and is rejected;
- frozen while holding it: PostgreSQL ends the idle transaction (which lets the other host's
  reassignment through), and the append fails when it resumes.

Both run the scenario files through `run_schedule` (09 and 10), with a horizon of 2 days of
scenario time (10 s here) instead of the default 8 days.
"""

from __future__ import annotations

import pytest
from restate_fixtures import (
    Capturing,
    assert_linear,
    failing,
    groups_gone,
    of,
    require_real_stack,
    run,
    scenario,
)

from harness.history import History, Record

pytestmark = pytest.mark.real


@pytest.fixture(scope="module", autouse=True)
def _real_stack() -> None:
    require_real_stack()


def _frozen_then_overtaken(history: History, point: str) -> tuple[Record, Record, Record]:
    """The host frozen at `point`, the other host's takeover, the frozen host's resume."""
    reached = of(history, "faultpoint.reached", point=point, action="pause")
    assert len(reached) == 1, reached
    frozen = reached[0].host
    first = of(history, "threadlog.assigned", host=frozen)
    assert first, f"{frozen} never took the thread"
    takeover = [r for r in history.of_kind("threadlog.assigned")
                if r.host != frozen and r.time > reached[0].time]
    assert takeover, f"no other host took the thread while {frozen} was frozen"
    assert takeover[0].epoch == (first[-1].epoch or 0) + 1, (first, takeover)
    resumed = of(history, "host.resumed", host=frozen)
    assert resumed, f"{frozen} was never resumed"
    # The thread moved while the owner was frozen, not after it woke up.
    assert takeover[0].time < resumed[0].time, (takeover[0], resumed[0])
    return first[-1], takeover[0], resumed[0]


def test_frozen_before_control_row_its_append_is_rejected() -> None:
    adapter = Capturing()
    outcome = run(adapter, scenario("09-gc-pause-before-control-row.toml", horizon="2d"))
    assert outcome.error is None, outcome.error
    assert failing(outcome) == {}, failing(outcome)
    runtime = adapter.opened[0]
    history = runtime.history
    owned, takeover, resumed = _frozen_then_overtaken(history, "threadlog.append.before_lock")
    rejected = of(history, "threadlog.rejected", host=owned.host)
    assert [r.data["reason"] for r in rejected] == ["StaleEpoch"], rejected
    assert rejected[0].epoch == owned.epoch and rejected[0].time > resumed.time
    log = assert_linear(history, "s1")
    assert log and all(r.data["owner"] == takeover.host for r in log), log
    groups_gone(runtime.process_groups())


def test_frozen_holding_control_row_postgres_ends_it_and_commit_fails() -> None:
    adapter = Capturing()
    outcome = run(adapter, scenario("10-gc-pause-holding-control-row.toml", horizon="2d"))
    assert outcome.error is None, outcome.error
    assert failing(outcome) == {}, failing(outcome)
    runtime = adapter.opened[0]
    history = runtime.history
    owned, takeover, resumed = _frozen_then_overtaken(history, "threadlog.append.locked")
    rejected = of(history, "threadlog.rejected", host=owned.host)
    assert [r.data["reason"] for r in rejected] == ["TransactionAborted"], rejected
    assert "idle-in-transaction timeout" in str(rejected[0].data["detail"]), rejected[0]
    assert rejected[0].time > resumed.time
    log = assert_linear(history, "s1")
    assert log and all(r.data["owner"] == takeover.host for r in log), log
    groups_gone(runtime.process_groups())
