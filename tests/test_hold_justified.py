"""hold-justified on small hand-made histories: a hold the reference makes passes, and each
way of holding without an intent of unknown outcome is caught with a readable witness."""

from __future__ import annotations

from typing import Any

from harness.checkers import CheckConfig, HoldJustified, Result
from harness.history import History, Record

CONFIG = CheckConfig()
TC = "s1.turn1.t1"


def ob(h: History, kind: str, t: float, event_id: str, data: dict[str, Any] | None = None,
       **fields: Any) -> Record:
    return h.add(kind, "event", time=t, data={"event_id": event_id, **(data or {})}, **fields)


def assigned(h: History, t: float, epoch: int) -> Record:
    return ob(h, "threadlog.assigned", t, f"threadlog.assigned:s1:{epoch}",
              {"epoch": epoch, "owner": "dep1.h1"}, session="s1")


def intent(h: History, t: float, run: int, epoch: int | None) -> Record:
    data: dict[str, Any] = {"run": run, "key": f"email:{TC}", "tool": "send_email"}
    if epoch is not None:
        data["epoch"] = epoch
    return ob(h, "tool.intent", t, f"tool.intent:{TC}#{run}", data, session="s1",
              turn="s1.turn1", tool_call=TC)


def held(h: History, t: float, run: int) -> Record:
    return ob(h, "turn.held", t, f"turn.held:{TC}#{run}", {"run": run, "tool": "send_email"},
              session="s1", turn="s1.turn1", tool_call=TC)


def check(h: History) -> Result:
    h.add("run.end", time=t_end(h))
    return HoldJustified().check(h, CONFIG)


def t_end(h: History) -> float:
    return max((r.time for r in h.records), default=0.0) + 1.0


def test_a_hold_after_the_writing_attempt_lost_the_thread_passes() -> None:
    h = History()
    assigned(h, 0, 1)
    intent(h, 1, 1, epoch=1)
    assigned(h, 40, 2)  # the retry after a crash takes the thread again
    held(h, 40, 1)
    # The person confirms: run 2 writes its intent, is interrupted, and holds on it.
    assigned(h, 100, 3)
    intent(h, 100, 2, epoch=3)
    ob(h, "tool.intent", 100, f"tool.intent:{TC}#2", {"run": 2, "epoch": 3, "tool": "send_email"},
       session="s1", turn="s1.turn1", tool_call=TC)  # the same intent observed twice counts once
    assigned(h, 130, 4)
    held(h, 130, 2)
    r = check(h)
    assert r.valid is True, r.witness(limit=20)
    assert r.reached and r.stats == {"holds": 2.0, "intents": 2.0}


def test_a_history_without_holds_is_valid_and_not_reached() -> None:
    h = History()
    assigned(h, 0, 1)
    intent(h, 1, 1, epoch=1)
    r = check(h)
    assert r.valid is True and not r.reached and r.note == "no call was held"


def test_a_hold_without_an_intent_of_its_run_is_a_violation() -> None:
    # A confirmed run 2 that holds on the intent of run 1, the run it confirms.
    h = History()
    assigned(h, 0, 1)
    intent(h, 1, 1, epoch=1)
    assigned(h, 40, 2)
    held(h, 40, 1)
    assigned(h, 100, 3)
    held(h, 100, 2)
    r = check(h)
    assert r.valid is False
    assert (f"run 2 of {TC} was held at t=100s with no intent of that run: no effect was of "
            "unknown outcome, yet the person is asked to confirm") in r.witness(limit=20)
    assert len(r.violations) == 1


def test_a_hold_on_the_intent_its_own_attempt_wrote_is_a_violation() -> None:
    h = History()
    assigned(h, 0, 1)
    intent(h, 1, 1, epoch=1)
    held(h, 1, 1)
    r = check(h)
    assert r.valid is False
    assert (f"run 1 of {TC} was held at t=1s on its intent of t=1s at epoch 1, and no attempt "
            "took the thread of s1 since") in r.witness(limit=20)


