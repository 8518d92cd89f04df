"""What a runtime reports about itself tells the truth, on small hand-made histories.

Each clause judges a report the runtime chose to make (a placeholder flag, how long a call
waited, whom a fence found, a queued message, an intent's key, a card's call result, a
re-run): a
runtime that does not make the report is not judged on it, and one that makes it falsely is.
"""

from __future__ import annotations

from typing import Any

from harness.checkers import (
    AccessRechecked,
    BackgroundHonored,
    BusyRule,
    CardClosed,
    CheckConfig,
    ConservativeRecovery,
    Fencing,
    PinningBound,
    Result,
)
from harness.history import History, Record

CONFIG = CheckConfig()  # hand_off_after 5 min, tolerance 60 s, liveness 1 h
MIN, HOUR = 60.0, 3600.0


def ob(h: History, kind: str, t: float, event_id: str, data: dict[str, Any] | None = None,
       **fields: Any) -> Record:
    return h.add(kind, "event", time=t, data={"event_id": event_id, **(data or {})}, **fields)


def messages(result: Result) -> list[str]:
    return [v.message for v in result.violations]


# ---------------------------------------------------------------- background-honored


def finished(h: History, t: float, outcome: str, placeholder: bool | None) -> Record:
    data: dict[str, Any] = {"outcome": outcome}
    if placeholder is not None:
        data["placeholder"] = placeholder
    return ob(h, "tool.finished", t, f"tool.finished:t1:{outcome}", data, session="s1",
              turn="s1.turn1", tool_call="t1")


def test_a_placeholder_flag_that_matches_the_outcome_passes() -> None:
    h = History()
    finished(h, 10, "background", True)
    finished(h, 20, "answered", False)
    finished(h, 30, "expired", None)  # not reported: not judged
    assert BackgroundHonored().check(h, CONFIG).valid is True


def test_a_real_result_called_a_placeholder_is_a_violation() -> None:
    h = History()
    r = finished(h, 20, "answered", True)
    result = BackgroundHonored().check(h, CONFIG)
    assert result.valid is False and result.reached
    (v,) = result.violations
    assert v.message.startswith("the toolFinished of t1 calls its result a placeholder, but the "
                                "outcome is answered: a real result")
    assert r.index in v.records


def test_a_background_hand_back_not_called_a_placeholder_is_a_violation() -> None:
    h = History()
    finished(h, 10, "background", False)
    assert messages(BackgroundHonored().check(h, CONFIG))[0].startswith(
        "the toolFinished of t1 has outcome background, the placeholder a call sent to the "
        "background hands its turn, but says it is not a placeholder")


# ---------------------------------------------------------------- pinning-bound


def handoff(h: History, card_at: float | None, t: float, waited: Any) -> Record:
    if card_at is not None:
        ob(h, "tool.awaiting", card_at, "tool.awaiting:t1", session="s1", turn="s1.turn1",
           tool_call="t1")
    return ob(h, "tool.handoff", t, "tool.handoff:t1", {"waited": waited}, session="s1",
              turn="s1.turn1", tool_call="t1")


def test_a_handoff_that_reports_its_in_call_wait_truly_passes() -> None:
    for card_at, t, waited in ((100, 400, 300.0), (100, 400, 330.0), (100, 400, 250.0),
                               (None, 400, 300.0), (100, 400, "n/a")):
        h = History()
        handoff(h, card_at, t, waited)
        assert PinningBound().check(h, CONFIG).valid is True, (card_at, t, waited)


def test_a_handoff_waiting_longer_than_the_run_is_a_violation() -> None:
    h = History()
    r = handoff(h, 100, 400, 500.0)  # now + since, not now - since
    result = PinningBound().check(h, CONFIG)
    assert result.valid is False
    (v,) = result.violations
    assert v.message.startswith("the hand-off of t1 at t=6.7m says the call waited 8.3m in-call, "
                                "longer than the run had lasted (6.7m)")
    assert r.index in v.records


def test_a_handoff_waiting_less_than_its_card_is_old_is_a_violation() -> None:
    h = History()
    handoff(h, 100, 400, 200.0)  # the card was shown 300 s before: 240 s at the least
    assert "less than the 5.0m since its card was shown at t=100s" in messages(
        PinningBound().check(h, CONFIG))[0]


# ---------------------------------------------------------------- fencing


def assigned(h: History, t: float, epoch: int, owner: str) -> None:
    ob(h, "threadlog.assigned", t, f"threadlog.assigned:s1:{epoch}", {"owner": owner},
       session="s1", epoch=epoch)


def rejected(h: History, t: float, epoch: int, owner: str, **current: Any) -> Record:
    return ob(h, "threadlog.rejected", t, f"threadlog.rejected:s1:{epoch}:{t}",
              {"owner": owner, "reason": "StaleEpoch", **current}, session="s1", epoch=epoch)


