"""The effect contract's rules, each on small hand-made histories: authorization
(`effect-authorized`), attribution (a rule of `turn-outcome`) and the fate of every answer
(`answer-fate`). Each rule gets a history it must pass and the bug it must catch, with a
witness a person can read."""

from __future__ import annotations

from typing import Any

from harness.checkers import AnswerFate, CheckConfig, EffectAuthorized, Result, TurnOutcome
from harness.history import History, Record

CONFIG = CheckConfig()  # max_wait 8 days, tolerance 60 s, liveness 1 h
MIN, HOUR, DAY = 60.0, 3600.0, 86400.0
TC = "s1.turn1.t1"


def ob(h: History, kind: str, t: float, event_id: str, data: dict[str, Any] | None = None,
       **fields: Any) -> Record:
    return h.add(kind, "event", time=t, data={"event_id": event_id, **(data or {})}, **fields)


def card(h: History, t: float = 0.0, turn: str = "s1.turn1", tc: str = TC) -> Record:
    return ob(h, "tool.awaiting", t, f"aw:{tc}", {"tool": "send_email"}, session="s1",
              turn=turn, tool_call=tc)


def answer(h: History, t: float, decision: str = "approve", tc: str = TC) -> Record:
    h.add("op.answer", "invoke", time=t, session="s1", turn="s1.turn1", tool_call=tc,
          data={"decision": decision})
    return h.add("op.answer", "ok", time=t, session="s1", turn="s1.turn1", tool_call=tc)


def result(h: History, t: float, outcome: str, tc: str = TC, turn: str = "s1.turn1",
           run: int = 1) -> Record:
    return ob(h, "tool.result", t, f"tool.result:{tc}#{run}:{outcome}", {"outcome": outcome},
              session="s1", turn=turn, tool_call=tc)


def email(h: History, t: float, tc: str = TC) -> Record:
    return h.add("effect.delivered", time=t, key=f"email:{tc}", tool_call=tc,
                 data={"effect": "email", "logical": tc})


def refused(h: History, t: float, reason: str, decision: str = "approve",
            n: int = 1) -> Record:
    return ob(h, "answer.refused", t, f"answer.refused:{TC}#{n}",
              {"reason": reason, "decision": decision}, session="s1", turn="s1.turn1",
              tool_call=TC)


def failing(r: Result) -> str:
    assert r.valid is False, r
    return r.witness(limit=20)


def passing(r: Result) -> None:
    assert r.valid is True, r.witness(limit=20)


# ---------------------------------------------------------------- effect-authorized


def test_an_approved_effect_that_is_the_calls_outcome_passes() -> None:
    h = History()
    card(h)
    answer(h, HOUR)
    email(h, HOUR + 1)
    result(h, HOUR + 1, "answered")
    email(h, HOUR + 2)  # a retry of the same send, deduplicated or not: still authorized
    h.add("run.end", time=DAY)
    r = EffectAuthorized().check(h, CONFIG)
    passing(r)
    assert r.reached and r.stats["judged_calls"] == 1


def test_an_effect_after_the_person_denied_it_is_a_violation() -> None:
    h = History()
    card(h)
    answer(h, HOUR, "deny")
    result(h, HOUR, "denied")
    answer(h, 2 * HOUR)  # a late approve that should have been refused
    email(h, 2 * HOUR + 1)
    h.add("run.end", time=DAY)
    witness = failing(EffectAuthorized().check(h, CONFIG))
    assert f"send_email of {TC} was delivered at t=2.0h after the person denied it" in witness


def test_an_effect_after_a_new_message_ended_the_call_is_a_violation() -> None:
    """The race of scenario 22 as the unfixed reference ran it: the new message's result
    commits, then the approved re-run sends."""
    h = History()
    card(h)
    answer(h, 33 * MIN)
    result(h, 33 * MIN, "ended_by_message")
    email(h, 34 * MIN)
    h.add("run.end", time=DAY)
    witness = failing(EffectAuthorized().check(h, CONFIG))
    assert "after a new message ended its turn" in witness