def test_a_newer_owner_only_after_the_hold_does_not_justify_it() -> None:
    h = History()
    assigned(h, 0, 1)
    intent(h, 1, 1, epoch=1)
    held(h, 2, 1)
    assigned(h, 3, 2)
    assert check(h).valid is False


def test_intents_without_an_epoch_are_judged_on_the_intent_only() -> None:
    h = History()
    intent(h, 1, 1, epoch=None)
    held(h, 2, 1)
    assert check(h).valid is True
    h2 = History()
    held(h2, 2, 1)
    assert check(h2).valid is False


def card(h: History, t: float, run: int, mode: str) -> Record:
    return ob(h, "tool.awaiting", t, f"tool.awaiting:{TC}#{run}",
              {"run": run, "mode": mode, "tool": "send_email"}, session="s1", turn="s1.turn1",
              tool_call=TC)


def test_runs_numbered_as_the_design_numbers_them_pass() -> None:
    h = History()
    assigned(h, 0, 1)
    card(h, 1, 1, "approve")
    intent(h, 2, 1, epoch=1)
    assigned(h, 40, 2)
    held(h, 40, 1)
    card(h, 41, 2, "confirm")
    intent(h, 60, 1, epoch=1)  # the paused first attempt's intent, observed late
    assigned(h, 100, 3)
    intent(h, 100, 2, epoch=3)
    r = check(h)
    assert r.valid is True, r.witness(limit=20)


def test_a_first_run_numbered_2_is_a_violation() -> None:
    h = History()
    assigned(h, 0, 1)
    card(h, 1, 2, "approve")
    intent(h, 2, 2, epoch=1)
    r = check(h)
    assert r.valid is False
    witness = r.witness(limit=20)
    assert f"the approval card of {TC} at t=1s asks about run 2: a call's first run is run 1" \
        in witness
    assert (f"run 2 of {TC} wrote its intent at t=2s, but no run of the call was held before, "
            "so this is run 1: run numbers skip") in witness
    assert len(r.violations) == 2


def test_a_confirmation_that_reuses_or_skips_the_held_runs_number_is_a_violation() -> None:
    for confirmed, after in ((1, "after a hold of run 1 only"), (3, "after a hold of run 1 only")):
        h = History()
        assigned(h, 0, 1)
        intent(h, 1, 1, epoch=1)
        assigned(h, 40, 2)
        held(h, 40, 1)
        card(h, 41, confirmed, "confirm")
        r = check(h)
        assert r.valid is False, confirmed
        assert (f"the confirmation card of {TC} at t=41s asks about run {confirmed} {after}"
                in r.witness(limit=20)), r.witness(limit=20)


def test_a_confirmation_with_no_hold_and_an_intent_past_the_hold_are_violations() -> None:
    h = History()
    card(h, 1, 2, "confirm")
    assert "with no hold of the call before it" in check(h).witness(limit=20)
    h2 = History()
    assigned(h2, 0, 1)
    intent(h2, 1, 1, epoch=1)
    assigned(h2, 40, 2)
    held(h2, 40, 1)
    intent(h2, 100, 3, epoch=2)
    r = check(h2)
    assert r.valid is False
    assert f"run 3 of {TC} wrote its intent at t=100s, but the last hold was of run 1" \
        in r.witness(limit=20)


def test_records_without_a_run_number_are_not_judged_on_numbering() -> None:
    h = History()
    ob(h, "tool.awaiting", 1, f"tool.awaiting:{TC}", {"mode": "confirm"}, session="s1",
       turn="s1.turn1", tool_call=TC)
    ob(h, "tool.intent", 2, f"tool.intent:{TC}", {"tool": "send_email"}, session="s1",
       turn="s1.turn1", tool_call=TC)
    assert check(h).valid is True
