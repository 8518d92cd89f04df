"""The run model (harness.checkers.model): one pass over a history, read by the checkers and the
timeline. Hand-made histories pin what each part of it says."""

from __future__ import annotations

import math
from typing import Any

from harness.checkers import ALL, run_checkers
from harness.checkers.base import CheckConfig
from harness.checkers.model import build, model_of
from harness.history import History


def _history() -> History:
    h = History()
    h.add("deployment.registered", deployment="dep1", data={"version": "v1", "hosts": ["h1"]})
    h.add("invocation.created", invocation="inv1", data={"target": "Controller/onMessage",
                                                          "key": "s1"})
    h.add("invocation.started", invocation="inv1", deployment="dep1", host="h1")
    h.add("turn.started", session="s1", turn="t1", data={"message": "s1.m1"})
    h.add("invocation.suspended", invocation="inv1", deployment="dep1")
    h.add("fault.gc-pause", "info", host="h1", data={"duration": 30.0})
    h.add("host.paused", host="h1", deployment="dep1")
    h.add("host.resumed", host="h1", deployment="dep1")
    h.add("fault.crash", "info", host="h2")
    h.add("host.crashed", host="h2")
    h.add("host.restarted", host="h2")
    h.add("threadlog.assigned", session="s1", epoch=2, data={"owner": "h2"})
    h.add("deployment.superseded", deployment="dep1", data={"by": "dep2", "pinned": 1})
    h.add("invocation.resumed", invocation="inv1")
    h.add("turn.ended", session="s1", turn="t1", data={"reason": "completed"})
    h.add("invocation.completed", invocation="inv1")
    h.add("fault.heal", "info", data={"at": 0.0})
    h.add("run.end")
    return h


def test_fault_windows_end_as_their_kind_says() -> None:
    model = build(_history())
    windows = {w.kind: w for w in model.fault_windows}
    assert windows["gc-pause"].end == 30.0  # its duration
    assert windows["gc-pause"].target == "h1"
    assert windows["crash"].end == 0.0  # the host's restart (all at t=0 here)
    assert windows["heal"].end is None  # an instant
    assert set(windows) == {"gc-pause", "crash", "heal"}
    assert not model.faults.unhealed
    assert model.faults.records_end == 30.0


def test_an_open_pause_stays_open_and_a_crash_without_restart_is_an_instant() -> None:
    h = History()
    h.add("fault.gc-pause", "info", host="h1")
    h.add("fault.crash", "info", host="h2")
    h.add("run.end")
    model = build(h)
    pause, crash = model.fault_windows
    assert pause.end is None and pause.open_until_end
    assert crash.end is None and not crash.open_until_end
    assert model.faults.unhealed


def test_sessions_invocations_pins_and_deployments() -> None:
    model = build(_history())
    s1 = model.sessions["s1"]
    assert len(s1.busy) == 1 and s1.busy[0].until is not None
    assert s1.busy[0].until.kind == "turn.ended"
    (inv,) = model.invocations
    assert inv.completed and inv.name == "inv1 Controller/onMessage"
    assert [a.state for a in inv.active] == ["running", "running"]
    pinned = model.pins["inv1"]
    assert [p.deployment for p in pinned.pins] == ["dep1"]
    assert pinned.suspensions[0].end is not None
    assert pinned.suspensions[0].end.kind == "invocation.resumed"
    assert model.deployments.name("dep1") == "dep1 (v1)"
    assert model.deployments.drained["dep1"].kind == "invocation.completed"
    assert model.deployments.pinned_when_superseded == 1
    assert model.faults.host_deployment["h1"] == "dep1"


def test_effects_count_every_record_and_list_each_redelivery_once() -> None:
    h = History()
    h.add("effect.attempted", data={"key": "k1"})
    h.add("effect.delivered", data={"key": "k1", "effect": "email", "logical": "tc1"})
    h.add("effect.deduplicated", data={"key": "k1"})
    # The same key again: a key's repeat, not also its logical effect's.
    h.add("effect.delivered", data={"key": "k1", "effect": "email", "logical": "tc1"})
    # The same logical effect under another key, then without one.
    h.add("effect.delivered", data={"key": "k2", "effect": "email", "logical": "tc1"})
    h.add("effect.delivered", data={"effect": "email", "logical": "tc1"})
    # Two keyless deliveries of different logical effects are not one.
    h.add("effect.delivered", data={"effect": "email", "logical": "tc2"})
    h.add("effect.delivered", data={"key": "", "effect": "email"})
    effects = build(h).effects
    assert (effects.attempted, effects.deduplicated, effects.delivered) == (1, 1, 6)
    assert [(x.first.index, x.again.index, x.by_key) for x in effects.redeliveries] == [
        (1, 3, True), (1, 4, False), (1, 5, False)]


