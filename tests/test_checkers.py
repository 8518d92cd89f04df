"""The checkers, each on small hand-made histories.

Every checker gets a history it must pass and a planted bug it must catch (with a witness that
names the ids that prove it), a history that never reaches its window (`reached` False), and
at-least-once duplicates of observations (same event_id) that must not look like violations.
"""

from __future__ import annotations

from typing import Any

import pytest

import harness.checkers as checkers
from harness.checkers import (
    ALL,
    AccessRechecked,
    BusyRule,
    CheckConfig,
    ConservativeRecovery,
    Fencing,
    Liveness,
    NoDuplicateEffects,
    PinningBound,
    Result,
    TurnOutcome,
    by_name,
    run_checkers,
)
from harness.errors import ConfigError
from harness.history import History, Record

CONFIG = CheckConfig()  # hand_off_after 5 min, max_wait 8 days, tolerance 60 s, liveness 1 h
MIN, HOUR, DAY = 60.0, 3600.0, 86400.0


def ev(h: History, kind: str, t: float, data: dict[str, Any] | None = None,
       type: Any = "event", **fields: Any) -> Record:
    return h.add(kind, type, time=t, data=data or {}, **fields)


def ob(h: History, kind: str, t: float, event_id: str, data: dict[str, Any] | None = None,
       **fields: Any) -> Record:
    """An observation from the runtime: carries an event_id, may repeat."""
    return h.add(kind, "event", time=t, data={"event_id": event_id, **(data or {})}, **fields)


def failing(result: Result) -> str:
    assert result.valid is False, result
    return result.witness(limit=20)


def passing(result: Result) -> None:
    assert result.valid is True, result.witness(limit=20)


# ---------------------------------------------------------------- composition


def test_all_lists_the_twenty_four_invariants_in_the_design_order() -> None:
    assert [c.name for c in ALL] == [
        "no-duplicate-effects", "pinning-bound", "busy-rule", "fencing", "turn-outcome",
        "access-rechecked", "conservative-recovery", "liveness", "effect-authorized",
        "answer-fate", "effect-done", "hold-justified", "outcome-justified", "message-logged",
        "approval-asked", "context-kept", "turn-per-message", "background-honored",
        "cancel-honored", "turn-answered", "card-closed", "no-code-error", "malformed-refused",
        "result-told",
    ]
    for checker in ALL:
        assert checker.description.endswith(".") and "\n" not in checker.description
        assert by_name(checker.name) is checker


def test_public_surface_is_pinned() -> None:
    assert set(checkers.__all__) == {
        "ALL", "AccessRechecked", "AnswerFate", "ApprovalAsked", "BackgroundHonored", "CardClosed",
        "BusyRule", "CancelHonored", "CheckConfig", "ContextKept", "Checker",
        "ConservativeRecovery", "EffectAuthorized", "EffectDone", "Fencing", "HoldJustified",
        "Liveness", "MalformedRefused",
        "MessageLogged", "NoCodeError", "NoDuplicateEffects", "OutcomeJustified",
        "PinningBound", "Result", "ResultTold", "TurnAnswered", "TurnOutcome", "TurnPerMessage",
        "Valid",
        "Violation",
        "by_name", "cite", "run_checkers", "verdict",
    }


def test_by_name_unknown_says_which_names_exist() -> None:
    with pytest.raises(ConfigError, match="no-duplicate-effects"):
        by_name("nope")


def test_empty_history_passes_everything_without_reaching_anything() -> None:
    results = run_checkers(ALL, History(), CONFIG)
    assert [r.valid for r in results] == [True] * len(ALL)
    assert not any(r.reached for r in results)


def test_a_crashing_checker_yields_unknown_through_run_checkers() -> None:
    class Broken:
        name = "broken"
        description = "Always crashes."

        def check(self, history: History, config: CheckConfig) -> Result:
            raise RuntimeError("boom")

    results = run_checkers([Broken(), NoDuplicateEffects()], History(), CONFIG)
    assert results[0].valid is None and "boom" in results[0].note
    assert results[0].outcome == "unknown"
    assert results[1].valid is True


def test_a_checker_given_garbage_returns_unknown_instead_of_raising() -> None:
    h = History()
    ev(h, "threadlog.committed", 10, {"seq": "not-a-number"}, session="s1", epoch=1)
    result = Fencing().check(h, CONFIG)
    assert result.valid is None
    assert "checker crashed: ValueError" in result.note
    [through] = run_checkers([Fencing()], h, CONFIG)
    assert through.valid is None


# ---------------------------------------------------------------- no-duplicate-effects


def _effect(h: History, kind: str, t: float, key: str | None, logical: str,
            effect: str = "email", tool_call: str | None = "tc1") -> Record:
    return ev(h, kind, t, {"effect": effect, "logical": logical}, key=key, session="s1",
              turn="T1", tool_call=tool_call)


def test_effects_retry_under_the_same_key_is_fine() -> None:
    h = History()
    _effect(h, "effect.attempted", 1, "k1", "tc1")
    _effect(h, "effect.delivered", 1, "k1", "tc1")
    _effect(h, "effect.attempted", 5, "k1", "tc1")
    _effect(h, "effect.deduplicated", 5, "k1", "tc1")
    _effect(h, "effect.delivered", 6, "m1", "T1:1", effect="model", tool_call=None)
    result = NoDuplicateEffects().check(h, CONFIG)
    passing(result)
    assert result.reached
    assert result.stats["delivered"] == 2 and result.stats["deduplicated"] == 1


def test_effects_same_tool_call_under_two_keys_is_a_duplicate() -> None:
    h = History()
    first = _effect(h, "effect.delivered", 1, "k1", "tc1")
    second = _effect(h, "effect.delivered", 90, "k2", "tc1")
    result = NoDuplicateEffects().check(h, CONFIG)
    witness = failing(result)
    assert "tc1" in witness and "k1" in witness and "k2" in witness
    assert result.violations[0].records == (first.index, second.index)


def test_effects_one_key_delivered_twice_is_a_duplicate() -> None:
    h = History()
    _effect(h, "effect.delivered", 1, "k1", "tc1", effect="charge")
    _effect(h, "effect.delivered", 2, "k1", "tc1", effect="charge")
    witness = failing(NoDuplicateEffects().check(h, CONFIG))
    assert "charge with idempotency key k1 was delivered twice" in witness


def test_effects_same_logical_id_of_different_effect_kinds_do_not_collide() -> None:
    h = History()
    _effect(h, "effect.delivered", 1, "k1", "x", effect="email")
    _effect(h, "effect.delivered", 2, "k2", "x", effect="charge")
    passing(NoDuplicateEffects().check(h, CONFIG))


def test_effects_two_keyless_deliveries_of_one_tool_call_say_so() -> None:
    """No key is not a key called None: two keyless sends are a duplicate, said plainly."""
    h = History()
    first = _effect(h, "effect.delivered", 1, None, "tc1")
    second = _effect(h, "effect.delivered", 3, None, "tc1")
    result = NoDuplicateEffects().check(h, CONFIG)
    witness = failing(result)
    assert "email tc1 was delivered twice without an idempotency key" in witness
    assert "None" not in witness.split(":")[0]
    assert result.violations[0].records == (first.index, second.index)


def test_effects_keyed_then_keyless_delivery_names_both() -> None:
    h = History()
    _effect(h, "effect.delivered", 1, "k1", "tc1")
    _effect(h, "effect.delivered", 3, "", "tc1")
    witness = failing(NoDuplicateEffects().check(h, CONFIG))
    assert "once under idempotency key k1 and once without a key" in witness


def test_effects_keyless_deliveries_of_different_calls_are_not_one_key() -> None:
    h = History()
    _effect(h, "effect.delivered", 1, None, "tc1")
    _effect(h, "effect.delivered", 2, None, "tc2")
    passing(NoDuplicateEffects().check(h, CONFIG))


def test_effects_not_reached_without_deliveries() -> None:
    h = History()
    _effect(h, "effect.attempted", 1, "k1", "tc1")
    result = NoDuplicateEffects().check(h, CONFIG)
    passing(result)
    assert not result.reached


# ---------------------------------------------------------------- pinning-bound


def _deploy(h: History, t: float, dep: str, version: str, prev: str | None = None) -> None:
    ev(h, "deployment.registered", t, {"version": version, "hosts": [f"{dep}.h1"]},
       deployment=dep)
    if prev is not None:
        ev(h, "deployment.superseded", t, {"by": dep}, deployment=prev)


def _start(h: History, t: float, inv: str, dep: str, target: str = "Controller/onMessage",
           key: str | None = "s1") -> None:
    ev(h, "invocation.created", t, {"target": target, "key": key}, invocation=inv)
    ev(h, "invocation.started", t, {"target": target, "key": key}, invocation=inv,
       deployment=dep)


def test_pinning_short_wait_then_drain_passes() -> None:
    h = History()
    _deploy(h, 0, "dep1", "v1")
    _start(h, 0, "inv1", "dep1")
    ev(h, "invocation.suspended", 10, invocation="inv1", deployment="dep1")
    _deploy(h, 100, "dep2", "v2", prev="dep1")
    ev(h, "invocation.resumed", 200, invocation="inv1", deployment="dep1")
    ev(h, "invocation.completed", 210, {"target": "Controller/onMessage"}, "ok",
       invocation="inv1", deployment="dep1")
    ev(h, "deployment.drained", 210, deployment="dep1")
    ev(h, "run.end", 10 * DAY)
    result = PinningBound().check(h, CONFIG)
    passing(result)
    assert result.reached
    assert result.stats["max_pinned"] == pytest.approx(110)
    assert result.stats["max_suspended"] == pytest.approx(190)


def test_pinning_eight_day_wait_pins_the_old_deployment() -> None:
    h = History()
    _deploy(h, 0, "dep1", "v1")
    _start(h, 0, "inv4", "dep1")
    suspended = ev(h, "invocation.suspended", 10, invocation="inv4", deployment="dep1")
    _deploy(h, 300, "dep2", "v2", prev="dep1")
    ev(h, "run.end", 3 * DAY)
    result = PinningBound().check(h, CONFIG)
    witness = failing(result)
    assert ("deployment dep1 (v1) stayed pinned 3.00d (still pinned when the run ended) "
            "after it was superseded at t=5.0m: invocation inv4 Controller/onMessage "
            "suspended from t=10s") in witness
    assert "limit 5.0m + 60s" in witness
    assert "invocation inv4 Controller/onMessage suspended from t=10s until the run ended" \
        in witness
    assert all(suspended.index in v.records for v in result.violations)
    assert result.stats["max_pinned"] == pytest.approx(3 * DAY - 300)


def test_pinning_long_suspension_without_redeploy_is_still_a_violation() -> None:
    h = History()
    _deploy(h, 0, "dep1", "v1")
    _start(h, 0, "inv2", "dep1", target="doTurn/run", key=None)
    ev(h, "invocation.suspended", 10, invocation="inv2", deployment="dep1")
    ev(h, "invocation.resumed", 10 + 8 * DAY, invocation="inv2", deployment="dep1")
    witness = failing(PinningBound().check(h, CONFIG))
    assert "inv2 doTurn/run" in witness and "8.00d suspended" in witness


