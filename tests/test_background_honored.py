"""background-honored on small hand-made histories: a background request for an open card
is honored by `tool.background` (or a placeholder result), or is moot when the call was
already decided; a request with neither within the liveness bound (from the heal) is a
violation; one sent too near the end, or under a fault that never healed, is not judged."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.checkers import BackgroundHonored, CheckConfig, Result
from harness.history import History, Record

CONFIG = CheckConfig()
HOUR = 3600.0
DAYS = 24 * HOUR
CALL = "s1.turn1.t1"


def asked(h: History, t: float = 2) -> None:
    h.add("tool.awaiting", time=t, session="s1", turn="s1.turn1", tool_call=CALL,
          data={"event_id": "a1", "tool": "send_email"})


def background(h: History, t: float) -> Record:
    h.add("op.background", "invoke", time=t, session="s1", turn="s1.turn1", tool_call=CALL)
    return h.add("op.background", "ok", time=t, session="s1", turn="s1.turn1", tool_call=CALL)


def check(h: History, end: float) -> Result:
    h.add("run.end", time=end)
    return BackgroundHonored().check(h, CONFIG)


def test_a_call_moved_to_the_background_passes() -> None:
    h = History()
    asked(h)
    background(h, 60)
    h.add("tool.background", time=60, session="s1", turn="s1.turn1", tool_call=CALL,
          data={"event_id": "b1", "phase": "live"})
    r = check(h, 8 * DAYS)
    assert r.valid is True and r.reached


def test_a_placeholder_result_is_enough() -> None:
    h = History()
    asked(h)
    background(h, 60)
    h.add("tool.result", time=61, session="s1", turn="s1.turn1", tool_call=CALL,
          data={"event_id": "p1", "outcome": "background"})
    assert check(h, 8 * DAYS).valid is True


def test_a_call_already_decided_makes_the_request_moot() -> None:
    h = History()
    asked(h)
    h.add("tool.result", time=59, session="s1", turn="s1.turn1", tool_call=CALL,
          data={"event_id": "r1", "outcome": "answered"})
    background(h, 60)
    assert check(h, 8 * DAYS).valid is True


def test_a_request_ignored_is_a_violation() -> None:
    h = History()
    asked(h)
    request = background(h, 60)
    # The person answers days later: the turn waited on them all that time.
    h.add("tool.result", time=3 * DAYS, session="s1", turn="s1.turn1", tool_call=CALL,
          data={"event_id": "r1", "outcome": "answered"})
    r = check(h, 8 * DAYS)
    assert r.valid is False
    assert (f"the background request for {CALL} at t=60s was not honored"
            in r.witness(limit=5))
    assert r.violations[0].records == (request.index,)


def test_a_call_already_in_the_background_makes_a_second_request_moot() -> None:
    # Two requests at one instant: the first moved the call, the second found it moved.
    h = History()
    asked(h)
    background(h, 3)
    h.add("tool.background", time=3, session="s1", turn="s1.turn1", tool_call=CALL,
          data={"event_id": "b0", "phase": "live"})
    background(h, 3)
    assert check(h, 8 * DAYS).valid is True


def test_not_judged_near_the_end_or_under_a_fault_that_never_healed() -> None:
    h = History()
    asked(h)
    background(h, 60)
    r = check(h, 60 + HOUR - 1)
    assert r.valid is True and not r.reached
    h2 = History()
    h2.add("host.paused", time=0, host="dep1.h1", data={"until": 10 * DAYS})
    asked(h2)
    background(h2, 60)
    r2 = check(h2, 8 * DAYS)
    assert r2.valid is True and "never healed" in r2.note


def test_the_bound_counts_from_the_heal() -> None:
    h = History()
    h.add("fault.gc-pause", "info", time=0, data={"duration": 60.0}, host="dep1.h1")
    h.add("fault.heal", time=2 * HOUR, data={"at": 2 * HOUR})
    asked(h)
    background(h, 60)
    h.add("tool.background", time=2.5 * HOUR, session="s1", turn="s1.turn1", tool_call=CALL,
          data={"event_id": "b1", "phase": "waiting"})
    assert check(h, 8 * DAYS).valid is True


def test_an_answer_applied_before_the_request_makes_it_moot() -> None:
    # Approve and background at one instant, the approve first: the tool fails and the call
    # is held, a new card asks to confirm; the request was for the card already decided.
    h = History()
    asked(h)
    h.add("op.answer", "invoke", time=60, session="s1", turn="s1.turn1", tool_call=CALL,
          data={"decision": "approve"})
    h.add("op.answer", "ok", time=60, session="s1", turn="s1.turn1", tool_call=CALL)
    background(h, 60)
    h.add("tool.result", time=62, session="s1", turn="s1.turn1", tool_call=CALL,
          data={"event_id": "h1", "outcome": "held"})
    assert check(h, 8 * DAYS).valid is True
    # An answer refused before it does not count: the request is judged.
    h2 = History()
    asked(h2)
    h2.add("op.answer", "invoke", time=60, session="s1", turn="s1.turn1", tool_call=CALL,
           data={"decision": "approve"})
    h2.add("answer.refused", time=60, session="s1", turn="s1.turn1", tool_call=CALL,
           data={"event_id": "r1", "reason": "ended", "decision": "approve"})
    h2.add("op.answer", "ok", time=60, session="s1", turn="s1.turn1", tool_call=CALL)
    background(h2, 60)
    assert check(h2, 8 * DAYS).valid is False


def test_the_end_of_the_calls_wait_by_a_cancel_or_a_new_message_makes_it_moot() -> None:
    """A cancel (or a new message) at the instant of the request ends the turn while it waits
    on the call: the wait the request would move is over, though the call's result is written
    only by the next turn. A turn that ended another way, or later than the bound, or while
    waiting on another call, leaves the request unhonored."""
    cases = (("cancelled", CALL, 60, True), ("steered", CALL, 61, True),
             ("completed", CALL, 61, False), ("cancelled", "s1.turn1.t9", 61, False),
             ("cancelled", CALL, 3 * DAYS, False))
    for reason, waited_on, ended_at, moot in cases:
        h = History()
        h.add("turn.started", time=0, session="s1", turn="s1.turn1",
              data={"event_id": "t1", "message": "m1"})
        asked(h)
        background(h, 60)
        h.add("turn.ended", time=ended_at, session="s1", turn="s1.turn1", tool_call=waited_on,
              data={"event_id": "e1", "reason": reason})
        r = check(h, 8 * DAYS)
        assert r.valid is moot, (reason, waited_on, ended_at)


def approved_then_held(h: History, answered_at: float) -> None:
    """An approve at `answered_at`; its run is held on day 3 and never confirmed."""
    h.add("op.answer", "invoke", time=answered_at, session="s1", turn="s1.turn1",
          tool_call=CALL, data={"decision": "approve"})
    h.add("op.answer", "ok", time=answered_at, session="s1", turn="s1.turn1", tool_call=CALL)
    h.add("tool.result", time=3 * DAYS, session="s1", turn="s1.turn1", tool_call=CALL,
          data={"event_id": "h1", "outcome": "held"})


def test_an_answer_at_the_instant_of_the_request_races_it() -> None:
    """Background, then approve, at one instant: the engine may take the approve first (on
    the reference it reaches PendingToolCall directly, the request through the Controller),
    and then the request finds the call decided. An approve a minute after the request does
    not excuse an ignored request."""
    for answered_at, moot in ((60.0, True), (120.0, False)):
        h = History()
        asked(h)
        background(h, 60)
        approved_then_held(h, answered_at)
        assert check(h, 8 * DAYS).valid is moot, answered_at


def test_an_answer_that_overtakes_a_request_held_up_by_a_paused_host_races_it() -> None:
    """The request at 60 s, the approve a minute later, while a host is paused from 30 s to
    10 minutes: the request may still be on its way to the call when the approve reaches it
    (a paused host forwards it when it is back), so the approve may win and make it moot. An
    approve after the host is back, past the engine's latency, does not excuse it."""
    for answered_at, moot in ((120.0, True), (700.0, False)):
        h = History()
        h.add("host.paused", time=30, host="h1", data={"duration": 570.0})
        asked(h)
        background(h, 60)
        h.add("host.resumed", time=600, host="h1")
        approved_then_held(h, answered_at)
        assert check(h, 8 * DAYS).valid is moot, answered_at


