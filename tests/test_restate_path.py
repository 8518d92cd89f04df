"""The reference implementation on a real Restate server, with PostgreSQL and Toxiproxy.

Virtual time, as on the simulator (hand_off_after 5 minutes, max_wait 8 days; the harness
fires the engine's timers and jumps its clock when Restate is quiescent); horizons shortened
to just past the last step (the run still waits for Restate to have nothing left to run). Skips when
restate-server, toxiproxy-server or PostgreSQL are missing (`make restate toxiproxy`), fails
instead under CI=true.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field

import pytest
from restate_fixtures import Capturing, failing, groups_gone, require_real_stack, run, scenario

from harness.adapters.base import RunContext
from harness.adapters.restate import RestateRuntime
from harness.checkers.base import CheckConfig
from harness.components.restate import RestateError
from harness.schedules.scenario_file import parse_scenario

pytestmark = pytest.mark.real


@pytest.fixture(scope="module", autouse=True)
def _real_stack() -> None:
    require_real_stack()


def test_reference_on_restate_all_invariants_hold() -> None:
    adapter = Capturing()
    assert isinstance(adapter.check_config(), CheckConfig)
    for name, horizon in (("01-answered-in-2-minutes.toml", "1h"),
                          ("02-answered-after-3-days-across-redeploys.toml", "3d1h")):
        outcome = run(adapter, scenario(name, horizon))
        assert outcome.error is None, outcome.error
        assert failing(outcome) == {}, (name, failing(outcome))
    # Nothing is left running: every process group the runs started is gone.
    for runtime in adapter.opened:
        pgids = runtime.process_groups()
        assert pgids
        groups_gone(pgids)
        # Nor are its logs: the run's log directory goes when the run closes.
        assert not runtime.log_dir.exists()


@dataclass(frozen=True)
class _Probing(Capturing):
    """Before the run, a client calls every handler of the reference directly through
    Restate's ingress, with an empty body."""

    answers: dict[str, int | str] = field(default_factory=dict)

    def open(self, ctx: RunContext) -> RestateRuntime:
        runtime = super().open(ctx)
        for service, handler in (("doTurn", "run"), ("Controller", "toolFinished"),
                                 ("Controller", "turnDone"), ("PendingToolCall", "endWait"),
                                 ("PendingToolCall", "startToolWait"),
                                 ("Controller", "status")):
            key = None if service == "doTurn" else "s9"
            try:
                runtime.restate.admin.send(service, handler, key, {})
                self.answers[f"{service}/{handler}"] = "accepted"
            except RestateError as exc:
                self.answers[f"{service}/{handler}"] = exc.status
        return runtime


def test_the_references_internal_handlers_are_private_on_restate() -> None:
    """A client that reaches Restate's ingress cannot start a turn past the controller, or
    forge a tool's result or the end of a wait: Restate refuses those handlers (400) before
    the reference sees the call; a public one (a status read) is accepted. The run after it
    holds."""
    adapter = _Probing()
    outcome = run(adapter, scenario("01-answered-in-2-minutes.toml", "1h"))
    assert adapter.answers == {"doTurn/run": 400, "Controller/toolFinished": 400,
                               "Controller/turnDone": 400, "PendingToolCall/endWait": 400,
                               "PendingToolCall/startToolWait": 400,
                               "Controller/status": "accepted"}
    assert outcome.error is None, outcome.error
    assert failing(outcome) == {}


def test_naive_on_restate_violates_pinning_measured_by_restate() -> None:
    adapter = Capturing(name="naive-restate", variant="naive")
    outcome = run(adapter, scenario("02-answered-after-3-days-across-redeploys.toml", "3d1h"))
    assert outcome.error is None, outcome.error
    pinning = next(r for r in outcome.results if r.checker == "pinning-bound")
    assert pinning.valid is False, pinning.witness()
    # The evidence is Restate's own: sys_invocation counted invocations pinned to v1 after
    # it was superseded, and v1 drained only once that count reached 0.
    history = adapter.opened[0].history
    v1 = history.of_kind("deployment.registered")[0].deployment
    counts = [r.data["count"] for r in history.of_kind("restate.pinned")
              if r.data["deployment"] == v1]
    assert counts and counts[0] >= 1 and counts[-1] == 0, counts
    # An invocation that sys_invocation showed pinned to v1 stayed not completed for longer
    # than the hand-off bound (the in-call wait of the naive design).
    config = adapter.check_config()
    started = {r.invocation: r for r in history.of_kind("invocation.started")
               if r.deployment == v1 and r.data.get("source") == "sys_invocation"}
    ended = {r.invocation: r for r in history.of_kind("invocation.completed")}
    longest = max(ended[i].time - s.time for i, s in started.items() if i in ended)
    assert longest > config.hand_off_after + config.tolerance, longest
    superseded = next(r for r in history.of_kind("deployment.superseded") if r.deployment == v1)
    drained = next(r for r in history.of_kind("deployment.drained") if r.deployment == v1)
    assert drained.time > superseded.time
    groups_gone(adapter.opened[0].process_groups())