def test_pinning_several_short_waits_still_pin_the_old_deployment_too_long() -> None:
    h = History()
    _deploy(h, 0, "dep1", "v1")
    _start(h, 0, "inv2", "dep1", target="doTurn/run", key=None)
    ev(h, "invocation.suspended", 2, invocation="inv2", deployment="dep1")
    _deploy(h, 3, "dep2", "v2", prev="dep1")
    ev(h, "invocation.resumed", 213, invocation="inv2", deployment="dep1")
    ev(h, "invocation.suspended", 218, invocation="inv2", deployment="dep1")
    ev(h, "invocation.resumed", 518, invocation="inv2", deployment="dep1")
    ev(h, "invocation.completed", 518, type="ok", invocation="inv2", deployment="dep1")
    ev(h, "deployment.drained", 518, deployment="dep1")
    result = PinningBound().check(h, CONFIG)
    witness = failing(result)
    assert len(result.violations) == 1  # each wait alone is within the bound
    assert ("deployment dep1 (v1) stayed pinned 8.6m after it was superseded at t=3s: "
            "invocation inv2 doTurn/run suspended from t=3.6m to t=8.6m") in witness
    assert "it waited 2 times, 8.5m in all, while pinning dep1" in witness


def test_pinning_host_downtime_is_not_counted_as_waiting() -> None:
    h = History()
    _deploy(h, 0, "dep1", "v1")
    _start(h, 0, "inv1", "dep1")
    _deploy(h, 50, "dep2", "v2", prev="dep1")
    ev(h, "host.paused", 60, host="dep1.h1", deployment="dep1")
    ev(h, "host.resumed", 60 + 20 * MIN, host="dep1.h1", deployment="dep1")
    ev(h, "invocation.completed", 61 + 20 * MIN, type="ok", invocation="inv1",
       deployment="dep1")
    ev(h, "deployment.drained", 61 + 20 * MIN, deployment="dep1")
    result = PinningBound().check(h, CONFIG)
    passing(result)
    assert result.stats["max_pinned"] > 20 * MIN


def test_pinning_running_keeper_excused_by_a_paused_host() -> None:
    h = History()
    _deploy(h, 0, "dep1", "v1")
    _start(h, 0, "inv1", "dep1")
    _deploy(h, 50, "dep2", "v2", prev="dep1")
    ev(h, "fault.gc-pause", 60, {"duration": 30.0}, type="info", host="dep1.h1")
    ev(h, "run.end", 2 * HOUR)
    result = PinningBound().check(h, CONFIG)
    passing(result)
    assert "by faults" in result.note


def test_pinning_paused_invocation_keeps_deployment_alive() -> None:
    h = History()
    _deploy(h, 0, "dep1", "v1")
    _start(h, 0, "inv7", "dep1")
    _deploy(h, 50, "dep2", "v2", prev="dep1")
    paused = ev(h, "invocation.paused", 70, {"reason": "journal mismatch"}, invocation="inv7",
                deployment="dep1")
    ev(h, "run.end", HOUR)
    result = PinningBound().check(h, CONFIG)
    witness = failing(result)
    assert "inv7" in witness and "journal mismatch" in witness
    assert paused.index in result.violations[0].records


def test_pinning_drained_while_still_pinned_is_a_violation() -> None:
    """Superseded and "drained" at the same instant, yet an invocation stays pinned to it:
    the drain is not taken at its word."""
    h = History()
    _deploy(h, 0, "dep1", "v1")
    _start(h, 0, "inv7", "dep1", target="doTurn/run", key=None)
    ev(h, "invocation.suspended", 10, invocation="inv7", deployment="dep1")
    _deploy(h, 100, "dep2", "v2", prev="dep1")
    drained = ev(h, "deployment.drained", 100, deployment="dep1")
    ev(h, "invocation.resumed", 250, invocation="inv7", deployment="dep1")
    ev(h, "invocation.completed", 260, {"target": "doTurn/run"}, "ok", invocation="inv7",
       deployment="dep1")
    ev(h, "run.end", DAY)
    result = PinningBound().check(h, CONFIG)
    witness = failing(result)
    assert ("deployment dep1 (v1) was recorded drained at t=100s while invocation inv7 "
            "doTurn/run was still pinned to it (since t=0s, until t=4.3m)") in witness
    assert drained.index in result.violations[0].records


def test_pinning_retired_while_still_pinned_is_a_violation() -> None:
    h = History()
    _deploy(h, 0, "dep1", "v1")
    _start(h, 0, "inv7", "dep1")
    _deploy(h, 100, "dep2", "v2", prev="dep1")
    ev(h, "deployment.retired", 120, deployment="dep1")
    ev(h, "run.end", DAY)
    witness = failing(PinningBound().check(h, CONFIG))
    assert "was recorded retired at t=2.0m while invocation inv7" in witness
    assert "until the run ended" in witness


def test_pinning_drained_when_the_last_pin_ends_passes() -> None:
    """The drain recorded at the completion (or a repin) that released it is honest."""
    h = History()
    _deploy(h, 0, "dep1", "v1")
    _start(h, 0, "inv1", "dep1")
    _start(h, 0, "inv2", "dep1")
    _deploy(h, 100, "dep2", "v2", prev="dep1")
    ev(h, "deployment.drained", 150, deployment="dep1")  # a real engine's poll, a bit early
    ev(h, "invocation.repinned", 150, invocation="inv2", deployment="dep2")
    ev(h, "invocation.completed", 180, {"target": "Controller/onMessage"}, "ok",
       invocation="inv1", deployment="dep1")
    ev(h, "run.end", DAY)
    passing(PinningBound().check(h, CONFIG))


def test_pinning_not_reached_without_a_pinned_redeploy_or_a_long_wait() -> None:
    h = History()
    _deploy(h, 0, "dep1", "v1")
    _start(h, 0, "inv1", "dep1")
    ev(h, "invocation.suspended", 1, invocation="inv1", deployment="dep1")
    ev(h, "invocation.resumed", 3, invocation="inv1", deployment="dep1")
    ev(h, "invocation.completed", 5, type="ok", invocation="inv1", deployment="dep1")
    _deploy(h, 10, "dep2", "v2", prev="dep1")  # nothing pinned to dep1 any more
    ev(h, "deployment.drained", 10, deployment="dep1")
    result = PinningBound().check(h, CONFIG)
    passing(result)
    assert not result.reached


# ---------------------------------------------------------------- busy-rule


def test_busy_waiting_turn_then_queued_message_in_order_passes() -> None:
    h = History()
    ob(h, "turn.started", 0, "e1", {"message": "m1"}, session="s1", turn="T1")
    ob(h, "message.queued", 5, "e2", {"message": "m2"}, session="s1")
    ob(h, "message.queued", 6, "e3", {"message": "m3"}, session="s1")
    ob(h, "turn.waiting", 300, "e4", session="s1", turn="T1", tool_call="tc1")
    ob(h, "turn.resumed", 900, "e5", {"outcome": "answered"}, session="s1", turn="T1",
       tool_call="tc1")
    ob(h, "turn.ended", 950, "e6", {"reason": "completed"}, session="s1", turn="T1")
    ob(h, "turn.started", 950, "e7", {"message": "m2"}, session="s1", turn="T2")
    ob(h, "turn.ended", 960, "e8", {"reason": "completed"}, session="s1", turn="T2")
    ob(h, "turn.started", 960, "e9", {"message": "m3"}, session="s1", turn="T3")
    ob(h, "turn.started", 0, "f1", {"message": "n1"}, session="s2", turn="U1")
    result = BusyRule().check(h, CONFIG)
    passing(result)
    assert result.reached and result.stats["queued"] == 2


def test_busy_new_turn_while_a_turn_waits_as_state_is_a_violation() -> None:
    h = History()
    started = ob(h, "turn.started", 0, "e1", {"message": "m1"}, session="s1", turn="T1")
    waiting = ob(h, "turn.waiting", 300, "e2", session="s1", turn="T1", tool_call="tc1")
    second = ob(h, "turn.started", 400, "e3", {"message": "m2"}, session="s1", turn="T2")
    result = BusyRule().check(h, CONFIG)
    witness = failing(result)
    assert "session s1: turn T2 started" in witness and "turn T1" in witness
    assert "waiting on tool call tc1" in witness
    assert result.violations[0].records == (started.index, waiting.index, second.index)


def test_busy_queued_messages_out_of_order_is_a_violation() -> None:
    h = History()
    ob(h, "turn.started", 0, "e1", {"message": "m1"}, session="s1", turn="T1")
    ob(h, "message.queued", 5, "e2", {"message": "m2"}, session="s1")
    ob(h, "message.queued", 6, "e3", {"message": "m3"}, session="s1")
    ob(h, "turn.ended", 50, "e4", {"reason": "completed"}, session="s1", turn="T1")
    ob(h, "turn.started", 50, "e5", {"message": "m3"}, session="s1", turn="T3")
    witness = failing(BusyRule().check(h, CONFIG))
    assert "message m3 started turn T3" in witness and "before message m2" in witness


def test_busy_new_message_queued_behind_a_waiting_turn_is_a_violation() -> None:
    h = History()
    ob(h, "turn.started", 0, "e1", {"message": "m1"}, session="s1", turn="T1")
    waiting = ob(h, "turn.waiting", 300, "e2", session="s1", turn="T1", tool_call="tc1")
    ob(h, "message.queued", 400, "e3", {"message": "result:tc0"}, session="s1")  # fine
    ev(h, "op.message", 500, {"message_id": "m2"}, type="invoke", session="s1")
    queued = ob(h, "message.queued", 500, "e4", {"message": "m2"}, session="s1")
    ev(h, "run.end", 900)
    result = BusyRule().check(h, CONFIG)
    witness = failing(result)
    assert "the new message m2 was queued at t=8.3m behind turn T1" in witness
    assert len(result.violations) == 1
    assert result.violations[0].records == (waiting.index, queued.index)


def test_busy_message_queued_while_the_turn_ran_must_end_the_turn_once_it_waits() -> None:
    """A person's message queued while the turn ran waits behind a person once the turn
    waits as state: the turn must end (or resume) then, like a steer; a background result
    queued the same way may wait."""
    for moved_on in ("turn.ended", "turn.resumed", None):
        h = History()
        ob(h, "turn.started", 0, "e1", {"message": "m1"}, session="s1", turn="T1")
        ev(h, "op.message", 60, {"message_id": "m2"}, type="invoke", session="s1")
        queued = ob(h, "message.queued", 60, "e2", {"message": "m2"}, session="s1")
        ob(h, "message.queued", 70, "e3", {"message": "result:tc0"}, session="s1")
        waiting = ob(h, "turn.waiting", 302, "e4", session="s1", turn="T1", tool_call="tc1")
        if moved_on is not None:
            ob(h, moved_on, 302, "e5", {"reason": "steered"} if moved_on == "turn.ended"
               else {"outcome": "answered"}, session="s1", turn="T1", tool_call="tc1")
        ev(h, "run.end", 900)
        result = BusyRule().check(h, CONFIG)
        if moved_on is not None:
            passing(result)
            continue
        witness = failing(result)
        assert ("the new message m2, queued at t=60s while turn T1 ran, stayed queued behind "
                "it once it waited on tool call tc1 as state from t=5.0m") in witness
        assert len(result.violations) == 1
        assert result.violations[0].records == (queued.index, waiting.index)


def test_busy_message_queued_as_the_turn_hands_off_is_fine_if_the_controller_moves_on() -> None:
    """The turn reports its wait before the controller hears of it: a message queued in that
    instant is fine when the controller then resumes (an answer came first) or ends the turn
    at once; it is a violation when it stays queued behind the wait."""
    for moved_on, late in (("turn.resumed", 0.0), ("turn.ended", 0.0), (None, 0.0),
                           ("turn.ended", 2 * HOUR)):
        h = History()
        ob(h, "turn.started", 0, "e1", {"message": "m1"}, session="s1", turn="T1")
        ob(h, "turn.waiting", 300, "e2", session="s1", turn="T1", tool_call="tc1")
        ev(h, "op.message", 300, {"message_id": "m2"}, type="invoke", session="s1")
        ob(h, "message.queued", 300, "e4", {"message": "m2"}, session="s1")
        if moved_on is not None:
            ob(h, moved_on, 300 + late, "e5", {"outcome": "denied", "reason": "steered"},
               session="s1", turn="T1", tool_call="tc1")
        ev(h, "run.end", 3 * HOUR)
        result = BusyRule().check(h, CONFIG)
        if moved_on is not None and not late:
            passing(result)
        else:
            assert "the new message m2 was queued at t=5.0m behind turn T1" in failing(result)