def test_hosts_and_epochs_answer_as_of_a_record() -> None:
    h = _history()
    model = build(h)
    h1, h2 = model.hosts["h1"], model.hosts["h2"]
    paused_at = next(r.index for r in h if r.kind == "fault.gc-pause")
    resumed_at = next(r.index for r in h if r.kind == "host.resumed")
    assert h1.paused_until(paused_at) == -math.inf  # not before the pause itself
    assert h1.paused_until(paused_at + 1) == 30.0
    assert h1.paused_until(resumed_at + 1) == -math.inf
    crash = h2.crash_before(len(h))
    assert crash is not None and crash.kind == "host.crashed"
    assert h2.crash_before(0) is None
    (assignment,) = model.epochs["s1"]
    assert (assignment.epoch, assignment.owner) == (2, "h2")


def test_a_crash_ends_a_pause_and_a_pause_of_a_crashed_host_is_none() -> None:
    # As on the simulator: a crash kills the paused process and the restarted one runs; a
    # gc-pause step that found its host down (recorded by the runner all the same) stops nothing.
    h = History()
    h.add("fault.gc-pause", "info", host="h1", data={"duration": 600.0})
    crash = h.add("host.crashed", host="h1")
    h.add("fault.crash", "info", host="h2")
    down = h.add("fault.gc-pause", "info", host="h2", data={"duration": 600.0})
    restart = h.add("host.restarted", host="h2")
    later = h.add("fault.gc-pause", "info", host="h2", data={"duration": 600.0})
    h.add("run.end")
    model = build(h)
    h1, h2 = model.hosts["h1"], model.hosts["h2"]
    assert h1.paused_until(crash.index) == 600.0
    assert h1.paused_until(crash.index + 1) == -math.inf
    assert h2.paused_until(down.index + 1) == -math.inf
    assert h2.paused_until(restart.index + 1) == -math.inf
    assert h2.paused_until(later.index + 1) == 600.0  # a pause after the restart counts


def test_the_checkers_of_one_run_share_one_model() -> None:
    h = _history()
    built: list[int] = []
    import harness.checkers.model as module

    original = module.build

    def counting(history: History) -> module.RunModel:
        built.append(len(history))
        return original(history)

    module.build = counting  # type: ignore[assignment]
    try:
        module._last = None
        results = run_checkers(ALL, h, CheckConfig())
    finally:
        module.build = original  # type: ignore[assignment]
    assert built == [len(h)]
    assert all(r.valid is not None for r in results), [r.note for r in results]
    # A history that grew is built again: the cache never answers for fewer records.
    first = model_of(h)
    h.add("run.end")
    assert model_of(h) is not first


def test_the_model_reads_only_the_kinds_it_declares() -> None:
    """Built from only the records of `KINDS` (as `dispatch` cuts a view), the model is the
    same as from the whole history: `KINDS` names everything its pass reads."""
    from harness.adapters import load_adapter
    from harness.checkers.base import Result, dispatch
    from harness.checkers.model import KINDS
    from harness.run import RunOptions, run_schedule
    from harness.schedules.generate import generate

    class Keep:
        """Keeps the whole history (it declares no `reads`)."""

        name = "keep"
        history: History | None = None

        def check(self, history: History, config: CheckConfig) -> Result:
            Keep.history = history
            return Result(self.name, True)

    class Reader:
        name = "model"
        reads = KINDS

    adapter = load_adapter("reference")
    compared = 0
    for index in range(12):
        run_schedule(adapter, generate(5, index),
                     RunOptions(report_dir=None, save_history=False, checkers=(Keep(),)))
        whole = Keep.history
        assert whole is not None
        (view,) = dispatch((Reader(),), whole)
        assert len(view) < len(whole)
        assert build(view) == build(whole)
        compared += 1
    assert compared == 12


# -- tool calls and turns

TC = "s1.turn1.t1"


def _ob(h: History, kind: str, event_id: str, data: dict[str, Any] | None = None,
        **fields: Any) -> None:
    """A runtime observation: at-least-once, so it carries its `event_id`."""
    h.add(kind, data={"event_id": event_id, **(data or {})}, session="s1", **fields)