def test_a_stale_rejection_naming_the_thread_that_moved_on_passes() -> None:
    h = History()
    assigned(h, 0, 1, "h1")
    assigned(h, 10, 2, "h2")
    rejected(h, 20, 1, "h1", current_epoch=2, current_owner="h2")
    rejected(h, 30, 1, "h1")  # names nobody: not judged on it
    result = Fencing().check(h, CONFIG)
    assert result.valid is True and result.reached


def test_a_stale_rejection_that_misnames_the_current_owner_is_a_violation() -> None:
    cases = {
        "names no current epoch, though epochs [1, 2] were assigned":
            {"current_epoch": None, "current_owner": None},
        "names no owner of epoch 2, which was assigned to h2":
            {"current_epoch": 2, "current_owner": None},
        "names h3 as the owner of epoch 2, which was assigned to h2":
            {"current_epoch": 2, "current_owner": "h3"},
        "names epoch 7 as current, which was never assigned (assigned: [1, 2])":
            {"current_epoch": 7, "current_owner": "h2"},
    }
    for sentence, current in cases.items():
        h = History()
        assigned(h, 0, 1, "h1")
        assigned(h, 10, 2, "h2")
        rejected(h, 20, 1, "h1", **current)
        assert messages(Fencing().check(h, CONFIG)) == [
            f"session s1: a stale-epoch rejection of an append at epoch 1 {sentence}: "
            + h.records[-1].describe()], current


def test_a_rejection_of_the_threads_own_owner_is_a_violation() -> None:
    h = History()
    assigned(h, 0, 1, "h1")
    rejected(h, 20, 1, "h1", current_epoch=1, current_owner="h1")
    assert "names the writer's own epoch 1 as current: the thread's owner was refused" in (
        messages(Fencing().check(h, CONFIG))[0])


# ---------------------------------------------------------------- busy-rule


def busy_session(h: History, report_m2: bool) -> None:
    ob(h, "message.received", 0, "r1", {"message": "m1"}, session="s1")
    ob(h, "turn.started", 0, "ts1", {"message": "m1"}, session="s1", turn="s1.turn1")
    ob(h, "message.received", 5, "r2", {"message": "m2"}, session="s1")
    if report_m2:
        ob(h, "message.queued", 5, "q2", {"message": "m2"}, session="s1")
    ob(h, "message.received", 6, "r3", {"message": "m3"}, session="s1")
    ob(h, "message.queued", 6, "q3", {"message": "m3"}, session="s1")
    ob(h, "turn.ended", 10, "te1", {"reason": "completed"}, session="s1", turn="s1.turn1")
    ob(h, "turn.started", 10, "ts2", {"message": "m2"}, session="s1", turn="s1.turn2")
    ob(h, "turn.ended", 20, "te2", {"reason": "completed"}, session="s1", turn="s1.turn2")
    ob(h, "turn.started", 20, "ts3", {"message": "m3"}, session="s1", turn="s1.turn3")


def test_every_queued_message_reported_passes() -> None:
    h = History()
    busy_session(h, report_m2=True)
    assert BusyRule().check(h, CONFIG).valid is True


def test_a_queued_message_left_out_of_the_reports_is_a_violation() -> None:
    h = History()
    busy_session(h, report_m2=False)
    assert messages(BusyRule().check(h, CONFIG)) == [
        f"session s1: message m2 arrived at t=5s while a turn ran and started turn s1.turn2 "
        f"only at t=10s, but was never reported queued, while this run reports its other "
        f"queued messages: its place in the FIFO cannot be judged: {h.records[2].describe()}; "
        f"{h.records[6].describe()}"]


def test_a_runtime_that_reports_no_queueing_is_not_judged_on_it() -> None:
    h = History()
    busy_session(h, report_m2=False)
    h2 = History()
    for r in h.records:
        if r.kind != "message.queued":
            h2.add(r.kind, r.type, time=r.time, data=dict(r.data), session=r.session,
                   turn=r.turn)
    assert BusyRule().check(h2, CONFIG).valid is True


# ---------------------------------------------------------------- conservative-recovery


def intent(h: History, t: float, tc: str, key: str | None) -> None:
    data: dict[str, Any] = {"tool": "send_email"}
    if key is not None:
        data["key"] = key
    ob(h, "tool.intent", t, f"tool.intent:{tc}", data, session="s1", turn="s1.turn1",
       tool_call=tc)


def attempt(h: History, t: float, tc: str, key: str) -> None:
    h.add("effect.attempted", time=t, data={"effect": "email", "key": key, "tool_call": tc})


def test_intents_that_all_name_their_keys_or_none_pass() -> None:
    for keys in ((None, None), ("email:t1", "charge:t2")):
        h = History()
        intent(h, 0, "t1", keys[0])
        attempt(h, 1, "t1", "email:t1")
        intent(h, 2, "t2", keys[1])
        attempt(h, 3, "t2", "charge:t2")
        assert ConservativeRecovery().check(h, CONFIG).valid is True, keys


def test_an_intent_without_its_key_among_intents_with_theirs_is_a_violation() -> None:
    h = History()
    intent(h, 0, "t1", "email:t1")
    attempt(h, 1, "t1", "email:t1")
    intent(h, 2, "t2", None)
    attempt(h, 3, "t2", "charge:t2")
    assert messages(ConservativeRecovery().check(h, CONFIG))[0].startswith(
        "tool call t2 was attempted under idempotency key charge:t2, but its intent names no "
        "key while this run's other intents name theirs")