def test_busy_a_controller_held_up_by_a_fault_moves_on_when_the_fault_ends() -> None:
    """The turn waits as state while the controller's host is paused: the queued message
    ends it when the host is back (within tolerance of the heal), not within tolerance of
    the wait. Staying queued past the heal is still a violation; a fault that never heals
    leaves it unjudged; a run that ends before it is due does not judge it."""
    for moved_at, paused_until, end, fails in (
            (900.0, 890.0, 2000.0, False),  # ended as soon as the host was back
            (None, 890.0, 2000.0, True),  # never ended, though the fault healed
            (1500.0, 890.0, 2000.0, True),  # ended ten minutes after the heal
            (None, None, 2000.0, False),  # the pause never healed: not judged
            (None, 890.0, 890.5, False)):  # the run ended before it was due
        h = History()
        ob(h, "turn.started", 0, "e1", {"message": "m1"}, session="s1", turn="T1")
        ev(h, "op.message", 60, {"message_id": "m2"}, type="invoke", session="s1")
        ob(h, "message.queued", 60, "e2", {"message": "m2"}, session="s1")
        ev(h, "host.paused", 302, {"duration": 588.0} if paused_until else {},
           host="dep1.h1", deployment="dep1")
        ob(h, "turn.waiting", 302, "e4", session="s1", turn="T1", tool_call="tc1")
        if paused_until is not None:
            ev(h, "host.resumed", paused_until, host="dep1.h1", deployment="dep1")
        if moved_at is not None:
            ob(h, "turn.ended", moved_at, "e5", {"reason": "steered"}, session="s1",
               turn="T1", tool_call="tc1")
        ev(h, "run.end", end)
        result = BusyRule().check(h, CONFIG)
        case = (moved_at, paused_until, end)
        if fails:
            assert "stayed queued behind it once it waited" in failing(result), case
        else:
            assert result.valid is True, (case, result.witness(limit=5))


def test_busy_a_fault_elsewhere_later_excuses_nothing() -> None:
    """Only the downtime that held the controller up excuses it: a pause that begins an hour
    after the turn waits (the last fault of the run, healed long before its end) does not
    excuse a message that stayed queued behind the wait meanwhile."""
    for moved_at, fails in ((1500.0, True), (302.5, False)):
        h = History()
        ob(h, "turn.started", 0, "e1", {"message": "m1"}, session="s1", turn="T1")
        ev(h, "op.message", 60, {"message_id": "m2"}, type="invoke", session="s1")
        ob(h, "message.queued", 60, "e2", {"message": "m2"}, session="s1")
        ob(h, "turn.waiting", 302, "e4", session="s1", turn="T1", tool_call="tc1")
        ob(h, "turn.ended", moved_at, "e5", {"reason": "steered"}, session="s1", turn="T1",
           tool_call="tc1")
        ev(h, "host.paused", 3900, {"duration": 3600.0}, host="dep1.h2", deployment="dep1")
        ev(h, "host.resumed", 7500, host="dep1.h2", deployment="dep1")
        ev(h, "run.end", 20000)
        result = BusyRule().check(h, CONFIG)
        if fails:
            assert "stayed queued behind it once it waited" in failing(result)
        else:
            passing(result)


def test_busy_repeated_observations_are_not_new_turns() -> None:
    h = History()
    ob(h, "turn.started", 0, "e1", {"message": "m1"}, session="s1", turn="T1")
    ob(h, "turn.ended", 10, "e2", {"reason": "completed"}, session="s1", turn="T1")
    # The step that emitted turn.started is retried after the turn ended: same event_id.
    ob(h, "turn.started", 11, "e1", {"message": "m1"}, session="s1", turn="T1")
    ob(h, "message.queued", 12, "e3", {"message": "m2"}, session="s1")
    ob(h, "message.queued", 12, "e3", {"message": "m2"}, session="s1")
    ob(h, "turn.started", 20, "e4", {"message": "m2"}, session="s1", turn="T2")
    result = BusyRule().check(h, CONFIG)
    passing(result)
    assert result.stats["turns"] == 2 and result.stats["queued"] == 1


def test_busy_not_reached_without_contention() -> None:
    h = History()
    ob(h, "message.received", 0, "e0", {"message": "m1"}, session="s1")
    ob(h, "turn.started", 0, "e1", {"message": "m1"}, session="s1", turn="T1")
    ob(h, "turn.ended", 10, "e2", {"reason": "completed"}, session="s1", turn="T1")
    result = BusyRule().check(h, CONFIG)
    passing(result)
    assert not result.reached


# ---------------------------------------------------------------- fencing


def _assign(h: History, t: float, epoch: int, owner: str, eid: str) -> Record:
    return ob(h, "threadlog.assigned", t, eid, {"owner": owner}, session="s1", epoch=epoch)


def _append(h: History, t: float, seq: int, epoch: int, eid: str) -> Record:
    return ob(h, "threadlog.appended", t, eid, {"seq": seq}, session="s1", epoch=epoch)


def _committed(h: History, t: float, entries: list[tuple[int, int, str]]) -> None:
    for seq, epoch, owner in entries:
        ev(h, "threadlog.committed", t, {"seq": seq, "owner": owner, "kind": "msg"},
           session="s1", epoch=epoch)


def test_fencing_reassignment_with_rejected_stale_append_passes() -> None:
    h = History()
    _assign(h, 0, 1, "h1", "a1")
    _append(h, 1, 1, 1, "p1")
    _append(h, 1, 1, 1, "p1")  # at-least-once: the same observation again
    _append(h, 2, 2, 1, "p2")
    _assign(h, 100, 2, "h2", "a2")
    ob(h, "threadlog.rejected", 101, "r1", {"reason": "stale epoch"}, session="s1", epoch=1)
    _append(h, 102, 3, 2, "p3")
    _append(h, 103, 3, 2, "p3-again")  # same entry seen under another event id
    ev(h, "run.end", 200)
    _committed(h, 200, [(1, 1, "h1"), (2, 1, "h1"), (3, 2, "h2")])
    ev(h, "threadlog.owner", 200, {"owner": "h2"}, session="s1", epoch=2)
    result = Fencing().check(h, CONFIG)
    passing(result)
    assert result.reached
    assert result.stats["appended"] == 3 and result.stats["rejected"] == 1


def test_fencing_a_write_refused_by_a_holder_past_the_idle_timeout_is_a_violation() -> None:
    """A lock timeout is the fence working while the holder is within the database's idle
    bound; past it, the database should have ended the holder (a paused host)."""
    def history(refused_at: float, facts: dict[str, float]) -> History:
        h = History()
        _assign(h, 0, 1, "h1", "a1")
        _append(h, 1, 1, 1, "p1")
        ob(h, "threadlog.rejected", refused_at, "r1",
           {"reason": "LockTimeout", "entry": "take_ownership", **facts}, session="s1")
        ev(h, "run.end", 200)
        _committed(h, 200, [(1, 1, "h1")])
        return h

    facts = {"held_since": 10.0, "idle_timeout": 5.0}
    within = Fencing().check(history(15.0, facts), CONFIG)  # the bound itself: not longer
    passing(within)
    assert within.reached and within.stats["rejected"] == 1
    passing(Fencing().check(history(100.0, {}), CONFIG))  # a store that does not know
    witness = failing(Fencing().check(history(15.5, facts), CONFIG))
    assert ("session s1: a write was refused the control row at t=15.5s by a transaction "
            "holding it since t=10s (5.5s), longer than the store's idle-in-transaction "
            "timeout of 5s") in witness


def test_fencing_a_rejection_the_engine_saw_and_the_runtime_hid_is_a_violation() -> None:
    """A runtime that reports its log's appends reports its rejections too; one that reports
    no appends is not asked to."""
    def history(appends: bool, reported: str | None) -> History:
        h = History()
        _assign(h, 0, 1, "h1", "a1")
        if appends:
            _append(h, 1, 1, 1, "p1")
        h.add("attempt.failed", "event", time=5, invocation="inv1", host="h1",
              data={"attempt": 1, "error": "TransactionAborted: idle too long",
                    "error_type": "TransactionAborted"})
        h.add("attempt.failed", "event", time=6, invocation="inv1", host="h1",
              data={"attempt": 2, "error": "ProviderError: 500",
                    "error_type": "ProviderError"})  # not the log's
        if reported is not None:
            ob(h, "threadlog.rejected", 5, "r1", {"reason": reported}, session="s1", epoch=1)
        ev(h, "run.end", 200)
        _committed(h, 200, [(1, 1, "h1")] if appends else [])
        return h

    passing(Fencing().check(history(True, "TransactionAborted"), CONFIG))
    passing(Fencing().check(history(False, None), CONFIG))
    witness = failing(Fencing().check(history(True, "StaleEpoch"), CONFIG))
    assert ("an attempt failed at t=5s on a thread-log rejection (TransactionAborted), and the "
            "runtime, which reports its log's appends, reported no TransactionAborted "
            "rejection") in witness


def test_fencing_stale_write_that_landed_is_a_violation() -> None:
    h = History()
    _assign(h, 0, 1, "h1", "a1")
    _append(h, 1, 1, 1, "p1")
    newer = _assign(h, 100, 2, "h2", "a2")
    _append(h, 101, 2, 2, "p2")
    stale = _append(h, 150, 3, 1, "p3")  # host h1 woke from a GC pause and wrote anyway
    ev(h, "run.end", 200)
    _committed(h, 200, [(1, 1, "h1"), (2, 2, "h2"), (3, 1, "h1")])
    result = Fencing().check(h, CONFIG)
    witness = failing(result)
    assert ("session s1: append seq 3 with epoch 1 was accepted at t=2.5m, although "
            "epoch 2 (owner h2) was current since t=100s: a stale write landed") in witness
    assert (newer.index, stale.index) == result.violations[0].records
    assert "committed seq 3 carries epoch 1, after seq 2 was written under the newer " \
        "epoch 2" in witness


def test_fencing_judges_an_append_reported_after_the_takeover_by_the_stores_order() -> None:
    # A real engine: the old owner committed seq 2 holding the control row, then the new
    # owner's assignment (which waited for that row) committed; the two processes' reports
    # reached the harness the other way round. The assignment read seq 2 as already
    # committed (after_seq): not a stale write.
    h = History()
    _assign(h, 0, 1, "h1", "a1")
    _append(h, 1, 1, 1, "p1")
    ob(h, "threadlog.assigned", 100, "a2", {"owner": "h2", "after_seq": 2}, session="s1",
       epoch=2)
    _append(h, 101, 2, 1, "p2")  # reported late, committed before the takeover
    _append(h, 102, 3, 2, "p3")
    ev(h, "run.end", 200)
    _committed(h, 200, [(1, 1, "h1"), (2, 1, "h1"), (3, 2, "h2")])
    assert Fencing().check(h, CONFIG).valid is True

    # The same takeover, but the old owner's seq 3 came after it: stale, whatever the order.
    h = History()
    _assign(h, 0, 1, "h1", "a1")
    ob(h, "threadlog.assigned", 100, "a2", {"owner": "h2", "after_seq": 0}, session="s1",
       epoch=2)
    _append(h, 101, 1, 1, "p1")
    ev(h, "run.end", 200)
    _committed(h, 200, [(1, 1, "h1")])
    assert "a stale write landed" in failing(Fencing().check(h, CONFIG))


