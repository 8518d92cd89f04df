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


def test_pauses_and_crashes_excuse_no_pinning_and_liveness_is_judged() -> None:
    # The naive design pins v1 through a day-long in-call wait across a redeploy. A crash
    # and a 2-minute GC pause of its hosts are windows of scenario time in the history, as
    # every other record is: they excuse their own minutes, not the day, so the verdict
    # stays a failure (as on the simulator); and the crash's downtime closes (the host
    # restarts after it), so liveness is judged after the faults heal.
    import tomllib

    from harness.schedules.scenario_file import parse_scenario

    adapter = Capturing(name="naive-restate", variant="naive")
    schedule = parse_scenario(tomllib.loads("""
name = "naive-pinned-despite-faults"
horizon = "1d1h"
[[step]]
at = "0s"
do = "message"
session = "s1"
text = "email the contract"
tools = ["send_email"]
[[step]]
at = "1m"
do = "crash"
host = "owner"
[[step]]
at = "3m"
do = "gc-pause"
host = "latest/1"
duration = "2m"
[[step]]
at = "1h"
do = "deploy"
version = "v2"
[[step]]
at = "1d"
do = "answer"
session = "s1"
decision = "approve"
"""), "<inline>", "naive-pinned-despite-faults")
    outcome = run(adapter, schedule)
    assert outcome.error is None, outcome.error
    results = {r.checker: r for r in outcome.results}
    assert results["pinning-bound"].valid is False, results["pinning-bound"].note
    history = adapter.opened[0].history
    crash = history.of_kind("fault.crash")[0]
    restarted = of(history, "host.restarted", host=crash.host)
    assert restarted and restarted[0].index > crash.index
    pause = history.of_kind("fault.gc-pause")[0]
    resumed = of(history, "host.resumed", host=pause.host)[0]
    # One time base: the pause's recorded duration is the span the history shows.
    assert resumed.time - pause.time == pytest.approx(pause.data["duration"], abs=2.0)
    liveness = results["liveness"]
    assert liveness.valid is True and liveness.reached, liveness.note
    assert "never healed" not in liveness.note
    groups_gone(adapter.opened[0].process_groups())