# ---------------------------------------------------------------- card-closed


def turn(h: History, t0: float, t1: float | None, n: int, reason: str = "completed") -> None:
    ob(h, "turn.started", t0, f"ts{n}", {"message": f"m{n}"}, session="s1", turn=f"s1.turn{n}")
    if t1 is not None:
        ob(h, "turn.ended", t1, f"te{n}", {"reason": reason}, session="s1", turn=f"s1.turn{n}")


def steered_call(h: History, next_turn_at: float | None, result: bool) -> None:
    turn(h, 0, None, 1)
    ob(h, "tool.awaiting", 1, "aw1", session="s1", turn="s1.turn1", tool_call="s1.turn1.t1")
    ob(h, "turn.ended", 100, "te1", {"reason": "steered", "tool_call": "s1.turn1.t1"},
       session="s1", turn="s1.turn1")
    if next_turn_at is not None:
        turn(h, next_turn_at, None, 2)
    if result:
        ob(h, "tool.result", 101, "res1", {"outcome": "ended_by_message"}, session="s1",
           turn="s1.turn1", tool_call="s1.turn1.t1")


def card_check(h: History, end: float) -> Result:
    h.add("run.end", time=end, data={"cards": {"s1.turn1.t1": "ended_by_message"}})
    return CardClosed().check(h, CONFIG)


def test_a_closed_cards_result_reported_or_not_yet_read_passes() -> None:
    h = History()
    steered_call(h, 100, result=True)
    assert card_check(h, 2 * HOUR).valid is True
    h = History()
    steered_call(h, None, result=False)  # no later turn read the transcript yet
    assert card_check(h, 2 * HOUR).valid is True
    h = History()
    steered_call(h, 100, result=False)  # a later turn, but within the liveness bound
    result = card_check(h, 30 * MIN)
    assert result.valid is True and result.stats["unjudged"] == 1.0


def test_a_closed_card_whose_result_a_later_turn_never_saw_is_a_violation() -> None:
    h = History()
    steered_call(h, 100, result=False)
    started = h.records[-1]
    result = card_check(h, 2 * HOUR)
    assert result.valid is False
    (v,) = result.violations
    assert v.message.startswith(
        "the card of s1.turn1.t1 was closed ended_by_message, but the runtime never reported "
        "the call's result (no tool.result by the run's end at t=2.0h), though a later turn of "
        "its session started at t=100s")
    assert started.index in v.records


# ---------------------------------------------------------------- access-rechecked


def rerun_after(h: History, wait_kind: str | None, t: float = 10 * MIN) -> Record:
    ids = {"session": "s1", "turn": "s1.turn1", "tool_call": "t1"}
    h.add("deployment.registered", "event", time=0.0, deployment="dep1",
          data={"version": "v1", "hosts": ["dep1.h1"]})
    ob(h, "tool.awaiting", 1.0, "tool.awaiting:t1", {"tool": "send_email"}, **ids)
    if wait_kind == "tool.handoff":
        ob(h, "tool.handoff", 5 * MIN + 1, "tool.handoff:t1#1", {"waited": 5 * MIN}, **ids)
    elif wait_kind is not None:
        ob(h, wait_kind, 2 * MIN, f"{wait_kind}:t1", **ids)
    h.add("op.answer", "invoke", time=t - 1, session="s1", tool_call="t1",
          data={"decision": "approve", "user": "alice"})
    return ob(h, "tool.rerun", t, "tool.rerun:t1#1",
              {"access": "granted", "tool": "send_email", "user": "alice", "version": "v1"},
              deployment="dep1", **ids)


def test_a_rerun_after_a_hand_off_or_the_background_passes() -> None:
    for kind in ("tool.handoff", "turn.waiting", "tool.background"):
        h = History()
        rerun_after(h, kind)
        result = AccessRechecked().check(h, CONFIG)
        assert result.valid is True, (kind, messages(result))


def test_a_rerun_with_no_wait_handed_off_before_it_is_a_violation() -> None:
    h = History()
    r = rerun_after(h, None, t=2 * MIN)
    result = AccessRechecked().check(h, CONFIG)
    assert result.valid is False and result.reached
    (v,) = result.violations
    assert v.message.startswith(
        "tool call t1 reported a re-run at t=2.0m (access granted) although its wait was "
        "never handed off or sent to the background before it")
    assert r.index in v.records


def test_a_hand_off_after_the_rerun_does_not_excuse_it() -> None:
    h = History()
    ids = {"session": "s1", "turn": "s1.turn1", "tool_call": "t1"}
    rerun_after(h, None, t=2 * MIN)
    ob(h, "tool.background", 3 * MIN, "tool.background:t1", **ids)
    assert messages(AccessRechecked().check(h, CONFIG))[0].startswith(
        "tool call t1 reported a re-run at t=2.0m")