def test_fencing_log_with_gap_and_duplicate_is_not_linear() -> None:
    h = History()
    _assign(h, 0, 1, "h1", "a1")
    _committed(h, 10, [(1, 1, "h1"), (3, 1, "h1"), (3, 1, "h1")])
    witness = failing(Fencing().check(h, CONFIG))
    assert "jumps to seq 3; seq 2 is missing" in witness
    assert "holds seq 3 twice" in witness


def test_fencing_entry_under_unassigned_epoch_or_foreign_owner() -> None:
    h = History()
    _assign(h, 0, 1, "h1", "a1")
    _committed(h, 10, [(1, 1, "h9"), (2, 5, "h1")])
    witness = failing(Fencing().check(h, CONFIG))
    assert "written by h9 under epoch 1, which was assigned to h1" in witness
    assert "epoch 5, which was never assigned" in witness


def test_fencing_not_reached_with_a_single_owner() -> None:
    h = History()
    _assign(h, 0, 1, "h1", "a1")
    _append(h, 1, 1, 1, "p1")
    _committed(h, 10, [(1, 1, "h1")])
    result = Fencing().check(h, CONFIG)
    passing(result)
    assert not result.reached


# ---------------------------------------------------------------- turn-outcome


def _wait(h: History, t: float = 300.0, turn: str = "T1", tc: str = "tc1") -> Record:
    ob(h, "tool.awaiting", 0, f"aw-{tc}", {"tool": "send_email"}, session="s1", turn=turn,
       tool_call=tc)
    ob(h, "tool.handoff", t, f"ho-{tc}", session="s1", turn=turn, tool_call=tc)
    return ob(h, "turn.waiting", t, f"w-{tc}", session="s1", turn=turn, tool_call=tc)


def _resume(h: History, t: float, eid: str, outcome: str = "answered", turn: str = "T1",
            tc: str = "tc1") -> Record:
    return ob(h, "turn.resumed", t, eid, {"outcome": outcome}, session="s1", turn=turn,
              tool_call=tc)


def test_turns_answered_once_passes_despite_repeated_observation() -> None:
    h = History()
    _wait(h)
    _resume(h, 2 * DAY, "r1")
    _resume(h, 2 * DAY + 1, "r1")  # the same resume, observed twice
    ev(h, "run.end", 10 * DAY)
    result = TurnOutcome().check(h, CONFIG)
    passing(result)
    assert result.reached and result.stats["answered"] == 1


def test_turns_doubled_resume_is_a_violation() -> None:
    h = History()
    waiting = _wait(h)
    first = _resume(h, DAY, "r1")
    second = _resume(h, DAY + 5, "r2")
    result = TurnOutcome().check(h, CONFIG)
    witness = failing(result)
    assert "turn T1 resumed 2 times for tool call tc1" in witness
    assert result.violations[0].records == (waiting.index, first.index, second.index)


def test_turns_lost_wait_is_a_violation() -> None:
    h = History()
    waiting = _wait(h)
    ev(h, "run.end", 300 + 8 * DAY + 2 * HOUR)
    result = TurnOutcome().check(h, CONFIG)
    witness = failing(result)
    assert "turn T1 waited on tool call tc1" in witness and "never answered" in witness
    assert result.violations[0].records == (waiting.index,)


def test_turns_still_waiting_before_max_wait_is_fine() -> None:
    h = History()
    _wait(h)
    ev(h, "run.end", 3 * DAY)
    result = TurnOutcome().check(h, CONFIG)
    passing(result)
    assert result.stats["open"] == 1


def test_turns_expiry_on_time_passes() -> None:
    h = History()
    _wait(h)
    ob(h, "tool.result", 8 * DAY + 300, "x1", {"outcome": "expired"}, session="s1",
       turn="T1", tool_call="tc1")
    _resume(h, 8 * DAY + 301, "r1", outcome="expired")
    ev(h, "run.end", 10 * DAY)
    result = TurnOutcome().check(h, CONFIG)
    passing(result)
    assert result.stats["expired"] == 1


def test_turns_early_and_late_expiry_are_violations() -> None:
    h = History()
    _wait(h, tc="tc1")
    ob(h, "tool.result", DAY, "x1", {"outcome": "expired"}, session="s1", turn="T1",
       tool_call="tc1")
    _resume(h, DAY, "r1", outcome="expired", tc="tc1")
    _wait(h, turn="T2", tc="tc2")
    ob(h, "tool.result", 9 * DAY, "x2", {"outcome": "expired"}, session="s1", turn="T2",
       tool_call="tc2")
    _resume(h, 9 * DAY, "r2", outcome="expired", turn="T2", tc="tc2")
    witness = failing(TurnOutcome().check(h, CONFIG))
    assert "tool call tc1 of turn T1 expired at t=24.0h, only 24.0h after" in witness
    assert "tool call tc2 of turn T2 expired late" in witness


def test_turns_late_expiry_excused_by_as_much_fault_time() -> None:
    h = History()
    _wait(h)
    ev(h, "fault.gc-pause", DAY, {"duration": 3 * HOUR}, type="info", host="dep1.h1")
    ob(h, "tool.result", 8 * DAY + 300 + 2 * HOUR, "x1", {"outcome": "expired"},
       session="s1", turn="T1", tool_call="tc1")
    _resume(h, 8 * DAY + 300 + 2 * HOUR, "r1", outcome="expired")
    passing(TurnOutcome().check(h, CONFIG))


def test_turns_ended_by_new_message_then_resumed_is_doubled() -> None:
    h = History()
    _wait(h)
    ob(h, "turn.ended", DAY, "end1", {"reason": "steered"}, session="s1", turn="T1")
    ok = TurnOutcome().check(h, CONFIG)
    passing(ok)
    assert ok.stats["ended"] == 1
    _resume(h, 2 * DAY, "r1")
    witness = failing(TurnOutcome().check(h, CONFIG))
    assert "turn T1 resumed for tool call tc1 at t=2.00d after its wait had already ended " \
        "(steered)" in witness


def test_turns_hold_restarts_the_wait_for_confirmation() -> None:
    h = History()
    _wait(h)
    ob(h, "turn.held", 2 * DAY, "held1", session="s1", turn="T1", tool_call="tc1")
    # The confirmation card expires max_wait after the hold, not after the first card.
    ob(h, "tool.result", 10 * DAY, "x1", {"outcome": "expired"}, session="s1", turn="T1",
       tool_call="tc1")
    _resume(h, 10 * DAY, "r1", outcome="expired")
    passing(TurnOutcome().check(h, CONFIG))


def _result(h: History, t: float, outcome: str, tc: str = "tc1", turn: str = "T1") -> Record:
    return ob(h, "tool.result", t, f"tool.result:{tc}:{outcome}", {"outcome": outcome},
              session="s1", turn=turn, tool_call=tc)


def _logged(h: History, t: float, outcome: str, tc: str = "tc1") -> Record:
    return ob(h, "threadlog.appended", t, f"app:{tc}:{outcome}",
              {"entry": f"result:{tc}:{outcome}", "entry_kind": "tool_result", "seq": 1},
              session="s1", epoch=1)


def test_turns_a_call_that_never_waited_as_state_may_not_expire_early_either() -> None:
    """A runtime that never hands off (the wait in the call) and expires the card at the
    hand-off bound instead of after `max_wait`: no `turn.waiting`, judged from the card."""
    h = History()
    card = ob(h, "tool.awaiting", 2.0, "aw1", {"tool": "send_email"}, session="s1", turn="T1",
              tool_call="tc1")
    expired = _result(h, 5 * MIN, "expired")
    ev(h, "run.end", 9 * DAY)
    result = TurnOutcome().check(h, CONFIG)
    witness = failing(result)
    assert ("tool call tc1 expired at t=5.0m, only 5.0m after its card was shown at t=2s "
            "(it may not expire before 8.00d)") in witness
    assert set(result.violations[0].records) == {card.index, expired.index}
    # The same expiry after max_wait, or a confirmation card's max_wait after its hold, holds.
    h = History()
    ob(h, "tool.awaiting", 2.0, "aw1", {"tool": "send_email"}, session="s1", turn="T1",
       tool_call="tc1")
    ob(h, "turn.held", 2 * DAY, "held1", session="s1", turn="T1", tool_call="tc1")
    _result(h, 10 * DAY, "expired")
    ev(h, "run.end", 11 * DAY)
    passing(TurnOutcome().check(h, CONFIG))


def test_turns_answered_then_expired_is_two_final_outcomes() -> None:
    """The expiry timer of an answered hand-off fires on day 8: a second result for the same
    tool call, even though the controller ignores it and no turn record doubles."""
    h = History()
    _wait(h)
    answered = _result(h, 2 * DAY, "answered")
    _logged(h, 2 * DAY, "answered")
    _resume(h, 2 * DAY, "r1")
    expired = _result(h, 8 * DAY, "expired")
    logged = _logged(h, 8 * DAY, "expired")
    ev(h, "run.end", 10 * DAY)
    result = TurnOutcome().check(h, CONFIG)
    witness = failing(result)
    assert ("tool call tc1 of turn T1 ended 2 times, it may end once: answered at t=2.00d; "
            "expired at t=8.00d; the thread log holds 2 results for it: "
            "result:tc1:answered, result:tc1:expired") in witness
    assert {answered.index, expired.index, logged.index} <= set(result.violations[0].records)
    assert result.stats["doubled_outcomes"] == 1


def test_turns_two_results_in_the_committed_log_alone_are_a_violation() -> None:
    """A runtime that reports nothing but its log: the committed log is judged on its own."""
    h = History()
    for seq, outcome in ((3, "answered"), (7, "expired")):
        ev(h, "threadlog.committed", 10 * DAY, {"seq": seq, "kind": "tool_result",
                                               "entry": f"result:s1.turn1.t1:{outcome}"},
           session="s1", epoch=1)
    witness = failing(TurnOutcome().check(h, CONFIG))
    assert "tool call s1.turn1.t1" in witness
    assert "result:s1.turn1.t1:answered, result:s1.turn1.t1:expired" in witness


def test_turns_placeholder_and_hold_are_not_final_outcomes() -> None:
    """Background: a placeholder, then the real result; a hold, then the confirmed result."""
    h = History()
    _wait(h)
    for t, outcome in ((DAY, "background"), (DAY, "held"), (2 * DAY, "answered")):
        _result(h, t, outcome)
        _logged(h, t, outcome)
    _result(h, 2 * DAY + 1, "answered")  # repeated observation of the same result
    ev(h, "run.end", 3 * DAY)
    passing(TurnOutcome().check(h, CONFIG))


def test_turns_answer_applied_after_max_wait_is_a_violation() -> None:
    """Judged from the card, whether the runtime waited in-call (no `turn.waiting` at all)
    or as state; faults do not excuse it."""
    h = History()
    ob(h, "tool.awaiting", HOUR, "aw1", {"tool": "send_email"}, session="s1", turn="T1",
       tool_call="tc1")
    ev(h, "fault.crash", 5 * DAY, type="info", host="dep1.h1")
    ev(h, "host.restarted", 9 * DAY, host="dep1.h1")
    late = _result(h, HOUR + 8 * DAY + 2 * MIN, "answered")
    result = TurnOutcome().check(h, CONFIG)
    witness = failing(result)
    assert ("tool call tc1 of turn T1 was answered at t=8.04d, 8.00d after its card was "
            "shown at t=60.0m: an answer applied after max_wait") in witness
    assert result.violations[0].records == (late.index,)
    assert result.reached and result.stats["late_answers"] == 1


