"""turn-per-message on small hand-made histories: every message the runner delivered gets
one turn; a message with none by the liveness bound (from the heal of the faults) is lost, a
message with two turns is doubled; a repeated report of one turn, a message sent too near the
end, and a run whose fault never healed are not violations."""

from __future__ import annotations

from typing import Any

from harness.checkers import CheckConfig, Result, TurnPerMessage
from harness.history import History, Record

CONFIG = CheckConfig()
HOUR = 3600.0


def sent(h: History, t: float, message: str, session: str = "s1") -> Record:
    h.add("op.message", "invoke", time=t, session=session,
          data={"message_id": message, "planned": 0})
    return h.add("op.message", "ok", time=t, session=session, data={"message_id": message})


def started(h: History, t: float, turn: str, message: str | None, session: str = "s1",
            event_id: str | None = None) -> Record:
    data: dict[str, Any] = {"event_id": event_id or f"{turn}.started"}
    if message is not None:
        data["message"] = message
    return h.add("turn.started", "event", time=t, session=session, turn=turn, data=data)


def check(h: History, end: float) -> Result:
    h.add("run.end", time=end)
    return TurnPerMessage().check(h, CONFIG)


def test_each_message_answered_by_one_turn_passes() -> None:
    h = History()
    sent(h, 0, "s1.m1")
    started(h, 0, "s1.turn1", "s1.m1")
    sent(h, 60, "s1.m2")
    started(h, 300, "s1.turn2", "s1.m2")  # queued behind turn 1, then its own turn
    r = check(h, 8 * 24 * HOUR)
    assert r.valid is True, r.witness(limit=20)
    assert r.reached


def test_a_message_that_never_started_a_turn_is_lost() -> None:
    h = History()
    sent(h, 0, "s1.m1")
    started(h, 0, "s1.turn1", "s1.m1")
    lost = sent(h, 60, "s1.m2")
    r = check(h, 2 * HOUR)
    assert r.valid is False
    witness = r.witness(limit=5)
    assert "message s1.m2 to session s1, sent at t=60s, never started a turn" in witness
    assert "the person got no answer" in witness
    assert r.violations[0].records == (lost.index,)


def test_a_message_sent_within_the_bound_of_the_end_is_not_judged() -> None:
    h = History()
    sent(h, 0, "s1.m1")
    r = check(h, HOUR - 1)
    assert r.valid is True and not r.reached


def test_the_bound_counts_from_the_heal_of_the_faults() -> None:
    h = History()
    h.add("fault.gc-pause", "info", time=0, data={"duration": 60.0}, host="dep1.h1")
    h.add("fault.heal", time=2 * HOUR, data={"at": 2 * HOUR})
    sent(h, 0, "s1.m1")
    # 2.5 h after sending but only 30 minutes after the heal: not yet lost.
    assert check(h, 2.5 * HOUR).valid is True
    h2 = History()
    h2.add("fault.gc-pause", "info", time=0, data={"duration": 60.0}, host="dep1.h1")
    h2.add("fault.heal", time=2 * HOUR, data={"at": 2 * HOUR})
    sent(h2, 0, "s1.m1")
    assert check(h2, 3.5 * HOUR).valid is False


def test_a_fault_that_never_healed_judges_no_lost_message() -> None:
    h = History()
    h.add("host.paused", time=0, host="dep1.h1", data={"until": 10 * 24 * HOUR})
    sent(h, 0, "s1.m1")
    r = check(h, 8 * 24 * HOUR)
    assert r.valid is True and "never healed" in r.note


def test_two_turns_from_one_message_are_doubled() -> None:
    h = History()
    sent(h, 0, "s1.m1")
    first = started(h, 0, "s1.turn1", "s1.m1")
    second = started(h, 40, "s1.turn2", "s1.m1")
    r = check(h, 8 * 24 * HOUR)
    assert r.valid is False
    assert ("message s1.m1 started 2 turns: s1.turn1 at t=0s and s1.turn2 at t=40s"
            in r.witness(limit=5))
    assert r.violations[0].records == (first.index, second.index)


def test_one_turn_reported_twice_is_one_turn() -> None:
    # A retried attempt reports the same turn again (same turn id): not a second turn.
    h = History()
    sent(h, 0, "s1.m1")
    started(h, 0, "s1.turn1", "s1.m1")
    started(h, 5, "s1.turn1", "s1.m1", event_id="s1.turn1.started")
    assert check(h, 8 * 24 * HOUR).valid is True


def test_turns_that_name_no_message_are_counted() -> None:
    # A runtime that reports turns without their message is judged by count.
    h = History()
    sent(h, 0, "s1.m1")
    sent(h, 10, "s1.m2")
    started(h, 0, "s1.turn1", None)
    started(h, 20, "s1.turn2", None)
    assert check(h, 8 * 24 * HOUR).valid is True
    h2 = History()
    sent(h2, 0, "s1.m1")
    sent(h2, 10, "s1.m2")
    started(h2, 0, "s1.turn1", None)
    r = check(h2, 8 * 24 * HOUR)
    assert r.valid is False
    assert "2 message(s) were sent" in r.witness() and "only 1 turn(s) started" in r.witness()


def test_a_background_result_answered_twice_is_doubled_too() -> None:
    h = History()
    sent(h, 0, "s1.m1")
    started(h, 0, "s1.turn1", "s1.m1")
    started(h, 100, "s1.turn2", "result:s1.turn1.t1")
    started(h, 101, "s1.turn3", "result:s1.turn1.t1")
    assert check(h, 8 * 24 * HOUR).valid is False


def test_a_message_kept_behind_a_wait_on_the_person_is_the_busy_rules_question() -> None:
    # The run ends while turn 1 waits on the person (as state) and the message that came
    # meanwhile, received, still waits behind it: not judged here.
    h = History()
    sent(h, 0, "s1.m1")
    started(h, 0, "s1.turn1", "s1.m1")
    h.add("turn.waiting", time=300, session="s1", turn="s1.turn1", tool_call="s1.turn1.t1",
          data={"event_id": "w1"})
    sent(h, 400, "s1.m2")
    h.add("message.received", time=400, session="s1",
          data={"event_id": "r2", "message": "s1.m2"})
    assert check(h, 8 * 24 * HOUR).valid is True
    # A message the runtime never received (refused) is lost all the same.
    h2 = History()
    sent(h2, 0, "s1.m1")
    h2.add("message.received", time=0, session="s1",
           data={"event_id": "r1", "message": "s1.m1"})
    started(h2, 0, "s1.turn1", "s1.m1")
    h2.add("turn.waiting", time=300, session="s1", turn="s1.turn1",
           tool_call="s1.turn1.t1", data={"event_id": "w1"})
    sent(h2, 400, "s1.m2")
    r = check(h2, 8 * 24 * HOUR)
    assert r.valid is False and "s1.m2" in r.witness()


def test_message_ids_are_per_session() -> None:
    # Two sessions may name their messages alike: one turn each is not a doubled answer.
    h = History()
    sent(h, 0, "m1")
    sent(h, 60, "m1", session="s2")
    started(h, 0, "s1.turn1", "m1")
    started(h, 60, "s2.turn1", "m1", session="s2")
    assert check(h, 8 * 24 * HOUR).valid is True
