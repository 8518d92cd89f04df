"""message-logged on small hand-made histories: a turn whose message was appended passes,
one that ended without it is caught, and a runtime without a thread log is not judged."""

from __future__ import annotations

from typing import Any

from harness.checkers import CheckConfig, MessageLogged, Result
from harness.history import History, Record

CONFIG = CheckConfig()


def ob(h: History, kind: str, t: float, event_id: str, data: dict[str, Any] | None = None,
       **fields: Any) -> Record:
    return h.add(kind, "event", time=t, data={"event_id": event_id, **(data or {})}, **fields)


def started(h: History, t: float, turn: str = "s1.turn1") -> Record:
    return ob(h, "turn.started", t, f"turn.started:{turn}", {"message": "m1", "origin": "message"},
              session="s1", turn=turn)


def assigned(h: History, t: float, epoch: int = 1) -> Record:
    return ob(h, "threadlog.assigned", t, f"threadlog.assigned:s1:{epoch}",
              {"owner": "dep1.h1", "after_seq": 0}, session="s1", epoch=epoch)


def appended(h: History, t: float, seq: int, kind: str, turn: str = "s1.turn1") -> Record:
    return ob(h, "threadlog.appended", t, f"threadlog.appended:s1:{seq}",
              {"seq": seq, "owner": "dep1.h1", "entry": f"{kind}:{turn}", "entry_kind": kind,
               "turn": turn}, session="s1", epoch=1)


def ended(h: History, t: float, turn: str = "s1.turn1", reason: str = "completed") -> Record:
    return ob(h, "turn.ended", t, f"turn.ended:{turn}", {"reason": reason}, session="s1",
              turn=turn)


def check(h: History) -> Result:
    h.add("run.end", time=max(r.time for r in h.records) + 1.0)
    return MessageLogged().check(h, CONFIG)


def test_a_turn_that_logged_its_message_passes() -> None:
    h = History()
    started(h, 0)
    assigned(h, 1)
    appended(h, 1, 1, "user")
    appended(h, 2, 2, "model")
    ended(h, 3)
    ended(h, 3)  # observed twice
    r = check(h)
    assert r.valid is True, r.witness(limit=20)
    assert r.reached and r.stats == {"turns": 1.0}


def test_a_turn_that_ended_without_its_message_is_a_violation() -> None:
    h = History()
    started(h, 0)
    assigned(h, 1)
    appended(h, 2, 1, "model")
    ended(h, 3, reason="completed")
    r = check(h)
    assert r.valid is False
    assert ("s1.turn1 ended at t=3s (completed) and its message was never appended to the "
            "thread log of s1") in r.witness(limit=20)


def test_another_turns_message_does_not_count() -> None:
    h = History()
    started(h, 0, "s1.turn1")
    started(h, 0, "s1.turn2")
    assigned(h, 1)
    appended(h, 1, 1, "user", "s1.turn2")
    ended(h, 3, "s1.turn1")
    assert check(h).valid is False


def test_a_runtime_without_a_thread_log_is_not_judged() -> None:
    h = History()
    started(h, 0)
    ended(h, 3)
    r = check(h)
    assert r.valid is True and not r.reached


def committed(h: History, t: float, seq: int, kind: str, turn: str | None,
              entry: str = "m1") -> Record:
    return h.add("threadlog.committed", session="s1", epoch=1, time=t, turn=turn,
                 data={"seq": seq, "owner": "dep1.h1", "kind": kind, "entry": entry})


def test_an_append_of_unknown_outcome_that_landed_counts_as_logged() -> None:
    # The connection reset after PostgreSQL committed the append: no `threadlog.appended`,
    # but the log read back at the end holds the turn's message.
    h = History()
    started(h, 0)
    assigned(h, 1)
    ended(h, 3)
    # Matched by the turn the entry is filed under, whatever the runtime names its entries.
    committed(h, 4, 1, "user", "s1.turn1", entry="anything")
    assert check(h).valid is True
    # What the read-back holds must be this turn's message: another turn's, this turn's
    # model entry, or an entry of the turn's name filed under no turn, does not count.
    for kind, turn, entry in (("user", "s1.turn2", "user:s1.turn2"),
                              ("model", "s1.turn1", "user:s1.turn1"),
                              ("user", None, "user:s1.turn1")):
        h = History()
        started(h, 0)
        assigned(h, 1)
        ended(h, 3)
        committed(h, 4, 1, kind, turn, entry=entry)
        r = check(h)
        assert r.valid is False, (kind, entry)
        assert "never appended to the thread log of s1" in r.witness(limit=5)