def test_turns_judging_an_in_call_card_reaches_its_window() -> None:
    """An agent that waits on its card in-call has no `turn.waiting`; turn-outcome still
    judged the card and its answer, so it reached its window (JUnit: a pass, not a skip
    "without reaching its window")."""
    h = History()
    ob(h, "tool.awaiting", 0, "aw1", {"tool": "send_email"}, session="s1", turn="T1",
       tool_call="tc1")
    _result(h, 2 * MIN, "answered")
    ev(h, "run.end", HOUR)
    result = TurnOutcome().check(h, CONFIG)
    passing(result)
    assert result.reached and result.stats["waits"] == 0 and result.stats["judged"] == 1
    # A tool call's results alone are judged too (one final outcome per call).
    h2 = History()
    _result(h2, MIN, "completed")
    ev(h2, "run.end", HOUR)
    assert TurnOutcome().check(h2, CONFIG).reached
    # Nothing to judge: not reached, and the note says why.
    h3 = History()
    ev(h3, "run.end", HOUR)
    empty = TurnOutcome().check(h3, CONFIG)
    assert not empty.reached and "no tool call had a result" in empty.note


def test_turns_late_answer_is_judged_against_the_max_wait_tolerance() -> None:
    """The max_wait rule uses the tolerance at max_wait, and its witness names it."""
    config = CheckConfig(tolerance=60.0, hand_off_tolerance=10.0, max_wait_tolerance=3600.0)
    h = History()
    ob(h, "tool.awaiting", 0, "aw1", {"tool": "send_email"}, session="s1", turn="T1",
       tool_call="tc1")
    _result(h, 8 * DAY + 30 * MIN, "answered")  # past 8d + 60s, within 8d + 1h
    passing(TurnOutcome().check(h, config))
    h2 = History()
    ob(h2, "tool.awaiting", 0, "aw1", {"tool": "send_email"}, session="s1", turn="T1",
       tool_call="tc1")
    _result(h2, 8 * DAY + 2 * HOUR, "answered")
    assert "(limit 8.00d + 60.0m (the tolerance at max_wait))" in failing(
        TurnOutcome().check(h2, config))


def test_turns_answer_within_max_wait_of_the_latest_card_passes() -> None:
    h = History()
    ob(h, "tool.awaiting", 0, "aw1", {"tool": "send_email"}, session="s1", turn="T1",
       tool_call="tc1")
    _result(h, 8 * DAY + 30, "denied")  # within the tolerance
    ob(h, "tool.awaiting", 0, "aw2", {"tool": "send_email"}, session="s1", turn="T2",
       tool_call="tc2")
    ob(h, "turn.held", 5 * DAY, "held2", session="s1", turn="T2", tool_call="tc2")
    _result(h, 12 * DAY, "answered", tc="tc2", turn="T2")  # 7 days after the confirm card
    passing(TurnOutcome().check(h, CONFIG))


def test_turns_expiry_counted_from_a_hold_whose_card_a_fault_delayed_passes() -> None:
    """A hold, then a paused host, then its confirmation card: the runtime counts 8 days from
    the hold, and that is on time, not early."""
    h = History()
    _wait(h)
    ob(h, "turn.held", HOUR, "held1", session="s1", turn="T1", tool_call="tc1")
    ob(h, "tool.awaiting", HOUR + 135, "aw2", {"tool": "send_email"}, session="s1",
       turn="T1", tool_call="tc1")
    _result(h, HOUR + 8 * DAY, "expired")
    _resume(h, HOUR + 8 * DAY, "r1", outcome="expired")
    passing(TurnOutcome().check(h, CONFIG))
    h2 = History()
    _wait(h2)
    ob(h2, "tool.awaiting", HOUR + 135, "aw2", {"tool": "send_email"}, session="s1",
       turn="T1", tool_call="tc1")
    _result(h2, HOUR + 8 * DAY, "expired")
    assert "only 8.00d after" in failing(TurnOutcome().check(h2, CONFIG))


def test_turns_not_reached_without_a_wait() -> None:
    h = History()
    ob(h, "turn.started", 0, "e1", session="s1", turn="T1")
    ob(h, "turn.ended", 5, "e2", {"reason": "completed"}, session="s1", turn="T1")
    result = TurnOutcome().check(h, CONFIG)
    passing(result)
    assert not result.reached


# ---------------------------------------------------------------- access-rechecked


def _access_world(h: History) -> None:
    ev(h, "op.message", 0, {"message_id": "m1", "user": "u1"}, type="invoke", session="s1")
    _deploy(h, 0, "dep1", "v1")
    ob(h, "tool.awaiting", 10, "aw1", {"tool": "send_email"}, session="s1", turn="T1",
       tool_call="tc1")
    ob(h, "tool.handoff", 310, "ho1", session="s1", turn="T1", tool_call="tc1")
    _deploy(h, 1000, "dep2", "v2", prev="dep1")


def test_access_an_in_call_execution_in_flight_past_the_hand_off_is_not_a_skipped_check(
) -> None:
    """The call's execution began in-call (its intent written before the revocation and the
    hand-off); its host paused mid-request and delivered after the hand-off. No re-run was
    asked to check: not a violation. An intent of the call after the hand-off (a re-run that
    never said it checked) is still judged."""
    def history(intent_at: float) -> History:
        h = History()
        ev(h, "op.message", 0, {"message_id": "m1", "user": "u1"}, type="invoke",
           session="s1")
        _deploy(h, 0, "dep1", "v1")
        ob(h, "tool.awaiting", 10, "aw1", {"tool": "send_email"}, session="s1", turn="T1",
           tool_call="tc1")
        if intent_at < 310:
            ob(h, "tool.intent", intent_at, "in1", {"tool": "send_email"}, session="s1",
               turn="T1", tool_call="tc1")
        ev(h, "identity.revoked", 200, {"user": "u1", "tool": "send_email"})
        ob(h, "tool.handoff", 310, "ho1", session="s1", turn="T1", tool_call="tc1")
        if intent_at >= 310:
            ob(h, "tool.intent", intent_at, "in2", {"tool": "send_email"}, session="s1",
               turn="T1", tool_call="tc1")
        ev(h, "effect.delivered", 900, {"effect": "email", "logical": "tc1"}, key="k1",
           session="s1", turn="T1", tool_call="tc1")
        return h

    passing(AccessRechecked().check(history(100), CONFIG))
    assert "no re-run checked it after the hand-off" in failing(
        AccessRechecked().check(history(600), CONFIG))


def test_access_rerun_on_latest_and_denied_after_revocation_passes() -> None:
    h = History()
    _access_world(h)
    ev(h, "identity.revoked", 2000, {"user": "u1", "tool": "send_email"})
    ob(h, "tool.rerun", 3000, "rr1", {"access": "denied"}, session="s1", turn="T1",
       tool_call="tc1", deployment="dep2")
    ob(h, "tool.rerun", 3001, "rr1", {"access": "denied"}, session="s1", turn="T1",
       tool_call="tc1", deployment="dep2")
    result = AccessRechecked().check(h, CONFIG)
    passing(result)
    assert result.reached and result.stats["reruns"] == 1


def test_access_rerun_on_the_old_deployment_is_a_violation() -> None:
    h = History()
    _access_world(h)
    ob(h, "tool.rerun", 3000, "rr1", {"access": "granted"}, session="s1", turn="T1",
       tool_call="tc1", deployment="dep1")
    witness = failing(AccessRechecked().check(h, CONFIG))
    assert "tool call tc1 re-ran on deployment dep1 (v1)" in witness
    assert "dep2 (v2) was the latest" in witness


def test_access_rerun_placed_through_its_invocation() -> None:
    h = History()
    _access_world(h)
    _start(h, 2990, "inv9", "dep2", target="PendingToolCall/answer", key="tc1")
    ob(h, "tool.rerun", 3000, "rr1", {"access": "granted"}, session="s1", turn="T1",
       tool_call="tc1", invocation="inv9")
    passing(AccessRechecked().check(h, CONFIG))


def test_access_granted_to_a_user_who_lost_access_is_a_violation() -> None:
    h = History()
    _access_world(h)
    revoked = ev(h, "identity.revoked", 2000, {"user": "u1", "tool": "send_email"})
    rerun = ob(h, "tool.rerun", 3000, "rr1", {"access": "granted"}, session="s1", turn="T1",
               tool_call="tc1", deployment="dep2")
    delivered = ev(h, "effect.delivered", 3001, {"effect": "email", "logical": "tc1"},
                   key="k1", session="s1", turn="T1", tool_call="tc1")
    result = AccessRechecked().check(h, CONFIG)
    witness = failing(result)
    assert "tool call tc1 re-ran with access=granted" in witness
    assert "user u1 lost access to send_email at t=33.3m" in witness
    assert "email of tool call tc1 was delivered" in witness
    assert result.violations[0].records == (revoked.index, rerun.index)
    assert delivered.index in result.violations[1].records


def test_access_revoked_while_the_checked_request_is_in_flight_is_too_late() -> None:
    h = History()
    _access_world(h)
    ob(h, "tool.rerun", 3000, "rr1", {"access": "granted"}, session="s1", turn="T1",
       tool_call="tc1", deployment="dep2")
    ev(h, "identity.revoked", 3000.2, {"user": "u1", "tool": "send_email"})
    ev(h, "effect.delivered", 3000.5, {"effect": "email", "logical": "tc1"}, key="k1",
       session="s1", turn="T1", tool_call="tc1")
    passing(AccessRechecked().check(h, CONFIG))


def test_access_a_delivery_is_judged_by_the_check_of_the_run_that_sent_it() -> None:
    """Run 1 checked before the revoke and was paused mid-send; run 2 (a later answer's
    re-run) checked after it and was denied. The email run 1 sends late is judged by run 1's
    check (granted before the revoke): it passes. A delivery sent by run 2's intent is judged
    by run 2's denied check: a violation."""
    def history(sender: int) -> History:
        h = History()
        _access_world(h)
        ob(h, "tool.rerun", 3000, "rr1", {"access": "granted", "run": 1}, session="s1",
           turn="T1", tool_call="tc1", deployment="dep2")
        ob(h, "tool.intent", 3000, "in1", {"tool": "send_email", "run": 1}, session="s1",
           turn="T1", tool_call="tc1")
        ev(h, "identity.revoked", 3000, {"user": "u1", "tool": "send_email"})
        ob(h, "tool.rerun", 3060, "rr2", {"access": "denied", "run": 2}, session="s1",
           turn="T1", tool_call="tc1", deployment="dep2")
        if sender == 2:
            ob(h, "tool.intent", 3061, "in2", {"tool": "send_email", "run": 2}, session="s1",
               turn="T1", tool_call="tc1")
        ev(h, "effect.delivered", 3600, {"effect": "email", "logical": "tc1"}, key="k1",
           session="s1", turn="T1", tool_call="tc1")
        return h

    passing(AccessRechecked().check(history(1), CONFIG))
    witness = failing(AccessRechecked().check(history(2), CONFIG))
    assert "email of tool call tc1 was delivered at t=60.0m" in witness
    assert "before the re-run at t=51.0m" in witness


def test_access_delivery_after_hand_off_without_any_recheck_is_a_violation() -> None:
    h = History()
    _access_world(h)
    ev(h, "identity.revoked", 2000, {"user": "u1", "tool": "send_email"})
    ev(h, "effect.delivered", 3000, {"effect": "email", "logical": "tc1"}, key="k1",
       tool_call="tc1")
    ob(h, "tool.rerun", 3100, "rr1", {"access": "denied"}, session="s1", turn="T1",
       tool_call="tc1", deployment="dep2")
    witness = failing(AccessRechecked().check(h, CONFIG))
    assert "email of tool call tc1 was delivered at t=50.0m" in witness
    assert "no re-run checked it after the hand-off at t=5.2m" in witness