def _call_history() -> History:
    h = History()
    h.add("message.received", session="s1", data={"message": "s1.m1", "user": "u1"})
    _ob(h, "turn.started", "ts:1", {"message": "s1.m1"}, turn="s1.turn1")
    _ob(h, "tool.intent", "in:1", {"tool": "send_email", "run": 1, "epoch": 1},
        turn="s1.turn1", tool_call=TC)
    _ob(h, "tool.awaiting", "aw:1", {"tool": "send_email"}, turn="s1.turn1", tool_call=TC)
    # The card's observation repeated (its step retried): one card.
    _ob(h, "tool.awaiting", "aw:1", {"tool": "send_email"}, turn="s1.turn1", tool_call=TC)
    # Answered twice: a deny, then an approve the runtime refuses (the call was decided).
    for decision in ("deny", "approve"):
        h.add("op.answer", "invoke", session="s1", tool_call=TC, data={"decision": decision})
        h.add("op.answer", "ok", session="s1", tool_call=TC)
    _ob(h, "answer.refused", "rf:1", {"reason": "already_decided", "decision": "approve"},
        tool_call=TC)
    # The result reported twice (a retried step), then an effect the world saw once.
    _ob(h, "tool.result", "rs:1", {"outcome": "denied"}, turn="s1.turn1", tool_call=TC)
    _ob(h, "tool.result", "rs:1", {"outcome": "denied"}, turn="s1.turn1", tool_call=TC)
    h.add("effect.delivered", key=f"email:{TC}", tool_call=TC,
          data={"effect": "email", "logical": TC})
    _ob(h, "turn.ended", "te:1", {"reason": "completed"}, turn="s1.turn1")
    _ob(h, "turn.started", "ts:2", {"message": "s1.m2"}, turn="s1.turn2")
    h.add("run.end")
    return h


def test_a_call_lists_each_observation_once_and_each_answer() -> None:
    model = build(_call_history())
    (call,) = model.calls.values()
    assert (call.id, call.session, call.turn, call.tool) == (TC, "s1", "s1.turn1", "send_email")
    assert [r.kind for r in call.cards] == ["tool.awaiting"]  # the repeat is skipped
    assert [(r.type, r.data.get("decision")) for r in call.answers] == [
        ("invoke", "deny"), ("ok", None), ("invoke", "approve"), ("ok", None)]
    assert [r.data["reason"] for r in call.refusals] == ["already_decided"]
    (intent,) = call.intents
    assert (intent.data["run"], intent.data["epoch"]) == (1, 1)
    assert [r.data["outcome"] for r in call.results] == ["denied"]  # reported twice, once
    assert call.outcome == "denied"
    final = call.final
    assert final is not None and final.kind == "tool.result"
    # The approve came second: it is the call's approve all the same, and lost to the deny.
    approved = call.approved
    assert approved is not None and approved.index == call.answers[2].index
    (delivery,) = call.deliveries
    assert call.intent_before(delivery.index) is intent
    assert call.intent_before(intent.index) is None
    assert call.gated_from == -1 and call.holds == ()


def test_a_held_result_is_a_hold_and_not_the_final_outcome() -> None:
    h = History()
    _ob(h, "turn.held", "hd:1", {"run": 1}, turn="s1.turn1", tool_call=TC)
    _ob(h, "tool.awaiting", "aw:1", {"tool": "send_email", "mode": "confirm"},
        turn="s1.turn1", tool_call=TC)
    _ob(h, "tool.result", "rs:held", {"outcome": "held"}, turn="s1.turn1", tool_call=TC)
    _ob(h, "tool.result", "rs:bg", {"outcome": "background"}, turn="s1.turn1", tool_call=TC)
    _ob(h, "tool.result", "rs:exp", {"outcome": "expired"}, turn="s1.turn1", tool_call=TC)
    call = build(h).calls[TC]
    assert [r.kind for r in call.holds] == ["turn.held", "tool.result"]
    assert call.outcome == "expired"
    assert call.gated_from == call.asks[0].index  # its first card asked to confirm
    assert call.approved is None


def test_turns_start_and_end_with_their_session_and_message() -> None:
    turns = build(_call_history()).turns
    assert list(turns) == ["s1.turn1", "s1.turn2"]
    first, second = turns.values()
    assert (first.session, first.message, first.reason) == ("s1", "s1.m1", "completed")
    assert second.message == "s1.m2" and second.ended is None and second.reason is None