def test_an_effect_before_any_approve_is_a_violation() -> None:
    h = History()
    card(h)
    email(h, MIN)
    answer(h, HOUR)
    result(h, HOUR, "answered")
    h.add("run.end", time=DAY)
    witness = failing(EffectAuthorized().check(h, CONFIG))
    assert "was delivered at t=60s before the person approved it" in witness
    assert "the approve came later, at t=60.0m" in witness


def test_an_effect_whose_call_then_ends_otherwise_without_a_hold_is_a_violation() -> None:
    h = History()
    card(h)
    answer(h, HOUR)
    email(h, HOUR + 1)
    result(h, HOUR + 2, "ended_by_message")
    h.add("run.end", time=DAY)
    witness = failing(EffectAuthorized().check(h, CONFIG))
    assert "but the call's final outcome is ended_by_message" in witness
    assert "no hold between" in witness


def test_an_effect_of_unknown_outcome_held_then_expired_passes() -> None:
    """Conservative recovery: the email went out, the runtime could not know, held the turn
    and asked; nobody confirmed, so the call expired. Honest, not a violation."""
    h = History()
    card(h)
    answer(h, HOUR)
    email(h, HOUR + 1)
    ob(h, "turn.held", HOUR + 5, f"turn.held:{TC}#1", session="s1", turn="s1.turn1",
       tool_call=TC)
    result(h, 9 * DAY, "expired", run=2)
    h.add("run.end", time=10 * DAY)
    passing(EffectAuthorized().check(h, CONFIG))


def intent(h: History, t: float, run: int = 1, tc: str = TC) -> Record:
    return ob(h, "tool.intent", t, f"tool.intent:{tc}#{run}", {"tool": "send_email"},
              session="s1", turn="s1.turn1", tool_call=tc, key=f"email:{tc}")


def test_a_request_in_flight_that_lands_after_the_hold_is_covered_by_it() -> None:
    """The host was paused with the request in flight; the new owner held the turn for the
    intent, and only then did the request land. The hold asked about exactly that effect."""
    h = History()
    card(h)
    answer(h, HOUR)
    intent(h, HOUR + 1)
    ob(h, "turn.held", HOUR + 5, f"turn.held:{TC}#1", session="s1", turn="s1.turn1",
       tool_call=TC)
    email(h, HOUR + 30)
    result(h, 9 * DAY, "expired", run=2)
    h.add("run.end", time=10 * DAY)
    passing(EffectAuthorized().check(h, CONFIG))


def test_an_effect_sent_by_a_run_after_the_hold_without_confirmation_is_a_violation() -> None:
    """A hold covers the run it asked about, not a later run that sends anyway."""
    h = History()
    card(h)
    answer(h, HOUR)
    intent(h, HOUR + 1)
    ob(h, "turn.held", HOUR + 5, f"turn.held:{TC}#1", session="s1", turn="s1.turn1",
       tool_call=TC)
    intent(h, HOUR + 10, run=2)
    email(h, HOUR + 11)
    result(h, 9 * DAY, "expired", run=2)
    h.add("run.end", time=10 * DAY)
    witness = failing(EffectAuthorized().check(h, CONFIG))
    assert "no hold between" in witness


def test_a_request_in_flight_that_lands_after_the_held_call_is_denied_is_covered() -> None:
    """Found by the soak (seed 1000002, scenario 25): the approved run's email was on its way
    when its host paused; the new owner held the call for that run's intent, the person's
    deny ended the held call, and the email landed after it. The hold asked about that run:
    the deny answered the hold, and does not say the email never happened."""
    h = History()
    card(h)
    answer(h, 3 * HOUR)
    answer(h, 3 * HOUR, "deny")
    intent(h, 3 * HOUR)
    ob(h, "turn.held", 6 * HOUR, f"turn.held:{TC}#1", session="s1", turn="s1.turn1",
       tool_call=TC)
    result(h, 6 * HOUR, "denied")
    email(h, 6 * HOUR + 4 * MIN)
    h.add("run.end", time=DAY)
    passing(EffectAuthorized().check(h, CONFIG))


