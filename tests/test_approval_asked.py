"""approval-asked on small hand-made histories: a call of a tool that needs approval decided
after its card passes; an intent or a result before any card is caught; tools that need no
approval are not judged."""

from __future__ import annotations

from typing import Any

from harness.checkers import ApprovalAsked, CheckConfig, Result
from harness.history import History, Record

CONFIG = CheckConfig()
TC = "s1.turn1.t1"


def ob(h: History, kind: str, t: float, event_id: str, data: dict[str, Any] | None = None,
       **fields: Any) -> Record:
    return h.add(kind, "event", time=t, data={"event_id": event_id, **(data or {})}, **fields)


def card(h: History, t: float, tc: str = TC, tool: str = "send_email") -> Record:
    return h.add("tool.awaiting", time=t, session="s1", turn="s1.turn1", tool_call=tc,
                 data={"event_id": f"{tc}.awaiting", "tool": tool})


def intent(h: History, t: float, tc: str = TC, tool: str = "send_email") -> Record:
    return ob(h, "tool.intent", t, f"tool.intent:{tc}#1", {"run": 1, "tool": tool},
              session="s1", turn="s1.turn1", tool_call=tc)


def result(h: History, t: float, outcome: str, tc: str = TC, tool: str = "send_email") -> Record:
    return ob(h, "tool.result", t, f"tool.result:{tc}:{outcome}",
              {"outcome": outcome, "tool": tool}, session="s1", turn="s1.turn1", tool_call=tc)


def check(h: History) -> Result:
    h.add("run.end", time=max(r.time for r in h.records) + 1.0)
    return ApprovalAsked().check(h, CONFIG)


def test_a_call_decided_after_its_card_passes() -> None:
    h = History()
    card(h, 1)
    intent(h, 60)
    result(h, 61, "answered")
    # A tool without approval runs at once: not judged.
    intent(h, 70, "s1.turn1.t2", "notify")
    result(h, 71, "completed", "s1.turn1.t2", "notify")
    r = check(h)
    assert r.valid is True, r.witness(limit=20)
    assert r.reached and r.stats == {"judged_calls": 1.0}


def test_an_effect_of_an_approval_tool_before_any_card_is_a_violation() -> None:
    h = History()
    intent(h, 2)
    result(h, 3, "completed")
    r = check(h)
    assert r.valid is False
    assert (f"{TC} (send_email, which needs approval) wrote its intent at t=2s before any "
            "card asked the person") in r.witness(limit=20)
    assert len(r.violations) == 1  # one per call


def test_a_result_decided_for_the_person_is_a_violation() -> None:
    h = History()
    result(h, 2, "completed", tool="charge_card")
    witness = check(h).witness(limit=20)
    assert "ended completed at t=2s before any card asked the person" in witness


def test_no_call_of_an_approval_tool_is_not_reached() -> None:
    h = History()
    result(h, 2, "completed", tool="lookup")
    r = check(h)
    assert r.valid is True and not r.reached


def card_fault(h: History, t: float, fault: str, op: str) -> Record:
    return h.add("service.fault", "info", time=t, session="s1", turn="s1.turn1", tool_call=TC,
                 data={"service": "cards", "fault": fault, "op": op})


def test_a_card_shown_by_a_call_that_failed_after_the_work_asked_the_person() -> None:
    # The card service showed the card and then failed (500 after the work, or no answer):
    # the runtime does not know it showed it, but the person saw it and may approve at once.
    for fault in ("500_after", "timeout"):
        h = History()
        card_fault(h, 1, fault, "show")
        intent(h, 2, tool="charge_card")
        r = check(h)
        assert r.valid is True, (fault, r.witness(limit=20))


def test_a_card_call_that_failed_before_the_work_or_a_close_asked_nobody() -> None:
    for fault, op in (("500_before", "show"), ("200_error", "show"), ("500_after", "close"),
                      ("no-such-fault", "show")):
        h = History()
        card_fault(h, 1, fault, op)
        intent(h, 2, tool="charge_card")
        r = check(h)
        assert r.valid is False, (fault, op)