def test_worker_sigstopped_and_resumed() -> None:
    adapter = Capturing()
    schedule = parse_scenario(tomllib.loads("""
name = "paused-worker"
horizon = "1h"
[[step]]
at = "0s"
do = "message"
session = "s1"
text = "look it up"
tools = ["lookup"]
[[step]]
at = "30s"
do = "gc-pause"
host = "latest/1"
duration = "2m"
[[step]]
at = "3m"
do = "message"
session = "s1"
text = "and again"
tools = ["lookup"]
"""), "<inline>", "paused-worker")
    outcome = run(adapter, schedule)
    assert outcome.error is None, outcome.error
    assert failing(outcome) == {}, failing(outcome)
    runtime = adapter.opened[0]
    kinds = [r.kind for r in runtime.history]
    assert "host.resumed" in kinds
    ended = list(runtime.history.of_kind("turn.ended"))
    assert len(ended) == 2
    groups_gone(runtime.process_groups())


def test_eight_days_on_restate_hand_off_at_5_minutes_and_expire_at_8_days_from_the_card(
) -> None:
    # Virtual time on the real engine: the executor's in-call timer and PendingToolCall's
    # delayed expiry are the harness's timers, so the thresholds are the real 5 minutes and
    # 8 days, counted from when the card was shown (not from the waiting row before it).
    from restate_fixtures import of

    from contract.ports import Config

    adapter = Capturing()
    outcome = run(adapter, scenario("03-never-answered-expires.toml"))
    assert outcome.error is None, outcome.error
    assert failing(outcome) == {}, failing(outcome)
    history = adapter.opened[0].history
    card = history.of_kind("tool.awaiting")[0]
    handoff = history.of_kind("tool.handoff")[0]
    expired = of(history, "tool.result", outcome="expired")
    assert expired, [r.data for r in history.of_kind("tool.result")]
    config, tolerance = Config(), adapter.check_config().tolerance
    assert config.hand_off_after <= handoff.time - card.time <= config.hand_off_after + tolerance
    assert expired[0].time - card.time >= config.max_wait
    assert expired[0].time - card.time <= config.max_wait + tolerance
    # History times are scenario seconds, with the wall clock beside them; the 8 days were
    # skipped by the clock's jumps, not waited for.
    assert expired[0].wall is not None and card.wall is not None
    clock = history.of_kind("clock.latency")[0].data
    assert clock["skipped"] > config.max_wait - config.hand_off_after, clock
    assert clock["timers_fired"] >= 2, clock  # the in-call timer, then the expiry
    groups_gone(adapter.opened[0].process_groups())


def test_an_engine_that_never_settles_cannot_hold_the_clock_for_a_scenario_day() -> None:
    # Both hosts frozen outside any fault (no end planned): the turn's invocation retries
    # for ever and the engine is never quiescent. The clock must still reach the next step
    # after `stall_after` real seconds, saying why, instead of taking a real day.
    import threading
    import time as _time

    from harness.adapters.base import RunContext
    from harness.history import History

    adapter = Capturing()
    runtime = adapter.open(RunContext(seed=0, history=History(wall=_time.time), hosts=1))
    try:
        runtime.stall_after = 3.0
        host = runtime._deployments[0].hosts[0]
        host.worker.pause()
        runtime.send_message("s1", {"message_id": "s1.m1", "text": "hi", "user": "alice",
                                    "plan": []})
        done = threading.Event()

        def advance() -> None:
            runtime.advance(86400.0)
            done.set()

        thread = threading.Thread(target=advance, daemon=True)
        thread.start()
        assert done.wait(120), "the clock waited on an engine that never settles"
        assert runtime.now() >= 86400.0
        stalled = runtime.history.of_kind("clock.stalled")
        assert stalled and stalled[0].data["active"], stalled
        host.worker.resume()
    finally:
        runtime.close()
    groups_gone(runtime.process_groups())


def test_naive_on_restate_gets_the_simulators_verdicts_on_a_crash_scenario() -> None:
    # Scaled time once let naive-restate pass pinning-bound here while the simulator failed
    # it (a deployment pinned for hours after being superseded read as seconds). On virtual
    # time every invariant gets the simulator's verdict.
    from restate_fixtures import SCENARIOS

    from harness.adapters import load_adapter
    from harness.run import RunOptions, run_schedule
    from harness.schedules.scenario_file import load_scenario

    schedule = load_scenario(SCENARIOS / "real" / "11-crash-after-email-sent.toml")
    verdicts = {}
    for spec in ("naive", "naive-restate"):
        outcome = run_schedule(load_adapter(spec), schedule,
                               RunOptions(adapter_spec=spec, report_dir=None))
        assert outcome.error is None, outcome.error
        verdicts[spec] = {r.checker: r.outcome for r in outcome.results}
    assert verdicts["naive"]["pinning-bound"] == "fail"
    assert verdicts["naive-restate"] == verdicts["naive"]