def test_a_run_that_sends_after_its_call_was_denied_is_a_violation_held_or_not() -> None:
    """The hold covers the run it asked about; a run whose intent came after the deny acted
    on an answer that had lost, whatever was held before."""
    h = History()
    card(h)
    answer(h, HOUR)
    intent(h, HOUR)
    ob(h, "turn.held", 2 * HOUR, f"turn.held:{TC}#1", session="s1", turn="s1.turn1",
       tool_call=TC)
    answer(h, 3 * HOUR, "deny")
    result(h, 3 * HOUR, "denied")
    intent(h, 4 * HOUR, run=2)
    email(h, 4 * HOUR + 1)
    h.add("run.end", time=DAY)
    assert "after the person denied it" in failing(EffectAuthorized().check(h, CONFIG))


def test_a_tool_without_approval_held_after_its_effect_is_judged_from_its_card() -> None:
    """Found by the default run (seed 0): `notify` needs no approval, sent its email, crashed
    and was held; its first card asks to confirm, and nobody did. The email before that card
    needed no answer."""
    h = History()
    email(h, 2.5)
    ob(h, "turn.held", 3.5, f"turn.held:{TC}#1", session="s1", turn="s1.turn1", tool_call=TC)
    result(h, 3.5, "held")
    ob(h, "tool.awaiting", 3.5, f"aw:{TC}#2", {"tool": "notify", "mode": "confirm"},
       session="s1", turn="s1.turn1", tool_call=TC)
    result(h, 8 * DAY, "expired", run=2)
    h.add("run.end", time=9 * DAY)
    passing(EffectAuthorized().check(h, CONFIG))
    email(h, 8 * DAY + 1)  # after the expiry of the confirmation: not authorized
    assert "after the call expired" in failing(EffectAuthorized().check(h, CONFIG))


def test_a_tool_without_approval_whose_first_run_lands_after_its_card_passes() -> None:
    """Found by the soak (seed 1000001, scenario 24): `notify` needs no approval; its first
    run wrote its intent and its host was paused before the email landed. The new owner held
    the turn and showed the confirmation card; then the paused host sent, before the person
    approved. That email is the first run's, which needed no answer; a second run that sends
    after the card before the approve is still judged."""
    h = History()
    intent(h, 1113.0)
    ob(h, "turn.held", 1173.5, f"turn.held:{TC}#1", session="s1", turn="s1.turn1",
       tool_call=TC)
    result(h, 1173.5, "held")
    ob(h, "tool.awaiting", 1173.5, f"aw:{TC}#2", {"tool": "notify", "mode": "confirm"},
       session="s1", turn="s1.turn1", tool_call=TC)
    email(h, 1413.0)
    answer(h, 1413.0)
    intent(h, 1413.0, run=2)
    result(h, 1413.5, "answered", run=2)
    h.add("run.end", time=DAY)
    passing(EffectAuthorized().check(h, CONFIG))

    h = History()
    intent(h, 1113.0)
    ob(h, "turn.held", 1173.5, f"turn.held:{TC}#1", session="s1", turn="s1.turn1",
       tool_call=TC)
    ob(h, "tool.awaiting", 1173.5, f"aw:{TC}#2", {"tool": "notify", "mode": "confirm"},
       session="s1", turn="s1.turn1", tool_call=TC)
    intent(h, 1200.0, run=2)
    email(h, 1201.0)  # the second run sent without the confirmation
    answer(h, 1413.0)
    h.add("run.end", time=DAY)
    assert "before the person approved it" in failing(EffectAuthorized().check(h, CONFIG))


def test_effects_of_calls_no_person_was_asked_about_are_not_judged() -> None:
    h = History()
    email(h, MIN, tc="s1.turn1.t2")  # a tool without approval (notify)
    h.add("effect.delivered", time=MIN, key="model:s1.turn1:0", session="s1",
          turn="s1.turn1", data={"effect": "model", "logical": "s1.turn1:0"})
    h.add("run.end", time=DAY)
    r = EffectAuthorized().check(h, CONFIG)
    passing(r)
    assert not r.reached


