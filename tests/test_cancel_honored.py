"""cancel-honored on small hand-made histories: after a cancel, the turn in progress makes at
most the model step already in flight (per logical step: a retry is one step); a turn that
goes on with two more is caught; a turn that ended before the cancel, or a turn started after
it, is not judged; steps count from the heal of the faults."""

from __future__ import annotations

from harness.checkers import CancelHonored, CheckConfig, Result
from harness.history import History, Record

CONFIG = CheckConfig()
DAYS = 24 * 3600.0


def started(h: History, t: float, turn: str = "s1.turn1") -> Record:
    return h.add("turn.started", time=t, session="s1", turn=turn,
                 data={"event_id": f"{turn}.started", "message": "s1.m1"})


def ended(h: History, t: float, reason: str, turn: str = "s1.turn1") -> Record:
    return h.add("turn.ended", time=t, session="s1", turn=turn,
                 data={"event_id": f"{turn}.ended", "reason": reason})


def step(h: History, t: float, n: int, turn: str = "s1.turn1", key: str | None = None) -> Record:
    return h.add("effect.delivered", time=t, session="s1", turn=turn,
                 key=f"model:{turn}:{n}" if key is None else key,
                 data={"effect": "model", "logical": f"{turn}:{n}"})


def cancel(h: History, t: float) -> Record:
    h.add("op.cancel", "invoke", time=t, session="s1")
    return h.add("op.cancel", "ok", time=t, session="s1")


def check(h: History, end: float = 8 * DAYS) -> Result:
    h.add("run.end", time=end)
    return CancelHonored().check(h, CONFIG)


def test_the_step_in_flight_may_finish() -> None:
    h = History()
    started(h, 0)
    step(h, 2, 0)
    cancel(h, 3)
    step(h, 4, 1)  # in flight at the cancel
    ended(h, 4, "cancelled")
    r = check(h)
    assert r.valid is True, r.witness(limit=5)
    assert r.reached


def test_a_retried_step_is_one_step() -> None:
    h = History()
    started(h, 0)
    cancel(h, 1)
    step(h, 2, 0, key="")
    step(h, 9, 0, key="")  # a keyless retry of the same step after a crash
    ended(h, 9, "cancelled")
    assert check(h).valid is True


def test_a_turn_that_goes_on_is_a_violation() -> None:
    h = History()
    started(h, 0)
    stop = cancel(h, 1)
    step(h, 2, 0)
    second = step(h, 4, 1)
    step(h, 6, 2)
    ended(h, 6, "completed")
    r = check(h)
    assert r.valid is False
    witness = r.witness(limit=5)
    assert "turn s1.turn1 went on after the person cancelled it at t=1s" in witness
    assert "billed 3 steps of it after the cancel" in witness
    assert r.violations[0].records[:1] == (stop.index,)
    assert second.index in r.violations[0].records


def test_turns_not_in_progress_at_the_cancel_are_not_judged() -> None:
    h = History()
    started(h, 0)
    step(h, 2, 0)
    ended(h, 2, "completed")
    cancel(h, 3)  # nothing in progress
    started(h, 10, "s1.turn2")
    step(h, 12, 0, "s1.turn2")
    step(h, 14, 1, "s1.turn2")
    r = check(h)
    assert r.valid is True and not r.reached


def test_steps_count_from_the_heal_of_the_faults() -> None:
    h = History()
    h.add("fault.gc-pause", "info", time=0, data={"duration": 60.0}, host="dep1.h1")
    h.add("fault.heal", time=100, data={"at": 100.0})
    started(h, 0)
    cancel(h, 1)
    step(h, 30, 0)
    step(h, 60, 1)  # the cancel waited on the paused host meanwhile
    step(h, 102, 2)  # in flight at the heal
    ended(h, 103, "cancelled")
    assert check(h).valid is True