def test_a_record_read_by_several_parts_is_fresh_for_each() -> None:
    """A repeated observation is skipped once for the whole model: the sessions and the calls
    both read `tool.awaiting`, and the first copy is not a repeat to either."""
    model = build(_call_history())
    s1 = model.sessions["s1"]
    # The card made turn1 wait on a person (its busy stretch ended at the card), and
    # the answer closed it: turn1 is busy again until it ended.
    assert [b.until.kind if b.until else None for b in s1.busy] == [
        "tool.awaiting", "turn.ended", None]
    assert len(model.calls[TC].cards) == 1
    # The world's effects are counted as recorded, also those naming a call.
    assert model.effects.delivered == 1


def test_identity_answers_as_of_a_record() -> None:
    h = History()
    h.add("deployment.registered", deployment="dep1", data={"version": "v1"})
    _ob(h, "message.received", "mr:1", {"message": "s1.m1", "user": "alice"})
    revoke = h.add("identity.revoked", data={"user": "alice", "tool": "send_email"})
    grant = h.add("identity.granted", data={"user": "alice", "tool": "send_email"})
    h.add("identity.revoked", data={"user": "bob"})  # every tool
    h.add("deployment.registered", deployment="dep2", data={"version": "v2"})
    h.add("invocation.started", invocation="inv1", deployment="dep2")
    _ob(h, "tool.rerun", "rr:1", {"access": "granted", "user": "carol", "run": 2},
        turn="s1.turn1", tool_call=TC)
    _ob(h, "tool.rerun", "rr:1", {"access": "granted", "user": "carol", "run": 2},
        turn="s1.turn1", tool_call=TC)  # a repeat: one re-run
    end = h.add("run.end")
    model = build(h)
    identity = model.identity
    assert identity.revoked("alice", "send_email", revoke.index) is None  # not yet
    assert identity.revoked("alice", "send_email", grant.index) is revoke
    assert identity.revoked("alice", "send_email", end.index) is None  # granted back
    assert identity.revoked("bob", "*", end.index) is not None
    assert identity.users_of("send_email", end.index) == {"alice"}
    assert identity.users_of("*", end.index) == {"bob"}
    assert identity.session_user("s1", end.index) == "alice"  # the first named, not carol
    assert identity.session_user("s1", 0) is None
    assert identity.call_user(TC, end.index) == "carol"
    assert len(model.calls[TC].reruns) == 1
    assert [r.deployment for r in model.deployments.registered] == ["dep1", "dep2"]
    assert model.deployments.registered_before(revoke.index) == 1
    (start,) = model.pins["inv1"].starts
    assert start.deployment == "dep2"


def test_due_counts_from_the_heal_and_due_in_uptime_skips_only_the_downtime() -> None:
    """`due`: the bound after the later of the start and the heal of every fault of the run.
    `due_in_uptime`: the bound counted in time no host was down and no call held, so only the
    faults that overlap it move it, by as long as they overlap."""
    h = History()
    h.add("deployment.registered", time=0, deployment="dep1",
          data={"version": "v1", "hosts": ["h1", "h2"]})
    h.add("host.paused", time=100, host="h1", deployment="dep1", data={"duration": 50.0})
    h.add("host.resumed", time=150, host="h1", deployment="dep1")
    h.add("host.paused", time=120, host="h2", deployment="dep1", data={"duration": 60.0})
    h.add("host.resumed", time=180, host="h2", deployment="dep1")
    h.add("host.paused", time=1000, host="h2", deployment="dep1", data={"duration": 10.0})
    h.add("host.resumed", time=1010, host="h2", deployment="dep1")
    h.add("run.end", time=5000)
    model = build(h)
    assert model.due(90, 30) == 1040  # the last fault healed at 1010
    assert model.due(2000, 30) == 2030
    # 90..100 counts 10 s, 100..180 is down, 20 s more after it.
    assert model.due_in_uptime(90, 30) == 200
    assert model.due_in_uptime(50, 30) == 80  # due before any downtime
    assert model.due_in_uptime(990, 30) == 1030  # 10 s, the 10 s pause, 20 s
    h2 = History()
    h2.add("host.paused", time=10, host="h1", deployment="dep1")  # never resumed
    h2.add("run.end", time=100)
    assert build(h2).due(0, 5) is None and build(h2).due_in_uptime(0, 5) is None