def _approved(h: History, effect: dict[str, Any], shown: dict[str, Any] | None,
              tool: str = "send_email") -> None:
    """A call whose card showed `shown` (None: a board that keeps no arguments), approved,
    and its effect delivered with `effect` (the effect kind and what it carried)."""
    ob(h, "tool.awaiting", 0.0, f"aw:{TC}", {"tool": tool}, session="s1", turn="s1.turn1",
       tool_call=TC)
    answer(h, HOUR)
    h.add("effect.delivered", time=HOUR + 1, key=f"k:{TC}", tool_call=TC,
          data={"logical": TC, **effect})
    result(h, HOUR + 1, "answered")
    h.add("run.end", time=DAY, data={"cards": {TC: "answered"},
                                     **({"shown": {TC: shown}} if shown is not None else {})})


def test_an_effect_does_what_its_card_showed() -> None:
    h = History()
    _approved(h, {"effect": "email", "to": "bob@example.com"},
              {"to": "bob@example.com", "subject": "hi"})
    passing(EffectAuthorized().check(h, CONFIG))


def test_an_email_to_another_recipient_than_the_card_showed_is_a_violation() -> None:
    h = History()
    _approved(h, {"effect": "email", "to": "alice"}, {"to": "bob@example.com"})
    witness = failing(EffectAuthorized().check(h, CONFIG))
    assert ("send_email of s1.turn1.t1 was delivered at t=60.0m with to = 'alice', but the "
            "card the person approved showed to = 'bob@example.com'") in witness


def test_a_charge_of_another_amount_than_the_card_showed_is_a_violation() -> None:
    h = History()
    _approved(h, {"effect": "charge", "amount": 0}, {"amount": 100}, tool="charge_card")
    witness = failing(EffectAuthorized().check(h, CONFIG))
    assert "charge_card of s1.turn1.t1" in witness and "amount = 0" in witness
    assert "showed amount = 100" in witness


def test_content_a_card_did_not_show_is_not_judged() -> None:
    """A card with no arguments (a runtime that shows none), a board that keeps none, an
    argument the card did not show, a delivery that does not say what it carried: nothing
    to compare, so the approval stands."""
    for effect, shown in (({"effect": "email", "to": "alice"}, {}),
                          ({"effect": "email", "to": "alice"}, None),
                          ({"effect": "email", "to": "alice"}, {"subject": "hi"}),
                          ({"effect": "email"}, {"to": "bob@example.com"}),
                          ({"effect": "charge", "amount": 5}, {"to": "bob@example.com"})):
        h = History()
        _approved(h, effect, shown)
        passing(EffectAuthorized().check(h, CONFIG))


# ---------------------------------------------------------------- attribution (turn-outcome)


def test_a_result_filed_under_its_own_turn_passes() -> None:
    h = History()
    card(h)
    result(h, HOUR, "ended_by_message")
    ob(h, "threadlog.appended", HOUR, "app:3", {"entry": f"result:{TC}:ended_by_message",
                                                "entry_kind": "tool_result", "seq": 3},
       session="s1", turn="s1.turn1", tool_call=TC, epoch=2)
    h.add("run.end", time=DAY)
    r = TurnOutcome().check(h, CONFIG)
    passing(r)
    assert r.stats["misfiled"] == 0


def test_a_result_filed_under_the_next_turn_is_a_violation() -> None:
    h = History()
    card(h)
    ob(h, "threadlog.appended", HOUR, "app:3", {"entry": f"result:{TC}:ended_by_message",
                                                "entry_kind": "tool_result", "seq": 3},
       session="s1", turn="s1.turn2", tool_call=TC, epoch=2)
    result(h, HOUR, "ended_by_message", turn="s1.turn2")
    h.add("run.end", time=DAY)
    witness = failing(TurnOutcome().check(h, CONFIG))
    assert (f"the thread log filed the ended_by_message result of {TC} under turn s1.turn2 "
            "of session s1, not its own turn s1.turn1 of session s1") in witness