def _in_call(revoke_at: float | None, *, approve_at: float | None = 200.0,
             grant_at: float | None = None, tool: str = "send_email") -> History:
    """A call never handed off: the model asks for it at 100, the person approves it (when
    `approve_at`), its run writes its intent and its effect is delivered at 400."""
    h = History()
    ev(h, "op.message", 0, {"message_id": "m1", "user": "u1"}, type="invoke", session="s1")
    if revoke_at is not None and revoke_at < 100:
        ev(h, "identity.revoked", revoke_at, {"user": "u1", "tool": tool})
    ev(h, "effect.delivered", 100, {"effect": "model", "logical": "T1:0", "asked": "tc1"},
       key="model:T1:0", session="s1", turn="T1")
    approved = approve_at if approve_at is not None else 300
    if revoke_at is not None and 100 <= revoke_at < approved:
        ev(h, "identity.revoked", revoke_at, {"user": "u1", "tool": tool})
    if approve_at is not None:
        ob(h, "tool.awaiting", 101, "aw1", {"tool": tool}, session="s1", turn="T1",
           tool_call="tc1")
        ev(h, "op.answer", approve_at, {"decision": "approve"}, type="invoke", session="s1",
           tool_call="tc1")
    if revoke_at is not None and approved <= revoke_at < 300:
        ev(h, "identity.revoked", revoke_at, {"user": "u1", "tool": tool})
    if grant_at is not None:
        ev(h, "identity.granted", grant_at, {"user": "u1", "tool": tool})
    ob(h, "tool.intent", 300, "in1", {"tool": tool}, session="s1", turn="T1",
       tool_call="tc1")
    if revoke_at is not None and revoke_at >= 300:
        ev(h, "identity.revoked", revoke_at, {"user": "u1", "tool": tool})
    ev(h, "effect.delivered", 400, {"effect": "email", "logical": "tc1"}, key="k1",
       session="s1", turn="T1", tool_call="tc1")
    return h


def test_access_a_call_never_handed_off_is_judged_from_its_ask_and_its_approval() -> None:
    """A call approved in the call (or needing no approval) was checked after the model
    asked for it and after the approval its run began on: a revocation standing then, and
    still at the delivery, was there to be seen."""
    witness = failing(AccessRechecked().check(_in_call(150), CONFIG))
    assert ("email of tool call tc1 was delivered at t=6.7m although user u1 lost access to "
            "send_email at t=2.5m, before the person approved it at t=3.3m") in witness
    witness = failing(AccessRechecked().check(_in_call(50, approve_at=None, tool="notify"),
                                              CONFIG))
    assert "lost access to notify at t=50s, before the model asked for it at t=100s" in witness
    # Revoked after the approval, or after the run began: the check may have come first.
    passing(AccessRechecked().check(_in_call(250), CONFIG))
    passing(AccessRechecked().check(_in_call(350), CONFIG))
    # Granted again before the delivery: a check just before it would allow it.
    passing(AccessRechecked().check(_in_call(150, grant_at=250), CONFIG))
    # No ask and no approval the harness can place: not judged.
    h = _in_call(None, approve_at=None)
    passing(AccessRechecked().check(h, CONFIG))


def test_access_an_approved_run_is_judged_by_the_approvers_access() -> None:
    """The runner says who answered (`op.answer` `user`): an approval is that person's
    authority, whatever user the runtime says its check was about."""
    def history(revoked: str, rerun: bool) -> History:
        h = History()
        ev(h, "op.message", 0, {"message_id": "m1", "user": "alice"}, type="invoke",
           session="s1")
        _deploy(h, 0, "dep1", "v1")
        ob(h, "tool.awaiting", 10, "aw1", {"tool": "send_email"}, session="s1", turn="T1",
           tool_call="tc1")
        ev(h, "identity.revoked", 60, {"user": revoked, "tool": "send_email"})
        if rerun:
            ob(h, "tool.handoff", 310, "ho1", session="s1", turn="T1", tool_call="tc1")
        ev(h, "op.answer", 600, {"decision": "approve", "user": "bob"}, type="invoke",
           session="s1", tool_call="tc1")
        if rerun:  # the runtime says it checked alice's access
            ob(h, "tool.rerun", 600, "rr1", {"access": "granted", "user": "alice",
                                             "version": "v1"},
               session="s1", turn="T1", tool_call="tc1", deployment="dep1")
        ob(h, "tool.intent", 601, "in1", {"tool": "send_email"}, session="s1", turn="T1",
           tool_call="tc1")
        ev(h, "effect.delivered", 602, {"effect": "email", "logical": "tc1"}, key="k1",
           session="s1", turn="T1", tool_call="tc1")
        return h

    assert "user bob lost access to send_email at t=60s, before the person approved it" in (
        failing(AccessRechecked().check(history("bob", rerun=False), CONFIG)))
    assert "re-ran with access=granted at t=10.0m although user bob lost access" in (
        failing(AccessRechecked().check(history("bob", rerun=True), CONFIG)))
    # The requester lost access, the approver did not: the approver's authority stands.
    passing(AccessRechecked().check(history("alice", rerun=False), CONFIG))
    passing(AccessRechecked().check(history("alice", rerun=True), CONFIG))


def test_access_a_turn_acts_for_the_sender_of_its_message() -> None:
    """Alice and Bob write in one session: Bob's turn acts for Bob. The runner's word on who
    sent a message (`op.message` `user`) stands over the runtime's (`message.received`);
    without it, the runtime's is read."""
    def history(revoked: str, runner_names: bool, runtime_says: str = "bob") -> History:
        h = History()
        for t, message, user in ((0, "s1.m1", "alice"), (60, "s1.m2", "bob")):
            ev(h, "op.message", t, {"message_id": message,
                                    **({"user": user} if runner_names else {})},
               type="invoke", session="s1")
        ev(h, "identity.revoked", 1, {"user": revoked, "tool": "notify"})
        ob(h, "message.received", 0, "mr1", {"message": "s1.m1", "user": "alice"},
           session="s1")
        ob(h, "turn.started", 0, "ts1", {"message": "s1.m1"}, session="s1", turn="T1")
        ob(h, "message.received", 60, "mr2", {"message": "s1.m2", "user": runtime_says},
           session="s1")
        ob(h, "turn.started", 60, "ts2", {"message": "s1.m2"}, session="s1", turn="T2")
        ev(h, "effect.delivered", 62, {"effect": "model", "logical": "T2:0", "asked": "tc2"},
           key="model:T2:0", session="s1", turn="T2")
        ob(h, "tool.intent", 62, "in2", {"tool": "notify"}, session="s1", turn="T2",
           tool_call="tc2")
        ev(h, "effect.delivered", 63, {"effect": "email", "logical": "tc2"}, key="k2",
           session="s1", turn="T2", tool_call="tc2")
        return h

    assert "although user bob lost access to notify at t=1s" in failing(
        AccessRechecked().check(history("bob", runner_names=True), CONFIG))
    # The runtime files Bob's message under Alice: the runner's word stands.
    assert "although user bob lost access to notify at t=1s" in failing(
        AccessRechecked().check(history("bob", runner_names=True, runtime_says="alice"),
                                CONFIG))
    # No word from the runner: the runtime's report of who sent it is read.
    assert "although user bob lost access to notify at t=1s" in failing(
        AccessRechecked().check(history("bob", runner_names=False), CONFIG))
    # Alice lost access, and the turn is Bob's: nothing to judge.
    passing(AccessRechecked().check(history("alice", runner_names=True), CONFIG))


def test_access_the_user_is_the_one_the_session_named_before_the_delivery() -> None:
    """The session's user (named by its message) decides whose revocation counts, not the
    only user the run revoked; a user named only after the delivery does not count."""
    def history(user: str | None) -> History:
        h = History()
        ev(h, "op.message", 0, {"message_id": "m1", **({"user": user} if user else {})},
           type="invoke", session="s1")
        _deploy(h, 0, "dep1", "v1")
        ob(h, "tool.awaiting", 10, "aw1", {"tool": "send_email"}, session="s1", turn="T1",
           tool_call="tc1")
        ob(h, "tool.handoff", 310, "ho1", session="s1", turn="T1", tool_call="tc1")
        ev(h, "identity.revoked", 2000, {"user": "u1", "tool": "send_email"})
        ev(h, "effect.delivered", 3000, {"effect": "email", "logical": "tc1"}, key="k1",
           tool_call="tc1")
        ev(h, "message.received", 3100, {"message": "s1.m1", "user": "u2"}, session="s1")
        return h

    passing(AccessRechecked().check(history("u2"), CONFIG))
    # Without a user named before it, the delivery is judged for the only user revoked.
    assert "user u1 lost access" in failing(AccessRechecked().check(history(None), CONFIG))


def test_access_regranted_before_the_rerun_passes() -> None:
    h = History()
    _access_world(h)
    ev(h, "identity.revoked", 2000, {"user": "u1", "tool": "send_email"})
    ev(h, "identity.granted", 2500, {"user": "u1", "tool": "send_email"})
    ob(h, "tool.rerun", 3000, "rr1", {"access": "granted"}, session="s1", turn="T1",
       tool_call="tc1", deployment="dep2")
    ev(h, "effect.delivered", 3001, {"effect": "email", "logical": "tc1"}, key="k1",
       session="s1", turn="T1", tool_call="tc1")
    passing(AccessRechecked().check(h, CONFIG))


def test_access_rerun_without_deployment_is_unknown() -> None:
    h = History()
    _access_world(h)
    ob(h, "tool.rerun", 3000, "rr1", {"access": "granted"}, session="s1", turn="T1",
       tool_call="tc1")
    result = AccessRechecked().check(h, CONFIG)
    assert result.valid is None and "cannot be judged" in result.note


def test_access_placed_by_the_version_the_rerun_reports() -> None:
    h = History()
    _access_world(h)
    ev(h, "op.answer", 2000, {"decision": "approve"}, type="invoke", tool_call="tc1")
    # A release lands while the answer is on its way: either latest since the answer is fine.
    _deploy(h, 2001, "dep3", "v3", prev="dep2")
    ob(h, "tool.rerun", 2002, "rr1", {"access": "granted", "version": "v2", "user": "u1"},
       session="s1", turn="T1", tool_call="tc1")
    passing(AccessRechecked().check(h, CONFIG))
    h2 = History()
    _access_world(h2)
    ev(h2, "op.answer", 2000, {"decision": "approve"}, type="invoke", tool_call="tc1")
    ob(h2, "tool.rerun", 2002, "rr1", {"access": "granted", "version": "v1", "user": "u1"},
       session="s1", turn="T1", tool_call="tc1")
    witness = failing(AccessRechecked().check(h2, CONFIG))
    assert "tool call tc1 re-ran on version v1" in witness and "dep2 (v2)" in witness


def test_access_revoked_for_every_tool_counts() -> None:
    h = History()
    _access_world(h)
    ev(h, "identity.revoked", 2000, {"user": "u1", "tool": "*"})
    ob(h, "tool.rerun", 3000, "rr1", {"access": "granted", "version": "v2", "user": "u1"},
       session="s1", turn="T1", tool_call="tc1")
    witness = failing(AccessRechecked().check(h, CONFIG))
    assert "user u1 lost access to send_email" in witness


def test_access_not_reached_without_reruns() -> None:
    h = History()
    _access_world(h)
    result = AccessRechecked().check(h, CONFIG)
    passing(result)
    assert not result.reached


# ---------------------------------------------------------------- conservative-recovery


def _intent(h: History, t: float = 10.0, invocation: str | None = "inv3") -> Record:
    _assign(h, 0, 1, "h1", "a1")
    return ob(h, "tool.intent", t, "i1", {"tool": "send_email"}, session="s1", turn="T1",
              tool_call="tc1", invocation=invocation)