def stranger(h: History, t: float) -> Record:
    """Session s9 names s1's call (the runner's `of`)."""
    h.add("op.background", "invoke", time=t, session="s9", turn="s1.turn1", tool_call=CALL,
          data={"of": "s1"})
    return h.add("op.background", "ok", time=t, session="s9", turn="s1.turn1",
                 tool_call=CALL, data={"of": "s1"})


def moved(h: History, t: float, event: str = "b1") -> Record:
    return h.add("tool.background", time=t, session="s1", turn="s1.turn1", tool_call=CALL,
                 data={"event_id": event, "phase": "live"})


def test_a_call_moved_at_a_strangers_request_is_a_violation() -> None:
    h = History()
    asked(h)
    request = stranger(h, 60)
    move = moved(h, 60)
    r = check(h, 8 * DAYS)
    assert r.valid is False and r.reached
    (v,) = r.violations
    assert v.message.startswith(
        "s1.turn1.t1 of session s1 went to the background at t=60s at the request of session "
        "s9, which does not own it (no request of s1 before it)")
    assert v.records == (request.index, move.index)


def test_a_strangers_request_that_moves_nothing_is_judged_and_passes() -> None:
    h = History()
    asked(h)
    stranger(h, 60)
    r = check(h, 8 * DAYS)
    assert r.valid is True and r.reached  # not owed a move: the stranger is not the person
    # The call's own person asks later: that request is honored, the stranger's stays moot.
    background(h, 600)
    moved(h, 600)
    assert check(h, 8 * DAYS).valid is True


def test_a_call_its_own_person_moved_first_is_not_the_strangers_doing() -> None:
    h = History()
    asked(h)
    background(h, 30)
    stranger(h, 60)
    moved(h, 60)
    assert check(h, 8 * DAYS).valid is True
    h = History()
    asked(h)
    moved(h, 10)  # in the background before the stranger asked
    stranger(h, 60)
    assert check(h, 8 * DAYS).valid is True


def test_an_outside_adapter_whose_gateway_resolves_the_callers_session_is_caught(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """tests/outside_adapters/gateway.py, a user's runtime on the simulator (public API
    only): scenario 55 has session s1 name s2's call; the gateway that forwards the asking
    session passes, the one that looks the call's session up moves the stranger's call."""
    from harness.cli import main

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root / "tests" / "outside_adapters")
    scenario = str(root / "scenarios"
                   / "55-a-stranger-sends-another-sessions-call-to-the-background.toml")
    args = ["run", "--scenarios", scenario, "--schedules", "0", "--quiet", "--report-dir"]
    assert main([*args, str(tmp_path / "a"), "--adapter", "gateway:adapter"]) == 0, (
        capsys.readouterr().out)
    capsys.readouterr()
    assert main([*args, str(tmp_path / "b"), "--adapter", "gateway:resolving_adapter"]) == 1
    out = capsys.readouterr().out
    assert ("background-honored: 1 run(s), e.g. a-stranger-sends-another-sessions-call-to-"
            "the-background: s2.turn1.t1 of session s2 went to the background at t=60s at "
            "the request of session s1, which does not own it") in out, out