def test_a_result_reported_under_another_session_is_a_violation() -> None:
    h = History()
    card(h)
    ob(h, "tool.result", HOUR, "r", {"outcome": "denied"}, session="s2", turn="s1.turn1",
       tool_call=TC)
    h.add("run.end", time=DAY)
    witness = failing(TurnOutcome().check(h, CONFIG))
    assert "the runtime reported the denied result" in witness and "of session s2" in witness


# ---------------------------------------------------------------- answer-fate


def test_every_answer_applied_or_refused_passes() -> None:
    h = History()
    card(h)
    answer(h, HOUR)
    answer(h, HOUR, "deny")  # a second click, after the approve won
    result(h, HOUR + 1, "answered")
    refused(h, HOUR + 1, "already_decided", "deny")
    result(h, HOUR + 1, "answered")  # the same result, observed twice
    h.add("run.end", time=DAY)
    r = AnswerFate().check(h, CONFIG)
    passing(r)
    assert r.stats["answers"] == 2


def test_a_deny_dropped_after_an_approve_won_is_a_violation() -> None:
    h = History()
    card(h)
    answer(h, HOUR)
    answer(h, HOUR + 1, "deny")
    result(h, HOUR + 1, "answered")
    h.add("run.end", time=DAY)
    witness = failing(AnswerFate().check(h, CONFIG))
    assert (f"the deny of {TC} accepted at t=60.0m was silently dropped: neither applied nor "
            "refused with a reason; the call ended answered at t=60.0m") in witness


def test_an_approve_dropped_after_the_call_expired_is_a_violation() -> None:
    h = History()
    card(h)
    result(h, 8 * DAY, "expired")
    answer(h, 8 * DAY + HOUR)
    h.add("run.end", time=9 * DAY)
    witness = failing(AnswerFate().check(h, CONFIG))
    assert "the approve of" in witness and "the call ended expired" in witness
    # Refused with its reason: the person is told, and that is its fate.
    refused(h, 8 * DAY + HOUR, "expired")
    passing(AnswerFate().check(h, CONFIG))


def test_a_hold_and_a_rejection_are_an_approves_fate() -> None:
    h = History()
    card(h)
    answer(h, HOUR)
    result(h, HOUR, "held")
    answer(h, 2 * HOUR)
    result(h, 2 * HOUR, "rejected_access", run=2)
    h.add("run.end", time=DAY)
    passing(AnswerFate().check(h, CONFIG))


def test_a_refusal_must_give_a_true_reason() -> None:
    # The only answer of a waiting call, refused as "already decided"; the call then waits
    # out its 8 days: nothing had decided it, the answer was dropped with a false reason.
    h = History()
    card(h)
    answer(h, HOUR)
    false = refused(h, HOUR, "already_decided")
    result(h, 8 * DAY, "expired")
    h.add("run.end", time=9 * DAY)
    r = AnswerFate().check(h, CONFIG)
    witness = failing(r)
    assert (f"an answer to {TC} was refused at t=60.0m as already_decided, which the call "
            "never was: it expired at t=8.00d") in witness
    assert r.violations[0].records == (false.index,)
    # "expired" and "ended" must be true by then too.
    for reason in ("expired", "ended"):
        h = History()
        card(h)
        answer(h, HOUR)
        refused(h, HOUR, reason)
        result(h, 2 * HOUR, "answered")
        h.add("run.end", time=DAY)
        assert "which the call never was" in failing(AnswerFate().check(h, CONFIG)), reason
    # True reasons: a second answer after the first was applied (even if its result comes
    # later), a call that had ended by a new message.
    h = History()
    card(h)
    answer(h, HOUR)
    answer(h, HOUR, "deny")
    refused(h, HOUR, "already_decided", "deny")
    result(h, HOUR + 5, "answered")
    h.add("run.end", time=DAY)
    passing(AnswerFate().check(h, CONFIG))
    h = History()
    card(h)
    result(h, HOUR, "ended_by_message")
    answer(h, HOUR)
    refused(h, HOUR, "ended")
    h.add("run.end", time=DAY)
    passing(AnswerFate().check(h, CONFIG))
    # A held call whose turn a new message ended: "ended" is true with no final result yet.
    h = History()
    card(h)
    result(h, HOUR, "held")
    ob(h, "turn.ended", HOUR, "te1", {"reason": "steered"}, session="s1", turn="s1.turn1")
    answer(h, HOUR + 60)
    refused(h, HOUR + 60, "ended")
    h.add("run.end", time=DAY)
    passing(AnswerFate().check(h, CONFIG))