def _attempt(h: History, t: float, key: str) -> Record:
    return ev(h, "effect.attempted", t, {"effect": "email", "logical": "tc1"}, key=key,
              session="s1", turn="T1", tool_call="tc1")


def test_recovery_held_turn_and_same_key_retry_pass() -> None:
    h = History()
    _intent(h)
    _attempt(h, 11, "k1")
    _assign(h, 100, 2, "h2", "a2")
    _assign(h, 100, 2, "h2", "a2")
    _attempt(h, 101, "k1")  # the request already in flight, re-sent under its key
    ob(h, "turn.held", 102, "held1", session="s1", turn="T1", tool_call="tc1")
    ob(h, "turn.held", 102, "held1", session="s1", turn="T1", tool_call="tc1")
    ev(h, "op.answer", 500, {"decision": "confirm"}, type="invoke", tool_call="tc1")
    _attempt(h, 501, "k1")
    ev(h, "run.end", HOUR)
    result = ConservativeRecovery().check(h, CONFIG)
    passing(result)
    assert result.reached and result.stats["held"] == 1


def test_recovery_new_key_after_move_is_a_violation() -> None:
    h = History()
    intent = _intent(h)
    _attempt(h, 11, "k1")
    move = _assign(h, 100, 2, "h2", "a2")
    again = _attempt(h, 101, "k2")
    ob(h, "turn.held", 102, "held1", session="s1", turn="T1", tool_call="tc1")
    result = ConservativeRecovery().check(h, CONFIG)
    witness = failing(result)
    assert "tool call tc1 was executed again with a new idempotency key k2" in witness
    assert result.violations[0].records == (intent.index, move.index, again.index)


def test_recovery_an_attempt_under_another_key_than_the_intent_recorded_is_a_violation(
) -> None:
    h = History()
    _assign(h, 0, 1, "h1", "a1")
    ob(h, "tool.intent", 10, "i1", {"tool": "charge_card"}, session="s1", turn="T1",
       tool_call="tc1", invocation="inv3", key="email:tc1")
    wrong = _attempt(h, 11, "charge:tc1")
    _attempt(h, 12, "charge:tc1")  # reported once per intent
    ev(h, "run.end", HOUR)
    result = ConservativeRecovery().check(h, CONFIG)
    witness = failing(result)
    assert witness.startswith("tool call tc1 was attempted under idempotency key charge:tc1, "
                              "not the key its intent recorded (email:tc1)")
    assert len(result.violations) == 1 and wrong.index in result.violations[0].records
    # The key it recorded, or none at all: nothing to compare.
    for key in ("charge:tc1", None):
        h = History()
        _assign(h, 0, 1, "h1", "a1")
        ob(h, "tool.intent", 10, "i1", {"tool": "charge_card"}, session="s1", turn="T1",
           tool_call="tc1", invocation="inv3", key=key)
        _attempt(h, 11, "charge:tc1")
        ev(h, "run.end", HOUR)
        passing(ConservativeRecovery().check(h, CONFIG))


def test_recovery_new_owner_executing_before_the_hold_is_a_violation() -> None:
    h = History()
    _intent(h)  # epoch 1, owned by host h1
    ev(h, "host.crashed", 50, host="h1", deployment="dep1")
    ev(h, "host.restarted", 55, host="h1", deployment="dep1")
    ev(h, "attempt.started", 100, {"attempt": 2, "replay": 4}, invocation="inv3",
       deployment="dep1", host="h1")
    _attempt(h, 101, "k1")
    ob(h, "turn.held", 102, "held1", session="s1", turn="T1", tool_call="tc1")
    witness = failing(ConservativeRecovery().check(h, CONFIG))
    assert ("tool call tc1 was executed at t=101s by another executor (its host h1 crashed "
            "at t=50s) after ownership moved at t=100s") in witness


def test_recovery_new_owner_executing_while_the_old_one_is_paused() -> None:
    h = History()
    _intent(h)
    ev(h, "fault.gc-pause", 20, {"duration": 600.0}, type="info", host="h1")
    _assign(h, 100, 2, "h2", "a2")
    _attempt(h, 101, "k1")
    ev(h, "run.end", HOUR)
    witness = failing(ConservativeRecovery().check(h, CONFIG))
    assert "by another executor (its host h1 was paused)" in witness


def _own_send_after_takeover(h: History) -> None:
    """The intent's own executor (alive on h1) sends under the call's key after another handler
    took the thread, then the call's result is known: what the reference does (soak 3000006)."""
    _intent(h)
    _assign(h, 100, 2, "h2", "a2")
    _attempt(h, 101, "k1")
    ob(h, "tool.result", 102, "res1", {"outcome": "answered"}, session="s1", turn="T1",
       tool_call="tc1")
    ev(h, "run.end", HOUR)


def test_recovery_a_crash_ends_the_pause_it_interrupted() -> None:
    # Soak seed 3000006: h1 paused for 10 min, then crashed and restarted; the restarted h1
    # wrote the intent and sent the effect itself. It was running, not paused.
    h = History()
    ev(h, "host.paused", 0, {"duration": 600.0}, host="h1", deployment="dep1")
    ev(h, "fault.gc-pause", 0, {"duration": 600.0}, type="info", host="h1")
    ev(h, "host.crashed", 0, host="h1", deployment="dep1")
    ev(h, "fault.crash", 0, type="info", host="h1")
    ev(h, "host.restarted", 1, host="h1", deployment="dep1")
    _own_send_after_takeover(h)
    passing(ConservativeRecovery().check(h, CONFIG))
    # The same story with the pause after the restart: h1 was paused when the send came.
    h2 = History()
    ev(h2, "host.crashed", 0, host="h1", deployment="dep1")
    ev(h2, "host.restarted", 1, host="h1", deployment="dep1")
    ev(h2, "fault.gc-pause", 2, {"duration": 600.0}, type="info", host="h1")
    _own_send_after_takeover(h2)
    assert "by another executor (its host h1 was paused)" in failing(
        ConservativeRecovery().check(h2, CONFIG))


def test_recovery_a_pause_of_a_crashed_host_stops_nothing() -> None:
    # The runner records a gc-pause step even when its host is down (the simulator ignores
    # it): the host restarts running, and its own send is not another executor's.
    h = History()
    ev(h, "host.crashed", 0, host="h1", deployment="dep1")
    ev(h, "fault.crash", 0, type="info", host="h1")
    ev(h, "fault.gc-pause", 0, {"duration": 600.0}, type="info", host="h1")
    ev(h, "host.restarted", 1, host="h1", deployment="dep1")
    _own_send_after_takeover(h)
    passing(ConservativeRecovery().check(h, CONFIG))


def test_recovery_judged_by_invocation_when_effects_say_who_sent_them() -> None:
    h = History()
    _intent(h)  # written by inv3
    ev(h, "attempt.started", 100, {"attempt": 2, "replay": 4}, invocation="inv3",
       deployment="dep1", host="h1")
    replayed = ev(h, "effect.attempted", 101, {"effect": "email", "logical": "tc1"}, key="k1",
                  tool_call="tc1", invocation="inv3", host="h1")
    result = ConservativeRecovery().check(h, CONFIG)
    witness = failing(result)
    assert "by another executor (a new attempt of inv3, started at t=100s)" in witness
    assert replayed.index in result.violations[0].records
    # The stale first attempt, woken after the move, sending what it had started: no.
    h2 = History()
    _intent(h2)
    _assign(h2, 100, 2, "h2", "a2")
    ev(h2, "effect.attempted", 101, {"effect": "email", "logical": "tc1", "stale": True},
       key="k1", tool_call="tc1", invocation="inv3", host="h1")
    ob(h2, "turn.held", 102, "held1", session="s1", turn="T1", tool_call="tc1")
    passing(ConservativeRecovery().check(h2, CONFIG))


def test_recovery_original_executor_finishing_after_a_concurrent_takeover_is_fine() -> None:
    h = History()
    _intent(h)
    _assign(h, 15, 2, "h2", "a2")  # another handler of the session took the thread
    _attempt(h, 16, "k1")  # h1 is alive: its own send, under the call's key
    ob(h, "tool.result", 17, "res1", {"outcome": "answered"}, session="s1", turn="T1",
       tool_call="tc1")
    ev(h, "run.end", HOUR)
    result = ConservativeRecovery().check(h, CONFIG)
    passing(result)
    assert result.reached


def test_recovery_confirmed_rerun_after_a_hold_starts_a_new_intent() -> None:
    h = History()
    _intent(h)
    _assign(h, 100, 2, "h2", "a2")
    ob(h, "turn.held", 101, "held1", session="s1", turn="T1", tool_call="tc1")
    ob(h, "tool.result", 101, "res-held", {"outcome": "held"}, session="s1", turn="T1",
       tool_call="tc1")
    ev(h, "op.answer", 500, {"decision": "approve"}, type="invoke", tool_call="tc1")
    _assign(h, 501, 3, "h2", "a3")
    ob(h, "tool.intent", 502, "i1#2", {"tool": "send_email"}, session="s1", turn="T1",
       tool_call="tc1", epoch=3)
    _attempt(h, 503, "k1")
    ob(h, "tool.result", 504, "res1", {"outcome": "answered"}, session="s1", turn="T1",
       tool_call="tc1")
    ev(h, "run.end", HOUR)
    result = ConservativeRecovery().check(h, CONFIG)
    passing(result)
    assert result.stats["intents"] == 1 and result.stats["held"] == 1


def test_recovery_turn_not_held_is_a_violation() -> None:
    h = History()
    _intent(h)
    _assign(h, 100, 2, "h2", "a2")
    ev(h, "run.end", HOUR)
    witness = failing(ConservativeRecovery().check(h, CONFIG))
    assert "turn T1 was not held: tool call tc1 had an intent with no known result" in witness


def test_recovery_not_reached_when_nothing_was_in_flight() -> None:
    h = History()
    _intent(h)
    ob(h, "tool.result", 20, "res1", {"outcome": "completed"}, session="s1", turn="T1",
       tool_call="tc1")
    _assign(h, 100, 2, "h2", "a2")
    ob(h, "tool.intent", 200, "i2", {"tool": "charge"}, session="s1", turn="T2",
       tool_call="tc2")
    ob(h, "tool.awaiting", 201, "aw2", session="s1", turn="T2", tool_call="tc2")
    _assign(h, 300, 3, "h3", "a3")  # tc2 waits for a person: nothing is executing
    ev(h, "op.answer", 400, {"decision": "approve"}, type="invoke", tool_call="tc2")
    ev(h, "effect.attempted", 401, {"effect": "charge", "logical": "tc2"}, key="k2",
       session="s1", turn="T2", tool_call="tc2")
    ev(h, "run.end", HOUR)
    result = ConservativeRecovery().check(h, CONFIG)
    passing(result)
    assert not result.reached


# ---------------------------------------------------------------- liveness


def _faults_then_heal(h: History) -> None:
    ev(h, "fault.gc-pause", 0, {"duration": 60.0}, type="info", host="dep1.h1")
    ev(h, "fault.heal", 100, {"at": 100.0})


def test_liveness_everything_settles_after_heal() -> None:
    h = History()
    _faults_then_heal(h)
    ob(h, "turn.started", 50, "e1", {"message": "m1"}, session="s1", turn="T1")
    ob(h, "turn.started", 50, "e1", {"message": "m1"}, session="s1", turn="T1")
    _start(h, 50, "inv1", "dep1")
    ob(h, "turn.waiting", 400, "e2", session="s1", turn="T1", tool_call="tc1")
    ev(h, "invocation.completed", 400, type="ok", invocation="inv1", deployment="dep1")
    ev(h, "run.end", 100 + 2 * HOUR)
    result = Liveness().check(h, CONFIG)
    passing(result)
    assert result.reached and result.stats["healed_at"] == 100


