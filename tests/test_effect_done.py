"""effect-done on small hand-made histories: a call reported done whose effect reached the
world passes, one whose effect never did is caught with a readable witness."""

from __future__ import annotations

from typing import Any

from harness.checkers import CheckConfig, EffectDone, Result
from harness.history import History, Record

CONFIG = CheckConfig()
TC = "s1.turn1.t1"


def ob(h: History, kind: str, t: float, event_id: str, data: dict[str, Any] | None = None,
       **fields: Any) -> Record:
    return h.add(kind, "event", time=t, data={"event_id": event_id, **(data or {})}, **fields)


def intent(h: History, t: float, tc: str = TC, tool: str = "send_email") -> Record:
    return ob(h, "tool.intent", t, f"tool.intent:{tc}#1", {"run": 1, "tool": tool},
              session="s1", turn="s1.turn1", tool_call=tc)


def result(h: History, t: float, outcome: str, tc: str = TC) -> Record:
    return ob(h, "tool.result", t, f"tool.result:{tc}:{outcome}", {"outcome": outcome},
              session="s1", turn="s1.turn1", tool_call=tc)


def email(h: History, t: float, tc: str = TC) -> Record:
    return h.add("effect.delivered", time=t, key=f"email:{tc}", tool_call=tc,
                 data={"effect": "email", "logical": tc})


def check(h: History) -> Result:
    h.add("run.end", time=max(r.time for r in h.records) + 1.0)
    return EffectDone().check(h, CONFIG)


def test_a_call_reported_done_after_its_effect_passes() -> None:
    h = History()
    intent(h, 10)
    email(h, 11)
    result(h, 11, "answered")
    result(h, 11, "answered")  # observed twice
    intent(h, 20, "s1.turn1.t2", "notify")
    result(h, 21, "completed", "s1.turn1.t2")
    email(h, 22, "s1.turn1.t2")  # the world recorded it after the result
    r = check(h)
    assert r.valid is True, r.witness(limit=20)
    assert r.reached and r.stats == {"judged_calls": 2.0}


def test_calls_without_an_intent_or_not_done_are_not_judged() -> None:
    h = History()
    result(h, 1, "completed", "s1.turn1.t9")  # a pure tool: no intent, no effect
    intent(h, 10)
    result(h, 11, "held")
    result(h, 12, "denied")
    r = check(h)
    assert r.valid is True and not r.reached
    assert r.note == "no call with an effect was reported done"


def test_a_call_reported_answered_without_its_effect_is_a_violation() -> None:
    h = History()
    intent(h, 10)
    result(h, 11, "answered")
    r = check(h)
    assert r.valid is False
    assert (f"{TC} (send_email) was reported answered at t=11s, and the world never "
            "received its effect") in r.witness(limit=20)


def test_another_calls_delivery_does_not_count() -> None:
    h = History()
    intent(h, 10)
    email(h, 11, "s1.turn1.t2")
    result(h, 11, "answered")
    assert check(h).valid is False


def test_a_tool_that_acts_reported_done_with_no_intent_and_no_effect_is_caught() -> None:
    """A run that skipped its intent and its effect alike: the tool the records name acts on
    the world (the catalog gives send_email an effect), so `answered` is a claim about it."""
    def history(delivered: bool) -> History:
        h = History()
        ob(h, "tool.awaiting", 1, f"tool.awaiting:{TC}#1", {"tool": "send_email"},
           session="s1", turn="s1.turn1", tool_call=TC)
        result(h, 10, "answered")
        ob(h, "tool.result", 20, "tool.result:s1.turn1.t2:completed",
           {"outcome": "completed", "tool": "lookup"}, session="s1", turn="s1.turn1",
           tool_call="s1.turn1.t2")  # a pure tool: nothing to deliver
        if delivered:
            email(h, 30)  # the world recorded it after the result: done after all
        return h

    r = check(history(delivered=False))
    assert r.valid is False and r.stats == {"judged_calls": 1.0}
    [v] = r.violations
    assert v.message.startswith(
        f"{TC} (send_email, a tool that acts on the world) was reported answered at t=10s, "
        "and the world never received its effect (its run wrote no intent either)"), v.message
    assert check(history(delivered=True)).valid is True
