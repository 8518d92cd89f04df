"""outcome-justified on small hand-made histories: a rejection after a revocation and a cancel
after the person's cancel pass; a rejection nobody's revocation explains and a cancel nobody
asked for are caught; cancels are judged only when the runner drove the run."""

from __future__ import annotations

from typing import Any

from harness.checkers import CheckConfig, OutcomeJustified, Result
from harness.history import History, Record

CONFIG = CheckConfig()
TC = "s1.turn1.t1"


def ob(h: History, kind: str, t: float, event_id: str, data: dict[str, Any] | None = None,
       **fields: Any) -> Record:
    return h.add(kind, "event", time=t, data={"event_id": event_id, **(data or {})}, **fields)


def message(h: History, t: float) -> None:
    h.add("op.message", "invoke", time=t, session="s1", data={"message_id": "m1"})


def card(h: History, t: float, tool: str = "send_email") -> Record:
    return h.add("tool.awaiting", time=t, session="s1", turn="s1.turn1", tool_call=TC,
                 data={"event_id": f"{TC}.awaiting", "tool": tool})


def result(h: History, t: float, outcome: str) -> Record:
    return ob(h, "tool.result", t, f"tool.result:{TC}:{outcome}", {"outcome": outcome},
              session="s1", turn="s1.turn1", tool_call=TC)


def turn_ended(h: History, t: float, reason: str) -> Record:
    return ob(h, "turn.ended", t, "turn.ended:s1.turn1", {"reason": reason}, session="s1",
              turn="s1.turn1")


def revoked(h: History, t: float, tool: str) -> Record:
    return h.add("identity.revoked", time=t, data={"user": "alice", "tool": tool})


def check(h: History) -> Result:
    h.add("run.end", time=max(r.time for r in h.records) + 1.0)
    return OutcomeJustified().check(h, CONFIG)


def test_a_rejection_after_a_revocation_and_a_cancel_after_a_cancel_pass() -> None:
    h = History()
    message(h, 0)
    card(h, 1)
    revoked(h, 10, "send_email")
    result(h, 20, "rejected_access")
    h.add("op.cancel", "invoke", time=30, session="s1")
    turn_ended(h, 31, "cancelled")
    r = check(h)
    assert r.valid is True, r.witness(limit=20)
    assert r.reached and r.stats["judged"] == 2.0


def test_a_revocation_of_every_tool_excuses_any_rejection() -> None:
    h = History()
    card(h, 1)
    revoked(h, 10, "*")
    result(h, 20, "rejected_access")
    assert check(h).valid is True


def test_a_rejection_nobody_revoked_is_a_violation() -> None:
    h = History()
    card(h, 1)
    revoked(h, 10, "charge_card")  # another tool's revocation does not count
    result(h, 20, "rejected_access")
    r = check(h)
    assert r.valid is False
    assert (f"{TC} (send_email) was rejected for access at t=20s, and nobody's access to "
            "send_email had been revoked") in r.witness(limit=20)


def test_a_revocation_after_the_rejection_does_not_excuse_it() -> None:
    h = History()
    card(h, 1)
    result(h, 20, "rejected_access")
    revoked(h, 30, "send_email")
    assert check(h).valid is False


def test_a_cancel_nobody_asked_for_is_a_violation() -> None:
    h = History()
    message(h, 0)
    card(h, 1)
    result(h, 5, "cancelled")
    turn_ended(h, 5, "cancelled")
    r = check(h)
    assert r.valid is False and len(r.violations) == 2
    assert ("s1.turn1 ended cancelled at t=5s, and nobody had cancelled a turn of s1"
            in r.witness(limit=20))


def test_cancels_are_not_judged_without_the_runner_s_records() -> None:
    h = History()
    turn_ended(h, 5, "cancelled")
    r = check(h)
    assert r.valid is True and not r.reached