def _approve(h: History, t: float, call: str = "s1.turn1.t1") -> Record:
    rec = h.add("op.answer", "invoke", time=t, session="s1", turn="s1.turn1", tool_call=call,
                data={"decision": "approve"})
    h.add("op.answer", "ok", time=t, session="s1", turn="s1.turn1", tool_call=call)
    return rec


def _card(h: History, t: float, call: str = "s1.turn1.t1") -> None:
    h.add("tool.awaiting", time=t, session="s1", turn="s1.turn1", tool_call=call,
          data={"event_id": f"{call}.awaiting", "tool": "send_email"})


def test_an_approval_after_the_cancel_that_runs_the_tool_is_a_violation() -> None:
    h = History()
    started(h, 0)
    step(h, 2, 0)
    _card(h, 2)
    stop = cancel(h, 60)
    approval = _approve(h, 120)
    intent = h.add("tool.intent", time=120, session="s1", turn="s1.turn1",
                   tool_call="s1.turn1.t1", data={"event_id": "i1", "run": 1, "tool": "send_email"})
    ended(h, 302, "cancelled")
    r = check(h)
    assert r.valid is False
    assert ("the approval of s1.turn1.t1 given at t=2.0m, after the person cancelled turn "
            "s1.turn1 at t=60s, ran the tool") in r.witness(limit=5)
    assert r.violations[0].records == (stop.index, approval.index, intent.index)


def test_an_approval_refused_after_the_cancel_or_given_before_it_passes() -> None:
    for before in (False, True):
        h = History()
        started(h, 0)
        step(h, 2, 0)
        _card(h, 2)
        if before:
            _approve(h, 30)
            h.add("tool.intent", time=30, session="s1", turn="s1.turn1",
                  tool_call="s1.turn1.t1", data={"event_id": "i1", "run": 1, "tool": "send_email"})
        cancel(h, 60)
        if not before:
            _approve(h, 120)
            h.add("answer.refused", time=120, session="s1", turn="s1.turn1",
                  tool_call="s1.turn1.t1",
                  data={"event_id": "r1", "reason": "ended", "decision": "approve"})
        ended(h, 302, "cancelled")
        assert check(h).valid is True, before


def test_a_call_sent_to_the_background_may_still_run_on_a_later_approval() -> None:
    h = History()
    started(h, 0)
    step(h, 2, 0)
    _card(h, 2)
    cancel(h, 3)
    h.add("tool.background", time=4, session="s1", turn="s1.turn1", tool_call="s1.turn1.t1",
          data={"event_id": "b1", "phase": "live"})
    _approve(h, 5)
    h.add("tool.intent", time=5, session="s1", turn="s1.turn1", tool_call="s1.turn1.t1",
          data={"event_id": "i1", "run": 1, "tool": "send_email"})
    ended(h, 6, "cancelled")
    assert check(h).valid is True


def test_a_call_sent_to_the_background_after_a_refused_approval_may_run() -> None:
    # Cancel; an approval (refused); the call to the background; a second approval runs it.
    h = History()
    started(h, 0)
    step(h, 2, 0)
    _card(h, 2)
    cancel(h, 2)
    _approve(h, 3)
    h.add("tool.background", time=3, session="s1", turn="s1.turn1", tool_call="s1.turn1.t1",
          data={"event_id": "b1", "phase": "live"})
    _approve(h, 3)
    h.add("tool.intent", time=3, session="s1", turn="s1.turn1", tool_call="s1.turn1.t1",
          data={"event_id": "i1", "run": 1, "tool": "send_email"})
    ended(h, 4, "cancelled")
    assert check(h).valid is True


def test_an_approval_at_the_instant_of_the_cancel_races_it() -> None:
    # Cancel and approve at one instant: the engine may take the approval first.
    h = History()
    started(h, 0)
    step(h, 2, 0)
    _card(h, 2)
    cancel(h, 60)
    _approve(h, 60)
    h.add("tool.intent", time=60, session="s1", turn="s1.turn1", tool_call="s1.turn1.t1",
          data={"event_id": "i1", "run": 1, "tool": "send_email"})
    ended(h, 61, "cancelled")
    assert check(h).valid is True


