"""End-to-end stories of the reference implementation on the simulator.

Each story drives the runtime the way a person and an operator would (messages, answers,
redeploys, faults) and asserts both the outcome and the recorded events, the events being
what the harness's checkers read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import refimpl_world
from refimpl_world import AppBuilder, RefWorld

from contract.ports import EVENTS, Config
from harness.checkers import ALL, CheckConfig, run_checkers
from harness.history import Record
from harness.sim import Simulator
from harness.sim.engine import FaultAction
from harness.sim.model import Host
from reference_impl.app import build_app
from reference_impl.naive import build_naive_app

MIN, HOUR, DAY = 60.0, 3600.0, 86400.0
HAND_OFF = Config().hand_off_after
MAX_WAIT = Config().max_wait
_RECORD_FIELDS = ("session", "turn", "tool_call", "epoch", "key", "invocation", "deployment",
                  "host")


# --------------------------------------------------------------------------- driving

_STARTED: list[tuple[Simulator, AppBuilder]] = []


def start(build: AppBuilder, **options: Any) -> tuple[Simulator, RefWorld]:
    sim, world = refimpl_world.start(build, **options)
    _STARTED.append((sim, build))
    return sim, world


@pytest.fixture(autouse=True)
def _every_story_is_checked() -> Any:
    """After each story: every observation the runtime emitted is a kind of `EVENTS` and
    carries the fields that kind promises, and no checker of the harness finds a violation
    in a run of the reference implementation (a checker that crashes says unknown, which
    is the checker's business, not the runtime's)."""
    _STARTED.clear()
    yield
    for sim, build in _STARTED:
        if build is build_app:
            for result in run_checkers(ALL, sim.history, CheckConfig()):
                assert result.valid is not False, f"{result.checker}: {result.witness()}"
        for record in sim.history:
            if "event_id" not in record.data:
                continue  # the world's and the simulator's records
            assert record.kind in EVENTS, f"{record.describe()}: not in ports.EVENTS"
            for name in EVENTS[record.kind]:
                value = (getattr(record, name) if name in _RECORD_FIELDS
                         else record.data.get(name))
                assert value is not None, f"{record.describe()} lacks {name!r}"


def say(sim: Simulator, session: str, message_id: str, plan: list[Any], *,
        user: str = "ann", at: float | None = None) -> None:
    arg = {"message_id": message_id, "text": f"text of {message_id}", "user": user,
           "plan": plan}
    _at(sim, at, lambda: sim.invoke("Controller", "onMessage", arg, key=session))


def answer(sim: Simulator, tool_call: str, decision: str = "approve", *, user: str = "ann",
           at: float | None = None) -> None:
    arg = {"decision": decision, "user": user}
    _at(sim, at, lambda: sim.invoke("PendingToolCall", "answer", arg, key=tool_call))


def background(sim: Simulator, session: str, tool_call: str, *, at: float) -> None:
    _at(sim, at, lambda: sim.invoke("Controller", "background", {"tool_call": tool_call},
                                    key=session))


def cancel(sim: Simulator, session: str, *, at: float) -> None:
    _at(sim, at, lambda: sim.invoke("Controller", "cancel", {}, key=session))


def redeploy(sim: Simulator, world: RefWorld, build: AppBuilder, version: str, *,
             at: float) -> None:
    _at(sim, at, lambda: world.deploy(build, version))


def _at(sim: Simulator, at: float | None, action: Callable[[], object]) -> None:
    """Run `action` now, or at virtual time `at` (its result, an id, is dropped)."""
    if at is None:
        action()
        return

    def scheduled() -> None:
        action()

    sim.at(at, scheduled)


def once_at(point: str, action: FaultAction) -> Callable[[str, Host], FaultAction | None]:
    """A fault-point handler that acts the first time `point` is reached, then never."""
    fired: list[str] = []

    def handler(name: str, host: Host) -> FaultAction | None:
        if name == point and not fired:
            fired.append(host.id)
            return action
        return None

    return handler


# --------------------------------------------------------------------------- reading


def ev(sim: Simulator, kind: str, **match: Any) -> list[Record]:
    """Records of `kind` whose fields (record fields or data) match; one per event_id."""
    out: list[Record] = []
    seen: set[str] = set()
    for record in sim.history.of_kind(kind):
        values = {name: (getattr(record, name) if name in _RECORD_FIELDS
                         else record.data.get(name)) for name in match}
        if values != match:
            continue
        event_id = record.data.get("event_id")
        if event_id is not None:
            if event_id in seen:
                continue
            seen.add(event_id)
        out.append(record)
    return out


def one(sim: Simulator, kind: str, **match: Any) -> Record:
    found = ev(sim, kind, **match)
    assert len(found) == 1, f"expected one {kind} {match}, got {[r.describe() for r in found]}"
    return found[0]


def suspensions(sim: Simulator) -> list[tuple[str, float, float]]:
    """(invocation, suspended at, resumed or completed at) for every suspension."""
    since: dict[str, float] = {}
    out: list[tuple[str, float, float]] = []
    for r in sim.history:
        if r.kind == "invocation.suspended" and r.invocation:
            since[r.invocation] = r.time
        elif r.kind in ("invocation.resumed", "invocation.completed") and r.invocation in since:
            out.append((r.invocation, since.pop(r.invocation), r.time))
    out.extend((inv, t, sim.clock.now()) for inv, t in since.items())
    return out


def invocations_of(sim: Simulator, target: str) -> list[Record]:
    return [r for r in sim.history.of_kind("invocation.started") if r.data["target"] == target]


def idle(sim: Simulator, session: str) -> bool:
    state = sim.state("Controller", session)
    return not state.get("activeTurnInvocationId") and not state.get("waitingTurn") \
        and not state.get("queue")


def assert_one_turn_at_a_time(sim: Simulator, session: str) -> None:
    """The busy rule as the checker reads it: turn.started only when no turn is in progress."""
    in_progress: set[str] = set()
    for r in sim.history:
        if r.session != session:
            continue
        if r.kind == "turn.started":
            assert not in_progress, f"{r.describe()} while {in_progress} in progress"
            in_progress.add(r.turn or "")
        elif r.kind == "turn.ended":
            in_progress.discard(r.turn or "")


def card_shown_at(sim: Simulator, tool_call: str) -> float:
    return ev(sim, "tool.awaiting", tool_call=tool_call)[0].time


EMAIL = {"tool": "send_email", "args": {"to": "bob@example.com", "subject": "hi"}}


# --------------------------------------------------------------------------- stories


def test_answered_in_two_minutes_takes_the_fast_path() -> None:
    sim, world = start(build_app)
    say(sim, "s1", "m1", [EMAIL])
    sim.run(until=10)
    tc = "s1.turn1.t1"
    answer(sim, tc, at=card_shown_at(sim, tc) + 2 * MIN)
    sim.run()

    assert [r.key for r in world.deliveries("email")] == [f"email:{tc}"]
    assert one(sim, "tool.result", tool_call=tc).data["outcome"] == "answered"
    assert ev(sim, "tool.handoff") == [] and ev(sim, "turn.waiting") == []
    assert one(sim, "turn.ended", turn="s1.turn1").data["reason"] == "completed"
    assert len(invocations_of(sim, "doTurn/run")) == 1  # one invocation, no resume
    assert world.cards[tc].closed == "answered"
    assert idle(sim, "s1")


def _three_day_story(build: AppBuilder) -> tuple[Simulator, RefWorld]:
    sim, world = start(build)
    say(sim, "s1", "m1", [EMAIL])
    redeploy(sim, world, build, "v2", at=1 * DAY)
    redeploy(sim, world, build, "v3", at=2 * DAY)
    answer(sim, "s1.turn1.t1", at=3 * DAY)
    sim.run()
    return sim, world


def test_answered_after_three_days_across_two_redeploys() -> None:
    sim, world = _three_day_story(build_app)
    tc, turn = "s1.turn1.t1", "s1.turn1"
    shown = card_shown_at(sim, tc)

    handoff = one(sim, "tool.handoff", tool_call=tc)
    assert handoff.time == pytest.approx(shown + HAND_OFF)
    waiting = one(sim, "turn.waiting", tool_call=tc)
    assert waiting.turn == turn
    # The re-run happens on the newest deployment, re-resolving access there.
    rerun = one(sim, "tool.rerun", tool_call=tc)
    assert (rerun.deployment, rerun.data["access"], rerun.data["version"]) == \
        ("dep3", "granted", "v3")
    assert rerun.time == pytest.approx(3 * DAY)
    result = one(sim, "tool.result", tool_call=tc)
    assert (result.data["outcome"], result.deployment) == ("answered", "dep3")
    # The same turn resumes, in a new invocation, on the newest deployment.
    resumed = one(sim, "turn.resumed", turn=turn)
    assert resumed.data["outcome"] == "answered"
    turns = invocations_of(sim, "doTurn/run")
    assert [r.deployment for r in turns] == ["dep1", "dep3"]
    assert one(sim, "turn.ended", turn=turn).data["reason"] == "completed"
    assert ev(sim, "turn.started") == [one(sim, "turn.started", turn=turn)]
    assert [r.key for r in world.deliveries("email")] == [f"email:{tc}"]
    assert idle(sim, "s1")


def test_reference_pins_nothing_longer_than_hand_off_after() -> None:
    sim, _ = _three_day_story(build_app)
    longest = max(end - begin for _, begin, end in suspensions(sim))
    assert longest <= HAND_OFF + 1e-6
    drained = {r.deployment: r.data["after"] for r in sim.history.of_kind("deployment.drained")}
    assert set(drained) == {"dep1", "dep2"}
    assert max(drained.values()) <= HAND_OFF


def test_naive_variant_pins_its_first_deployment_for_three_days() -> None:
    sim, world = _three_day_story(build_naive_app)
    tc = "s1.turn1.t1"
    superseded = {r.deployment: r.time for r in sim.history.of_kind("deployment.superseded")}
    drained = {r.deployment: r.time for r in sim.history.of_kind("deployment.drained")}
    assert superseded == {"dep1": 1 * DAY, "dep2": 2 * DAY}
    # dep2 never ran anything; dep1 stays alive until the person answers on day 3.
    assert drained["dep2"] == 2 * DAY
    assert drained["dep1"] == pytest.approx(3 * DAY, abs=10)
    turn_inv = invocations_of(sim, "doTurn/run")
    assert [r.deployment for r in turn_inv] == ["dep1"]
    (inv,) = [r.invocation for r in turn_inv]
    longest = max(end - begin for i, begin, end in suspensions(sim) if i == inv)
    assert longest == pytest.approx(3 * DAY - card_shown_at(sim, tc), abs=1)
    # The tool ran on the old code, with no hand-off and no re-run.
    assert ev(sim, "tool.handoff") == [] and ev(sim, "tool.rerun") == []
    assert one(sim, "tool.result", tool_call=tc).deployment == "dep1"
    assert [r.key for r in world.deliveries("email")] == [f"email:{tc}"]
    # What the harness reports on this design.
    verdicts = {r.checker: r.valid for r in run_checkers(ALL, sim.history, CheckConfig())}
    assert verdicts["pinning-bound"] is False
    assert verdicts["no-duplicate-effects"] is True


def test_never_answered_expires_at_max_wait() -> None:
    sim, world = start(build_app)
    say(sim, "s1", "m1", [EMAIL])
    sim.run()
    tc, turn = "s1.turn1.t1", "s1.turn1"
    result = one(sim, "tool.result", tool_call=tc)
    assert result.data["outcome"] == "expired"
    assert result.time == pytest.approx(card_shown_at(sim, tc) + MAX_WAIT)
    assert one(sim, "tool.finished", tool_call=tc).data["outcome"] == "expired"
    assert one(sim, "turn.resumed", turn=turn).data["outcome"] == "expired"
    assert one(sim, "turn.ended", turn=turn).data["reason"] == "completed"
    assert world.deliveries("email") == []
    assert world.cards[tc].closed == "expired"
    assert idle(sim, "s1")


def test_new_message_ends_the_waiting_turn_like_a_steer() -> None:
    sim, world = start(build_app)
    say(sim, "s1", "m1", [EMAIL])
    say(sim, "s1", "m2", [], at=1 * HOUR)
    answer(sim, "s1.turn1.t1", at=2 * HOUR)  # too late: the turn already ended
    sim.run()
    tc = "s1.turn1.t1"

    assert one(sim, "tool.result", tool_call=tc).data["outcome"] == "ended_by_message"
    ended = one(sim, "turn.ended", turn="s1.turn1")
    assert (ended.data["reason"], ended.time) == ("steered", 1 * HOUR)
    started = one(sim, "turn.started", turn="s1.turn2")
    assert started.data["message"] == "m2" and started.index > ended.index
    assert one(sim, "turn.ended", turn="s1.turn2").data["reason"] == "completed"
    assert ev(sim, "message.queued") == []
    assert ev(sim, "turn.resumed") == []
    assert world.deliveries("email") == []
    assert world.cards[tc].closed == "ended_by_message"
    assert sim.state("PendingToolCall", tc)["row"]["phase"] == "ended"
    assert_one_turn_at_a_time(sim, "s1")
    # The log holds the old turn's tool result before the new message.
    kinds = [(e.kind, e.payload.get("tool_call") or e.payload.get("turn"))
             for e in world.log("s1")]
    assert kinds.index(("tool_result", tc)) < kinds.index(("user", "s1.turn2"))
    assert idle(sim, "s1")


def test_messages_during_an_active_turn_queue_in_order() -> None:
    sim, _ = start(build_app)
    say(sim, "s1", "m1", ["lookup", "lookup"])
    say(sim, "s1", "m2", ["lookup"], at=1)
    say(sim, "s1", "m3", [], at=2)
    sim.run()

    assert [r.data["message"] for r in ev(sim, "message.queued")] == ["m2", "m3"]
    started = ev(sim, "turn.started")
    assert [(r.turn, r.data["message"]) for r in started] == \
        [("s1.turn1", "m1"), ("s1.turn2", "m2"), ("s1.turn3", "m3")]
    ended = {r.turn: r for r in ev(sim, "turn.ended")}
    assert all(r.data["reason"] == "completed" for r in ended.values())
    assert started[1].time >= ended["s1.turn1"].time
    assert started[2].time >= ended["s1.turn2"].time
    assert_one_turn_at_a_time(sim, "s1")
    assert idle(sim, "s1")


def test_message_queued_during_active_turn_ends_it_once_it_waits() -> None:
    sim, world = start(build_app)
    say(sim, "s1", "m1", ["lookup", EMAIL])
    say(sim, "s1", "m2", [], at=1)
    sim.run()
    assert [r.data["message"] for r in ev(sim, "message.queued")] == ["m2"]
    ended = one(sim, "turn.ended", turn="s1.turn1")
    assert ended.data["reason"] == "steered"
    # It waited its 5 in-call minutes, then the hand-off made it a waiting turn.
    assert ended.time == pytest.approx(card_shown_at(sim, "s1.turn1.t2") + HAND_OFF)
    assert one(sim, "turn.started", turn="s1.turn2").data["message"] == "m2"
    assert world.deliveries("email") == []
    assert_one_turn_at_a_time(sim, "s1")


def test_background_before_hand_off() -> None:
    sim, world = start(build_app)
    say(sim, "s1", "m1", [EMAIL])
    sim.run(until=10)
    tc = "s1.turn1.t1"
    background(sim, "s1", tc, at=card_shown_at(sim, tc) + MIN)
    answer(sim, tc, at=1 * DAY)
    sim.run()

    assert one(sim, "tool.background", tool_call=tc).data["phase"] == "live"
    results = {r.data["outcome"]: r for r in ev(sim, "tool.result", tool_call=tc)}
    assert set(results) == {"background", "answered"}
    assert results["answered"].data["background"] is True
    first = one(sim, "turn.ended", turn="s1.turn1")
    assert first.data["reason"] == "completed" and first.time < HAND_OFF
    assert ev(sim, "turn.waiting") == [] and ev(sim, "tool.handoff") == []
    # The real result arrives through toolFinished and becomes a new message.
    finished = one(sim, "tool.finished", tool_call=tc)
    assert (finished.data["outcome"], finished.data["background"]) == ("answered", True)
    second = one(sim, "turn.started", turn="s1.turn2")
    assert second.data["message"] == f"result:{tc}:answered"
    assert second.time == pytest.approx(1 * DAY, abs=5)
    assert one(sim, "turn.ended", turn="s1.turn2").data["reason"] == "completed"
    assert [r.key for r in world.deliveries("email")] == [f"email:{tc}"]
    assert world.cards[tc].closed == "answered"
    assert idle(sim, "s1")


def test_background_after_hand_off() -> None:
    sim, world = start(build_app)
    say(sim, "s1", "m1", [EMAIL])
    background(sim, "s1", "s1.turn1.t1", at=1 * HOUR)
    answer(sim, "s1.turn1.t1", at=1 * DAY)
    sim.run()
    tc, turn = "s1.turn1.t1", "s1.turn1"

    one(sim, "turn.waiting", tool_call=tc)
    assert one(sim, "tool.background", tool_call=tc).data["phase"] == "waiting"
    # The controller flips the waiting entry and resumes the same turn with a placeholder.
    resumed = one(sim, "turn.resumed", turn=turn)
    assert (resumed.data["outcome"], resumed.time) == ("background", 1 * HOUR)
    assert one(sim, "turn.ended", turn=turn).data["reason"] == "completed"
    outcomes = [r.data["outcome"] for r in ev(sim, "tool.finished", tool_call=tc)]
    assert outcomes == ["background", "answered"]
    assert one(sim, "turn.started", turn="s1.turn2").data["message"] == f"result:{tc}:answered"
    assert [r.key for r in world.deliveries("email")] == [f"email:{tc}"]
    assert_one_turn_at_a_time(sim, "s1")
    assert idle(sim, "s1")


def test_access_revoked_during_the_wait_rejects_the_rerun() -> None:
    sim, world = start(build_app)
    say(sim, "s1", "m1", [EMAIL])
    sim.at(1 * DAY, lambda: world.revoke("ann", "send_email"))
    answer(sim, "s1.turn1.t1", at=2 * DAY)
    sim.run()
    tc = "s1.turn1.t1"

    rerun = one(sim, "tool.rerun", tool_call=tc)
    assert (rerun.data["access"], rerun.data["user"]) == ("denied", "ann")
    assert one(sim, "tool.result", tool_call=tc).data["outcome"] == "rejected_access"
    assert one(sim, "turn.resumed", turn="s1.turn1").data["outcome"] == "rejected_access"
    assert one(sim, "turn.ended", turn="s1.turn1").data["reason"] == "completed"
    assert world.deliveries("email") == []
    assert ev(sim, "tool.intent") == []


def test_paused_owner_cannot_append_after_the_thread_moved() -> None:
    sim, world = start(build_app, hosts=2, seed=3)
    sim.on_fault_point = once_at("threadlog.append.before_lock", ("pause", 600.0))
    say(sim, "s1", "m1", ["lookup"])
    sim.run()

    assigned = ev(sim, "threadlog.assigned", session="s1")
    first, second = assigned[0], assigned[1]
    assert (first.epoch, second.epoch) == (1, 2) and first.host != second.host
    assert one(sim, "attempt.abandoned").host == first.host
    rejected = one(sim, "threadlog.rejected", session="s1")
    assert (rejected.epoch, rejected.host, rejected.data["reason"]) == \
        (1, first.host, "StaleEpoch")
    assert rejected.time >= 600 and rejected.data.get("stale") is True
    # Nothing of the stale owner landed: every committed entry carries epoch 2.
    entries = world.log("s1")
    assert entries and {e.epoch for e in entries} == {2}
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
    appended = ev(sim, "threadlog.appended", session="s1")
    assert {r.epoch for r in appended} == {2}
    assert one(sim, "turn.ended", turn="s1.turn1").data["reason"] == "completed"
    assert idle(sim, "s1")


def test_crash_after_email_sent_before_journal_delivers_once() -> None:
    """The replay cannot tell "crashed after the send" from "crashed before it": the turn is
    held, the person confirms, and the confirmed send carries the same message id."""
    sim, world = start(build_app)
    sim.on_fault_point = once_at("effect.email.after_send", ("crash", None))
    say(sim, "s1", "m1", [{"tool": "notify", "args": {"to": "bob"}}])
    sim.run(until=60)
    tc, key = "s1.turn1.t1", "email:s1.turn1.t1"

    crashed = one(sim, "host.crashed")
    held = one(sim, "turn.held", tool_call=tc)
    assert held.time > crashed.time
    assert one(sim, "tool.awaiting", tool_call=tc).data["mode"] == "confirm"
    answer(sim, tc, at=120)  # the person confirms
    sim.run()

    assert len(ev(sim, "effect.attempted", key=key)) == 2  # the confirmation reused the id
    assert len(ev(sim, "effect.deduplicated", key=key)) == 1
    assert [r.key for r in world.deliveries("email")] == [key]
    intents = ev(sim, "tool.intent", tool_call=tc)
    assert [(r.data["run"], r.key) for r in intents] == [(1, key), (2, key)]
    assert one(sim, "tool.result", tool_call=tc, outcome="answered").time >= 120
    assert one(sim, "turn.ended", turn="s1.turn1").data["reason"] == "completed"


def test_provider_500_after_billing_bills_once() -> None:
    sim, world = start(build_app)
    world.provider_faults.append("500_after_billed")
    say(sim, "s1", "m1", [])
    sim.run()
    key = "model:s1.turn1:0"

    assert [r.key for r in world.deliveries("model")] == [key]
    assert len(ev(sim, "effect.attempted", key=key)) == 2
    failed = one(sim, "attempt.failed")
    assert "ProviderError" in failed.data["error"]
    assert one(sim, "turn.ended", turn="s1.turn1").data["reason"] == "completed"


def test_intent_without_result_after_takeover_holds_the_turn() -> None:
    sim, world = start(build_app, hosts=2, seed=5)
    sim.on_fault_point = once_at("tool.after_intent", ("pause", 600.0))
    say(sim, "s1", "m1", [{"tool": "notify", "args": {"to": "bob"}}])
    sim.run(until=100)
    tc, key = "s1.turn1.t1", "email:s1.turn1.t1"

    # The new owner found the intent of the paused host with no result: held, no email.
    held = one(sim, "turn.held", tool_call=tc)
    assert held.epoch is None and held.time == pytest.approx(60, abs=5)
    assert one(sim, "tool.result", tool_call=tc, outcome="held")
    assert one(sim, "tool.awaiting", tool_call=tc).data["mode"] == "confirm"
    assert world.deliveries("email") == []

    answer(sim, tc, at=200)  # the person confirms
    sim.run()
    intents = ev(sim, "tool.intent", tool_call=tc)
    assert [(r.data["run"], r.key) for r in intents] == [(1, key), (2, key)]
    assert [r.key for r in world.deliveries("email")] == [key]
    assert one(sim, "tool.result", tool_call=tc, outcome="answered").time < 300
    assert one(sim, "turn.ended", turn="s1.turn1").data["reason"] == "completed"
    assert ev(sim, "attempt.fenced")  # the paused host woke and could not write
    assert idle(sim, "s1")


@pytest.mark.parametrize(("offset", "timed_out", "handed_off"),
                         [(-1.0, False, False), (0.0, True, False), (1.0, True, True)])
def test_answer_racing_the_hand_off_is_never_lost(
    offset: float, timed_out: bool, handed_off: bool
) -> None:
    """Offset 0: the answer arrives in the same instant as the hand-off timer, after the
    executor's timer won the race and before its startToolWait ran: startToolWait finds the
    answer and returns it in-call."""
    sim, world = start(build_app)
    say(sim, "s1", "m1", [EMAIL])
    sim.run(until=10)
    tc = "s1.turn1.t1"
    answer(sim, tc, at=card_shown_at(sim, tc) + HAND_OFF + offset)
    sim.run()

    assert one(sim, "tool.result", tool_call=tc).data["outcome"] == "answered"
    assert bool(invocations_of(sim, "PendingToolCall/startToolWait")) is timed_out
    assert bool(ev(sim, "tool.handoff")) is handed_off
    assert bool(ev(sim, "turn.resumed")) is handed_off
    assert [r.key for r in world.deliveries("email")] == [f"email:{tc}"]
    assert one(sim, "turn.ended", turn="s1.turn1").data["reason"] == "completed"
    assert idle(sim, "s1")


def test_cancel_stops_an_active_turn_between_steps() -> None:
    sim, world = start(build_app)
    say(sim, "s1", "m1", ["lookup", "lookup", "lookup"])
    cancel(sim, "s1", at=3)
    sim.run()
    ended = one(sim, "turn.ended", turn="s1.turn1")
    assert ended.data["reason"] == "cancelled"
    assert len(world.deliveries("model")) == 2  # stopped spending after the second step
    assert idle(sim, "s1") and sim.state("Controller", "s1").get("cancelledTurns") == ["s1.turn1"]


def test_cancel_ends_a_waiting_turn_and_the_queue_moves_on() -> None:
    sim, world = start(build_app)
    say(sim, "s1", "m1", [EMAIL])
    cancel(sim, "s1", at=1 * HOUR)
    answer(sim, "s1.turn1.t1", at=2 * HOUR)
    say(sim, "s1", "m2", [], at=3 * HOUR)
    sim.run()
    tc = "s1.turn1.t1"
    assert one(sim, "tool.result", tool_call=tc).data["outcome"] == "cancelled"
    assert one(sim, "turn.ended", turn="s1.turn1").data["reason"] == "cancelled"
    assert world.deliveries("email") == []
    assert one(sim, "turn.ended", turn="s1.turn2").data["reason"] == "completed"
    # The next turn wrote the cancelled result into the log before its own message.
    kinds = [e.kind for e in world.log("s1")]
    assert kinds[-4:] == ["tool_result", "user", "model", "turn_end"]


def test_same_seed_gives_the_same_history() -> None:
    def once(seed: int) -> str:
        sim, world = start(build_app, hosts=2, seed=seed)
        sim.on_fault_point = once_at("threadlog.append.before_lock", ("pause", 120.0))
        say(sim, "s1", "m1", ["lookup", EMAIL])
        say(sim, "s2", "m1", [{"tool": "charge_card", "args": {"amount": 5}}])
        say(sim, "s1", "m2", [], at=30)
        answer(sim, "s2.turn1.t1", at=2 * DAY)
        redeploy(sim, world, build_app, "v2", at=1 * DAY)
        sim.run()
        return sim.history.to_jsonl()

    assert once(11) == once(11)


def test_naive_variant_queues_a_new_message_behind_the_card() -> None:
    sim, world = start(build_naive_app)
    say(sim, "s1", "m1", [EMAIL])
    say(sim, "s1", "m2", [], at=1 * HOUR)
    answer(sim, "s1.turn1.t1", at=1 * DAY)
    sim.run()
    # Before the change a waiting turn is an active invocation: the message waits a day.
    assert [r.data["message"] for r in ev(sim, "message.queued")] == ["m2"]
    assert one(sim, "turn.ended", turn="s1.turn1").data["reason"] == "completed"
    assert one(sim, "turn.started", turn="s1.turn2").time == pytest.approx(1 * DAY, abs=10)
    assert [r.key for r in world.deliveries("email")] == ["email:s1.turn1.t1"]
    assert_one_turn_at_a_time(sim, "s1")


def test_naive_variant_expires_in_call_at_max_wait() -> None:
    sim, world = start(build_naive_app)
    say(sim, "s1", "m1", [EMAIL])
    sim.run()
    tc = "s1.turn1.t1"
    result = one(sim, "tool.result", tool_call=tc)
    assert result.data["outcome"] == "expired"
    assert result.time == pytest.approx(card_shown_at(sim, tc) + MAX_WAIT)
    assert ev(sim, "turn.waiting") == [] and ev(sim, "turn.resumed") == []
    assert sim.state("PendingToolCall", tc)["row"]["phase"] == "ended"
    assert world.deliveries("email") == []


def test_a_new_message_during_the_rerun_the_effect_becomes_a_message() -> None:
    """The answer's re-run is under way (its intent committed) when a new message ends the
    waiting turn: the approve won the call, the email went out, its result is the call's one
    final result, and the agent learns of it as a new message instead of losing it. The
    message comes a quarter second after the answer, when the re-run has written its intent
    and its email is on the way (at one instant the simulator would draw which handler goes
    first)."""
    sim, world = start(build_app)
    say(sim, "s1", "m1", [EMAIL])
    answer(sim, "s1.turn1.t1", at=1 * HOUR)
    say(sim, "s1", "m2", [], at=1 * HOUR + 0.25)
    sim.run()
    tc = "s1.turn1.t1"
    assert one(sim, "turn.ended", turn="s1.turn1").data["reason"] == "steered"
    assert [r.key for r in world.deliveries("email")] == [f"email:{tc}"]
    finished = one(sim, "tool.finished", tool_call=tc)
    assert finished.data["outcome"] == "answered"
    assert one(sim, "turn.started", turn="s1.turn3").data["message"] == \
        f"result:{tc}:answered"
    assert ev(sim, "turn.resumed") == []
    # One final result for the call, in the log and in what the runtime reports: the
    # approved run's, whose intent was committed before the new message's turn could close
    # the call; not an "ended by new message" beside an email that went out.
    results = [(e.payload["outcome"], e.payload["background"]) for e in world.log("s1")
               if e.kind == "tool_result" and e.payload.get("tool_call") == tc]
    # Out of the transcript (the next turn had begun): it reaches the agent as turn 3.
    assert results == [("answered", True)]
    assert [r.data["outcome"] for r in ev(sim, "tool.result", tool_call=tc)] == ["answered"]
    assert_one_turn_at_a_time(sim, "s1")
    assert idle(sim, "s1")


def test_crash_after_charge_before_journal_charges_once() -> None:
    """The same after the hand-off: PendingToolCall's re-run crashes after the charge; its
    replay holds, and the person's confirmation charges with the same key (a no-op)."""
    sim, world = start(build_app)
    sim.on_fault_point = once_at("effect.charge.after_charge", ("crash", None))
    say(sim, "s1", "m1", [{"tool": "charge_card", "args": {"amount": 42}}])
    answer(sim, "s1.turn1.t1", at=1 * HOUR)  # after the hand-off: PendingToolCall runs it
    answer(sim, "s1.turn1.t1", at=2 * HOUR)  # confirms the held charge
    sim.run()
    tc, key = "s1.turn1.t1", "charge:s1.turn1.t1"
    assert one(sim, "host.crashed").time == pytest.approx(1 * HOUR, abs=1)
    assert one(sim, "turn.held", tool_call=tc).time < 2 * HOUR
    assert [r.key for r in world.deliveries("charge")] == [key]
    assert len(ev(sim, "effect.attempted", key=key)) == 2
    assert [r.data["access"] for r in ev(sim, "tool.rerun", tool_call=tc)] == \
        ["granted", "granted"]
    result = one(sim, "tool.result", tool_call=tc, outcome="answered")
    assert result.time == pytest.approx(2 * HOUR, abs=5)
    assert one(sim, "turn.resumed", turn="s1.turn1").data["outcome"] == "answered"
    assert one(sim, "turn.ended", turn="s1.turn1").data["reason"] == "completed"
    assert idle(sim, "s1")