def test_an_answer_too_recent_to_judge_is_not_a_violation() -> None:
    h = History()
    card(h)
    answer(h, HOUR)
    h.add("run.end", time=HOUR + 10 * MIN)
    r = AnswerFate().check(h, CONFIG)
    passing(r)
    assert r.stats["unjudged"] == 1


def started(h: History) -> Record:
    return ob(h, "turn.started", 0, "turn.started:s1.turn1", {"message": "s1.m1"},
              session="s1", turn="s1.turn1")


def _refused_naming(h: History, t: float, outcome: Any) -> Record:
    return ob(h, "answer.refused", t, f"answer.refused:{TC}#1",
              {"reason": "ended", "decision": "approve", "outcome": outcome},
              session="s1", turn="s1.turn1", tool_call=TC)


def test_the_outcome_a_refusal_names_is_the_calls_final_one() -> None:
    # The person cancels, approves at once: refused as ended by the cancel, and the call
    # ends cancelled. True.
    h = History()
    started(h)
    card(h)
    h.add("op.cancel", "ok", time=MIN, session="s1")
    answer(h, MIN + 1)
    _refused_naming(h, MIN + 1, "cancelled")
    result(h, 5 * MIN, "cancelled")
    h.add("run.end", time=DAY)
    passing(AnswerFate().check(h, CONFIG))
    # Told "cancelled", and the call waited out its 8 days: the cancel never ended it.
    h = History()
    started(h)
    card(h)
    h.add("op.cancel", "ok", time=MIN, session="s1")
    answer(h, MIN + 1)
    told = _refused_naming(h, MIN + 1, "cancelled")
    result(h, 8 * DAY, "expired")
    h.add("run.end", time=9 * DAY)
    r = AnswerFate().check(h, CONFIG)
    assert (f"an answer to {TC} was refused at t=61s as ended by 'cancelled', but the call "
            "ended expired: it expired at t=8.00d") in failing(r)
    assert told.index in r.violations[0].records
    # A refusal that names no outcome.
    h = History()
    card(h)
    answer(h, MIN)
    _refused_naming(h, MIN, None)
    result(h, MIN, "answered")
    h.add("run.end", time=DAY)
    assert "which names no outcome" in failing(AnswerFate().check(h, CONFIG))


def test_a_call_sent_to_the_background_after_the_refusal_goes_on_as_its_own() -> None:
    """Soak seed 5400000 (scenario 51): the person cancels, then approves and sends the call
    to the background at one instant. The approval is refused as ended by the cancel; the
    background request takes the call out of its turn, and the call then expires: the named
    outcome was true of the turn when the person was told."""
    h = History()
    started(h)
    card(h)
    h.add("op.cancel", "ok", time=0, session="s1")
    answer(h, 3)
    _refused_naming(h, 3, "cancelled")
    ob(h, "tool.background", 3, f"tool.background:{TC}", session="s1", turn="s1.turn1",
       tool_call=TC)
    result(h, 3, "background")
    result(h, 8 * DAY, "expired")
    h.add("run.end", time=9 * DAY)
    passing(AnswerFate().check(h, CONFIG))


def test_a_held_call_outlives_the_turn_its_refusal_names() -> None:
    """Soak seed 5400001 (scenario 52): an approved charge crashes after the work and is held
    at the instant the person cancels and approves again; the approval is refused as ended by
    the cancel, and the confirmation card, left to the person, expires 8 days later."""
    h = History()
    started(h)
    card(h)
    h.add("op.cancel", "ok", time=HOUR, session="s1")
    answer(h, HOUR)
    _refused_naming(h, HOUR, "cancelled")
    result(h, HOUR, "held")
    result(h, 8 * DAY + HOUR, "expired", run=2)
    h.add("run.end", time=9 * DAY)
    passing(AnswerFate().check(h, CONFIG))