def test_liveness_turn_stuck_after_heal_is_a_violation() -> None:
    h = History()
    _faults_then_heal(h)
    started = ob(h, "turn.started", 50, "e1", {"message": "m1"}, session="s1", turn="T1")
    ob(h, "message.queued", 60, "e2", {"message": "m2"}, session="s1")
    ev(h, "run.end", 100 + 2 * HOUR)
    result = Liveness().check(h, CONFIG)
    witness = failing(result)
    assert "session s1 was still busy" in witness
    assert "turn T1 in progress since t=50s" in witness
    assert "message m2 queued since t=60s without its turn" in witness
    assert started.index in result.violations[0].records


def test_liveness_invocation_queued_behind_a_held_key_is_a_violation() -> None:
    h = History()
    _faults_then_heal(h)
    _start(h, 10, "inv1", "dep1")
    ev(h, "invocation.suspended", 20, invocation="inv1", deployment="dep1")
    ev(h, "invocation.created", 30, {"target": "Controller/onMessage", "key": "s1"},
       invocation="inv2")
    ev(h, "run.end", 100 + 2 * HOUR)
    witness = failing(Liveness().check(h, CONFIG))
    assert "invocation inv2 Controller/onMessage never completed: queued since t=30s " \
        "behind inv1, which holds key s1" in witness
    # The suspended holder is not itself a failure: what queues behind its key is.
    assert "invocation inv1" not in witness.split("behind inv1")[1]


def test_liveness_witness_says_an_invocation_was_queued_then_running() -> None:
    # Taken from its queue by a host long after it was created, then running past the bound:
    # "stayed queued" alone hid that it ran.
    h = History()
    _faults_then_heal(h)
    ev(h, "invocation.created", 50, {"target": "approval_turn"}, invocation="inv1")
    ev(h, "invocation.started", 70, {"target": "approval_turn"}, invocation="inv1",
       deployment="dep2")
    ev(h, "invocation.completed", 100 + 2 * HOUR, type="ok", invocation="inv1",
       deployment="dep2")
    ev(h, "run.end", 100 + 3 * HOUR)
    witness = failing(Liveness().check(h, CONFIG))
    assert "invocation inv1 approval_turn stayed queued, then running, from t=50s" in witness


def test_liveness_slow_but_finished_turn_after_heal_is_a_violation() -> None:
    h = History()
    _faults_then_heal(h)
    ob(h, "turn.started", 50, "e1", session="s1", turn="T1")
    ob(h, "turn.ended", 100 + 90 * MIN, "e2", {"reason": "completed"}, session="s1",
       turn="T1")
    ev(h, "run.end", 100 + 3 * HOUR)
    witness = failing(Liveness().check(h, CONFIG))
    assert "session s1 stayed busy from t=50s to t=91.7m" in witness


def test_liveness_waiting_in_call_on_a_person_is_not_busy() -> None:
    h = History()
    ob(h, "turn.started", 0, "e1", session="s1", turn="T1")
    ob(h, "tool.awaiting", 5, "aw1", session="s1", turn="T1", tool_call="tc1")
    ev(h, "op.answer", 3 * DAY, {"decision": "approve"}, type="invoke", tool_call="tc1")
    ob(h, "turn.ended", 3 * DAY + 10, "e2", {"reason": "completed"}, session="s1", turn="T1")
    ev(h, "run.end", 4 * DAY)
    result = Liveness().check(h, CONFIG)
    passing(result)
    assert result.reached


def test_liveness_result_queued_behind_a_turn_waiting_on_a_person_is_fine() -> None:
    h = History()
    ob(h, "turn.started", 0, "e1", session="s1", turn="T2")
    ob(h, "turn.waiting", 300, "e2", session="s1", turn="T2", tool_call="tc2")
    # A background result of an earlier turn waits its turn in the FIFO meanwhile.
    ob(h, "message.queued", 400, "e3", {"message": "result:tc1"}, session="s1")
    ob(h, "turn.resumed", 3 * DAY, "e4", {"outcome": "answered"}, session="s1", turn="T2",
       tool_call="tc2")
    ob(h, "turn.ended", 3 * DAY + 5, "e5", {"reason": "completed"}, session="s1", turn="T2")
    ob(h, "turn.started", 3 * DAY + 5, "e6", {"message": "result:tc1"}, session="s1",
       turn="T3")
    ob(h, "turn.ended", 3 * DAY + 9, "e7", {"reason": "completed"}, session="s1", turn="T3")
    ev(h, "run.end", 4 * DAY)
    passing(Liveness().check(h, CONFIG))
    # With no turn in progress, a queued message is stuck.
    h2 = History()
    ob(h2, "message.queued", 400, "e3", {"message": "m9"}, session="s1")
    ev(h2, "run.end", 4 * DAY)
    witness = failing(Liveness().check(h2, CONFIG))
    assert "message m9 queued since t=6.7m without its turn" in witness


def test_liveness_not_reached_when_the_run_ends_before_the_bound() -> None:
    h = History()
    _faults_then_heal(h)
    ob(h, "turn.started", 50, "e1", session="s1", turn="T1")
    ev(h, "run.end", 100 + 10 * MIN)
    result = Liveness().check(h, CONFIG)
    passing(result)
    assert not result.reached


def test_liveness_not_judged_while_a_fault_never_healed() -> None:
    h = History()
    ev(h, "host.paused", 0, host="dep1.h1", deployment="dep1")
    ob(h, "turn.started", 50, "e1", session="s1", turn="T1")
    ev(h, "run.end", 10 * HOUR)
    result = Liveness().check(h, CONFIG)
    passing(result)
    assert not result.reached and "never healed" in result.note


# ---------------------------------------------------------------- scale


def test_checkers_judge_a_large_valid_history_as_valid() -> None:
    # How fast they are is measured in benchmarks/, never asserted here (shared machines).
    h = History()
    _deploy(h, 0, "dep1", "v1")
    t = 0.0
    for i in range(5000):
        t += 1.0
        s, turn, tc = f"s{i % 50}", f"T{i}", f"tc{i}"
        ob(h, "turn.started", t, f"ts{i}", {"message": f"m{i}"}, session=s, turn=turn)
        _start(h, t, f"inv{i}", "dep1", key=s)
        # `notify`: an email tool that needs no approval, so `completed` without a card is valid.
        ob(h, "tool.intent", t, f"in{i}", {"tool": "notify"}, session=s, turn=turn,
           tool_call=tc)
        ev(h, "effect.attempted", t, {"effect": "email", "logical": tc}, key=f"k{i}",
           session=s, turn=turn, tool_call=tc)
        ev(h, "effect.delivered", t, {"effect": "email", "logical": tc}, key=f"k{i}",
           session=s, turn=turn, tool_call=tc)
        ob(h, "tool.result", t, f"re{i}", {"outcome": "completed"}, session=s, turn=turn,
           tool_call=tc)
        ev(h, "invocation.completed", t, type="ok", invocation=f"inv{i}", deployment="dep1")
        ob(h, "turn.ended", t, f"te{i}", {"reason": "completed"}, session=s, turn=turn)
    ev(h, "run.end", t + 2 * HOUR)
    results = run_checkers(ALL, h, CONFIG)
    assert [r.valid for r in results] == [True] * len(ALL), [r.witness() for r in results]


# ---------------------------------------------------------------- fault windows


def test_service_faults_and_clock_jumps_are_fault_windows() -> None:
    """A call the world held (slow, timed out) and a clock jump are time the runtime did not
    have; a service fault that struck after the schedule's heal ends the faults later."""
    from harness.checkers._common import Faults

    h = History()
    ev(h, "fault.service-fault", 0, {"service": "email", "fault": "slow"}, type="info")
    ev(h, "fault.heal", 0, {"at": 0.0})
    ev(h, "service.fault", 100, {"service": "email", "fault": "slow", "duration": 60.0})
    ev(h, "fault.clock-jump", 500, {"duration": 3600.0}, type="info")
    ev(h, "service.fault", 5000, {"service": "payments", "fault": "500_after"})
    faults = Faults()
    for r in h.records:
        faults.feed(r)
    assert faults.held() == [(100.0, 160.0), (500.0, 4100.0)]
    assert faults.last_end == 5000.0


def test_answer_fate_a_refusal_as_ended_after_a_cancel_of_the_running_turn_is_true() -> None:
    """A cancel stops the turn at its next step; while it still waits in the call (before the
    hand-off) an answer is refused as ended, and that reason is true."""
    from harness.checkers import AnswerFate

    for cancelled in (True, False):
        h = History()
        ob(h, "turn.started", 0, "e1", {"message": "m1"}, session="s1", turn="T1")
        ob(h, "tool.awaiting", 2, "e2", session="s1", turn="T1", tool_call="tc1")
        if cancelled:
            ev(h, "op.cancel", 60, type="invoke", session="s1")
            ev(h, "op.cancel", 60, type="ok", session="s1")
        ev(h, "op.answer", 120, {"decision": "approve"}, type="invoke", session="s1",
           turn="T1", tool_call="tc1")
        ob(h, "answer.refused", 120, "e3", {"reason": "ended", "decision": "approve"},
           session="s1", turn="T1", tool_call="tc1")
        ev(h, "op.answer", 120, type="ok", session="s1", turn="T1", tool_call="tc1")
        ev(h, "run.end", 3 * HOUR)
        result = AnswerFate().check(h, CONFIG)
        if cancelled:
            passing(result)
        else:
            assert "as ended, which the call never was" in failing(result)


def test_answer_fate_an_answered_call_was_not_ended_though_its_turn_was() -> None:
    """A new message ends the turn while the person's approval runs; the approval wins the
    call (answered). A later answer refused as ended names a fate the call never had: it was
    already decided. Refused as ended before the approval's result, or for a call held when
    its turn ended, the reason stays true."""
    from harness.checkers import AnswerFate

    def history(reason: str, answered_first: bool, held: bool = False) -> History:
        h = History()
        ob(h, "turn.started", 0, "e1", {"message": "m1"}, session="s1", turn="T1")
        ob(h, "tool.awaiting", 2, "e2", session="s1", turn="T1", tool_call="tc1")
        ob(h, "tool.handoff", 302, "e3", session="s1", turn="T1", tool_call="tc1")
        ev(h, "op.answer", 600, {"decision": "approve"}, type="invoke", session="s1",
           turn="T1", tool_call="tc1")
        ev(h, "op.answer", 600, type="ok", session="s1", turn="T1", tool_call="tc1")
        ob(h, "turn.ended", 600, "e4", {"reason": "steered"}, session="s1", turn="T1")
        outcome = "held" if held else "answered"
        if answered_first:
            ob(h, "tool.result", 601, "e5", {"outcome": outcome}, session="s1", turn="T1",
               tool_call="tc1")
        ev(h, "op.answer", 660, {"decision": "approve"}, type="invoke", session="s1",
           turn="T1", tool_call="tc1")
        ob(h, "answer.refused", 660, "e6", {"reason": reason, "decision": "approve"},
           session="s1", turn="T1", tool_call="tc1")
        ev(h, "op.answer", 660, type="ok", session="s1", turn="T1", tool_call="tc1")
        if not answered_first:
            ob(h, "tool.result", 661, "e5", {"outcome": outcome}, session="s1", turn="T1",
               tool_call="tc1")
        ev(h, "run.end", 3 * HOUR)
        return h

    assert "refused at t=11.0m as ended, which the call never was: it answered" in failing(
        AnswerFate().check(history("ended", answered_first=True), CONFIG))
    passing(AnswerFate().check(history("already_decided", answered_first=True), CONFIG))
    passing(AnswerFate().check(history("ended", answered_first=False), CONFIG))
    passing(AnswerFate().check(history("ended", answered_first=True, held=True), CONFIG))