def test_crash_after_model_call_bills_once() -> None:
    sim, world = start(build_app)
    sim.on_fault_point = once_at("effect.model.after_call", ("crash", None))
    say(sim, "s1", "m1", ["lookup"])
    sim.run()
    assert [r.key for r in world.deliveries("model")] == \
        ["model:s1.turn1:0", "model:s1.turn1:1"]
    assert len(ev(sim, "effect.attempted", key="model:s1.turn1:0")) == 2
    entries = world.log("s1")
    assert [e.kind for e in entries].count("model") == 2  # the repeated step wrote once


def test_owner_stalled_in_its_transaction_loses_the_row_and_its_commit() -> None:
    sim, world = start(build_app, hosts=2, seed=3)
    sim.on_fault_point = once_at("threadlog.append.locked", ("pause", 600.0))
    say(sim, "s1", "m1", [])
    sim.run()
    rejected = one(sim, "threadlog.rejected", session="s1")
    assert (rejected.epoch, rejected.data["reason"]) == (1, "TransactionAborted")
    assert {e.epoch for e in world.log("s1")} == {2}
    assert one(sim, "turn.ended", turn="s1.turn1").data["reason"] == "completed"


def test_background_result_waits_its_turn_behind_a_waiting_turn() -> None:
    sim, world = start(build_app)
    second = {"tool": "send_email", "args": {"to": "carol@example.com"}}
    say(sim, "s1", "m1", [EMAIL, second])
    sim.run(until=10)
    t1, t2 = "s1.turn1.t1", "s1.turn1.t2"
    background(sim, "s1", t1, at=card_shown_at(sim, t1) + MIN)
    answer(sim, t1, at=20 * MIN)  # the background call's result arrives while t2 waits
    answer(sim, t2, at=40 * MIN)
    sim.run()

    one(sim, "turn.waiting", tool_call=t2)
    queued = one(sim, "message.queued", message=f"result:{t1}:answered")
    assert queued.time == pytest.approx(20 * MIN, abs=5)
    ended = one(sim, "turn.ended", turn="s1.turn1")
    started = one(sim, "turn.started", turn="s1.turn2")
    assert ended.data["reason"] == "completed" and ended.time >= 40 * MIN
    assert started.data["message"] == f"result:{t1}:answered"
    assert started.index > ended.index
    assert sorted(r.key or "" for r in world.deliveries("email")) == \
        [f"email:{t1}", f"email:{t2}"]
    assert_one_turn_at_a_time(sim, "s1")
    assert idle(sim, "s1")