# ---------------------------------------------------------------- a cancelled turn's card

HOUR = 3600.0


def _board(h: History, end: float, closed: str | None, at: float | None,
           call: str = "s1.turn1.t1") -> Result:
    h.add("run.end", time=end, data={"cards": {call: closed}, **(
        {"closed_at": {call: at}} if at is not None else {})})
    return CancelHonored().check(h, CONFIG)


def _waiting_then_cancelled(hold_at: float | None = None) -> History:
    h = History()
    started(h, 0)
    step(h, 2, 0)
    _card(h, 2)
    cancel(h, 60)
    ended(h, 302, "cancelled")
    if hold_at is not None:
        h.add("turn.held", time=hold_at, session="s1", turn="s1.turn1",
              tool_call="s1.turn1.t1", data={"event_id": "h1", "run": 1, "tool": "send_email"})
    return h


def test_a_cancelled_turns_card_closed_within_the_bound_passes() -> None:
    r = _board(_waiting_then_cancelled(), 8 * DAYS, "cancelled", 302)
    assert r.valid is True, r.witness(limit=3)


def test_a_cancelled_turns_card_left_up_until_it_expires_is_a_violation() -> None:
    h = _waiting_then_cancelled()
    r = _board(h, 9 * DAYS, "expired", 8 * DAYS + 2)
    assert r.valid is False
    assert ("s1.turn1.t1 of turn s1.turn1 still asked the person when they cancelled the turn "
            "at t=60s, and its card closed only at t=8.00d, expired") in r.witness(limit=1)
    r = _board(_waiting_then_cancelled(), 2 * DAYS, None, None)
    assert "its card was still open at the run's end" in r.witness(limit=1)


def test_the_bound_runs_from_a_hold_after_the_cancel_and_from_the_heal() -> None:
    # Held two hours after the cancel, closed half an hour after that: in time (the bound,
    # an hour, would have passed counted from the cancel); an hour and a half: late.
    r = _board(_waiting_then_cancelled(hold_at=2 * HOUR), 8 * DAYS, "cancelled", 2.5 * HOUR)
    assert r.valid is True, r.witness(limit=3)
    r = _board(_waiting_then_cancelled(hold_at=2 * HOUR), 8 * DAYS, "cancelled", 3.5 * HOUR)
    assert r.valid is False
    # A host paused for a day from the cancel: the bound runs from its return.
    h = _waiting_then_cancelled()
    h.add("fault.gc-pause", time=60, host="dep1.h1", data={"duration": DAYS})
    r = _board(h, 8 * DAYS, "cancelled", DAYS + 30 * 60)
    assert r.valid is True, r.witness(limit=3)


def test_not_judged_without_a_board_a_card_a_due_time_or_for_a_call_in_the_background(
) -> None:
    # No board (a world of the user's own): not judged, even with no result.
    assert check(_waiting_then_cancelled()).valid is True
    # The run ended before the bound had passed.
    assert _board(_waiting_then_cancelled(), 30 * 60, None, None).valid is True
    # Sent to the background before the cancel (still the person's to approve), or ended
    # before it (nothing left to stop).
    for kind, outcome in (("tool.background", None), ("tool.result", "denied")):
        h = History()
        started(h, 0)
        step(h, 2, 0)
        _card(h, 2)
        h.add(kind, time=30, session="s1", turn="s1.turn1", tool_call="s1.turn1.t1",
              data={"event_id": "x1", **({"phase": "live"} if outcome is None
                                          else {"outcome": outcome})})
        cancel(h, 60)
        ended(h, 61, "cancelled")
        assert _board(h, 8 * DAYS, None, None).valid is True, kind


def test_two_cancels_find_a_card_once() -> None:
    h = _waiting_then_cancelled()
    cancel(h, 61)
    r = _board(h, 9 * DAYS, None, None)
    assert len(r.violations) == 1