def test_background_result_landing_during_an_active_turn_moves_the_thread_safely() -> None:
    """The re-run of a background call writes its intent and result to the session's log
    while a turn of the session is running: the thread moves to the re-run's host, the
    turn's next append is fenced, and its retry takes the thread back and goes on."""
    sim, world = start(build_app)
    say(sim, "s1", "m1", [EMAIL, "lookup", "lookup"])
    sim.run(until=2.5)
    t1 = "s1.turn1.t1"
    shown = card_shown_at(sim, t1)
    background(sim, "s1", t1, at=shown + 0.75)
    answer(sim, t1, at=shown + 1.5)  # during the turn's next model call
    sim.run()

    rejected = one(sim, "threadlog.rejected", session="s1")
    assert rejected.data["reason"] == "StaleEpoch"
    assert one(sim, "turn.ended", turn="s1.turn1").data["reason"] == "completed"
    assert one(sim, "turn.started", turn="s1.turn2").data["message"] == f"result:{t1}:answered"
    # A retried model step reused its key: every completion was billed once.
    keys = [r.key for r in world.deliveries("model")]
    assert len(keys) == len(set(keys))
    assert [r.key for r in world.deliveries("email")] == [f"email:{t1}"]
    entries = world.log("s1")
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
    assert idle(sim, "s1")


def test_expiry_counts_from_when_the_card_was_shown_not_from_register() -> None:
    # A card that takes a minute to show (a slow UI, or the real engine's latency between
    # the waiting row and the card): the handed-off wait still lasts max_wait from the card.
    sim, world = start(build_app)
    show = world.show_card

    async def slow_show(**card: Any) -> None:
        await sim.io(60.0)
        await show(**card)

    world.show_card = slow_show  # type: ignore[method-assign]
    say(sim, "s1", "m1", [EMAIL])
    sim.run()
    tc = "s1.turn1.t1"
    result = one(sim, "tool.result", tool_call=tc)
    assert result.data["outcome"] == "expired"
    shown = card_shown_at(sim, tc)
    assert shown >= 60.0
    assert result.time >= shown + MAX_WAIT


def test_an_answer_not_applied_is_refused_with_its_reason() -> None:
    """Every answer is applied or refused, never dropped: a deny after the approve won the
    call is refused as already decided, and an approve after the call expired as expired."""
    sim, world = start(build_app)
    say(sim, "s1", "m1", [EMAIL, EMAIL])
    answer(sim, "s1.turn1.t1", at=1 * HOUR)
    answer(sim, "s1.turn1.t1", "deny", at=1 * HOUR + 10)
    answer(sim, "s1.turn1.t2", at=MAX_WAIT + 2 * DAY)  # t2's card expired on day 8
    sim.run()
    assert one(sim, "tool.result", tool_call="s1.turn1.t1").data["outcome"] == "answered"
    late_deny = one(sim, "answer.refused", tool_call="s1.turn1.t1")
    assert (late_deny.data["reason"], late_deny.data["decision"]) == ("already_decided", "deny")
    assert one(sim, "tool.result", tool_call="s1.turn1.t2").data["outcome"] == "expired"
    late_approve = one(sim, "answer.refused", tool_call="s1.turn1.t2")
    assert (late_approve.data["reason"], late_approve.data["decision"]) == ("expired", "approve")
    assert [r.key for r in world.deliveries("email")] == ["email:s1.turn1.t1"]
    assert idle(sim, "s1")
