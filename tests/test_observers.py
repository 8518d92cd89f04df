"""Engine observers: what changes between two reads of an engine becomes the checkers' records.

The engine here is a scripted sequence of snapshots (the plain values an engine module's
`snapshot()` returns); the real engines are in tests/test_observers_restate.py and the example
tests. What is pinned: the records, their order and fields, and that the checkers judge them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.checkers.base import CheckConfig
from harness.checkers.liveness import Liveness
from harness.checkers.pinning import PinningBound
from harness.components.net import wait_until
from harness.components.procs import ProcessGroup
from harness.history import History
from harness.observers import (
    DeploymentState,
    EngineObserver,
    InvocationState,
    Snapshot,
    WorkerHosts,
)
from harness.observers.hosts import turn_of_delivery
from harness.world import World

V1 = DeploymentState("dep1", "v1", current=True)
V1_OLD = DeploymentState("dep1", "v1")
V2 = DeploymentState("dep2", "v2", current=True)


class Scripted(EngineObserver):
    """An engine that answers each read with the next scripted snapshot (or raises it)."""

    def __init__(self, history: History, script: list[Snapshot | Exception], **kw: object
                 ) -> None:
        super().__init__(history, **kw)  # type: ignore[arg-type]
        self._script: Iterator[Snapshot | Exception] = iter(script)

    def snapshot(self) -> Snapshot:
        step = next(self._script)
        if isinstance(step, Exception):
            raise step
        return step


def run(script: list[tuple[float, Snapshot | Exception]], **kw: object) -> History:
    """Poll once per scripted snapshot, at its time."""
    clock = [0.0]
    history = History(lambda: clock[0])
    observer = Scripted(history, [s for _, s in script], **kw)
    for at, _ in script:
        clock[0] = at
        observer.poll()
    return history


def kinds(history: History) -> list[tuple[str, str | None, str | None]]:
    return [(r.kind, r.invocation, r.deployment) for r in history.records]


def inv(status: str, dep: str | None = "dep1", **kw: object) -> InvocationState:
    return InvocationState("inv1", status, dep, target="Agent/run", **kw)  # type: ignore[arg-type]


def test_an_invocations_life_is_recorded_once_per_change() -> None:
    history = run([
        (0, Snapshot((inv("pending", None),), (V1,))),
        (1, Snapshot((inv("running"),), (V1,))),
        (2, Snapshot((inv("suspended"),), (V1,))),
        (3, Snapshot((inv("suspended"),), (V1,))),  # nothing changed: nothing recorded
        (4, Snapshot((inv("running"),), (V1,))),
        (5, Snapshot((inv("completed", detail="succeeded"),), (V1,))),
    ])
    assert kinds(history) == [
        ("deployment.registered", None, "dep1"),
        ("invocation.created", "inv1", None),
        ("invocation.started", "inv1", "dep1"),
        ("invocation.suspended", "inv1", "dep1"),
        ("invocation.resumed", "inv1", "dep1"),
        ("invocation.completed", "inv1", "dep1"),
    ]
    assert [r.time for r in history.records][2:] == [1, 2, 4, 5]
    assert history.records[1].data == {"target": "Agent/run"}
    assert history.records[-1].data == {"outcome": "succeeded"}


def test_first_seen_waiting_is_started_then_suspended_and_a_move_is_a_repin() -> None:
    history = run([
        (0, Snapshot((inv("suspended"),), (V1,))),
        (1, Snapshot((inv("running", "dep2"),), (V1_OLD, V2))),
        (2, Snapshot((inv("paused", "dep2", detail="max attempts"),), (V1_OLD, V2))),
    ])
    assert [k for k, _, _ in kinds(history)] == [
        "deployment.registered", "invocation.created", "invocation.started",
        "invocation.suspended", "deployment.registered", "invocation.repinned",
        "invocation.resumed", "deployment.superseded", "deployment.drained",
        "invocation.paused",
    ]
    [paused] = history.of_kind("invocation.paused")
    assert paused.data == {"reason": "max attempts"}


def test_a_superseded_deployment_drains_when_its_last_invocation_completes() -> None:
    waiting = inv("suspended")
    history = run([
        (0, Snapshot((waiting,), (V1,))),
        (5, Snapshot((waiting,), (V1_OLD, V2))),
        (100, Snapshot((inv("completed"),), (V1_OLD, V2))),
    ])
    [sup] = history.of_kind("deployment.superseded")
    [drained] = history.of_kind("deployment.drained")
    assert (sup.deployment, sup.time, sup.data["pinned"]) == ("dep1", 5, 1)
    assert (drained.deployment, drained.time) == ("dep1", 100)


def test_a_version_never_made_current_is_never_superseded() -> None:
    history = run([
        (0, Snapshot((), (V1, DeploymentState("dep2", "v2")))),
        (1, Snapshot((), (V1, DeploymentState("dep2", "v2")))),
    ])
    assert history.of_kind("deployment.superseded") == []


def test_the_pinning_checker_judges_what_the_observer_recorded() -> None:
    def story(answered_at: float) -> History:
        return run([
            (0, Snapshot((inv("running"),), (V1,))),
            (2, Snapshot((inv("suspended"),), (V1,))),
            (10, Snapshot((inv("suspended"),), (V1_OLD, V2))),
            (answered_at, Snapshot((inv("completed"),), (V1_OLD, V2))),
        ])

    config = CheckConfig(hand_off_after=300, tolerance=60)
    late = PinningBound().check(story(8 * 86400), config)
    assert late.valid is False
    assert "deployment dep1 (v1) stayed pinned" in late.witness()
    assert PinningBound().check(story(120), config).valid is True


def test_turns_and_cards_are_recorded_as_observations() -> None:
    clock = [0.0]
    history = History(lambda: clock[0])
    world = World(history, now=lambda: clock[0], sleep=lambda s: asyncio.sleep(0))
    turns = {"inv1": ("s1", "s1.turn1", "s1.m1")}
    script: list[Snapshot | Exception] = [
        Snapshot((inv("running"),), (V1,)),
        Snapshot((inv("suspended"),), (V1,)),
        Snapshot((inv("completed"),), (V1,)),
    ]
    observer = Scripted(history, script, world=world,
                        turn_of=lambda i: turns.get(i.id))
    observer.poll()
    asyncio.run(world.cards.show_card(session="s1", turn="s1.turn1", tool_call="s1.turn1.t1",
                                      tool="send_email", args={}))
    clock[0] = 1
    observer.poll()
    asyncio.run(world.cards.close_card(tool_call="s1.turn1.t1", outcome="answered"))
    clock[0] = 2
    observer.poll()
    observed = [(r.kind, r.time, r.data.get("event_id")) for r in history.records
                if r.kind.startswith(("turn.", "tool."))]
    # The cards are recorded when the world shows and closes them, not at the next poll.
    assert observed == [
        ("turn.started", 0, "s1.turn1.started"),
        ("tool.awaiting", 0, "s1.turn1.t1.awaiting"),
        ("tool.result", 1, "s1.turn1.t1.result"),
        ("turn.ended", 2, "s1.turn1.ended"),
    ]
    [result] = history.of_kind("tool.result")
    assert (result.session, result.turn, result.tool_call, result.data["outcome"]) == (
        "s1", "s1.turn1", "s1.turn1.t1", "answered")
    [ended] = history.of_kind("turn.ended")
    assert ended.data["reason"] == "completed"
    # A session whose turn ended is idle: liveness has nothing to say.
    assert Liveness().check(history, CheckConfig(liveness_bound=1)).valid is not False


def test_a_failed_read_records_nothing_and_says_why() -> None:
    clock = [0.0]
    history = History(lambda: clock[0])
    observer = Scripted(history, [ConnectionError("engine restarting"),
                                  Snapshot((inv("running"),), (V1,))])
    assert observer.poll() is False
    assert observer.last_error is not None and "engine restarting" in observer.last_error
    assert len(history) == 0
    assert observer.poll() is True
    assert observer.last_error is None
    assert observer.deployment_of("inv1") == "dep1"
    assert observer.pinned_to("dep1") == ["inv1"]
    assert observer.current() == "dep1"


def test_the_thread_polls_until_stopped() -> None:
    history = History()
    script: list[Snapshot | Exception] = [Snapshot((), (V1,))] * 1000
    with Scripted(history, script, interval=0.01) as observer:
        assert observer.wait_polls(3, timeout=30)
    polls = observer.polls
    assert not any(t.name == "Scripted" for t in threading.enumerate())
    assert observer.polls == polls
    assert [r.kind for r in history.records] == ["deployment.registered"]


@pytest.mark.parametrize(("turn", "tool_call", "expected"), [
    ("s1.turn2", None, "s1.turn2"),
    (None, "s1.turn1.t3", "s1.turn1"),
    (None, "session.two.turn4.t1", "session.two.turn4"),
    (None, None, None),
])
def test_a_delivery_names_its_turn(turn: str | None, tool_call: str | None,
                                   expected: str | None) -> None:
    history = History()
    record = history.add("effect.delivered", turn=turn, tool_call=tool_call)
    assert turn_of_delivery(record) == expected


class _Pinned(Scripted):
    def __init__(self, history: History) -> None:
        super().__init__(history, [Snapshot((inv("running"),), (V1,))] * 100)
        self.poll()


def test_worker_hosts_crash_restart_pause_and_fault_points(tmp_path: Path) -> None:
    clock = [0.0]
    history = History(lambda: clock[0])

    def sleeper(dep: str) -> ProcessGroup:
        return ProcessGroup(["sleep", "600"], name=f"sleep-{dep}", log_dir=tmp_path)

    hosts = WorkerHosts(history, now=lambda: clock[0], start=sleeper, downtime=30,
                        observer=_Pinned(history))
    try:
        first = hosts.add("dep1")
        assert (first, hosts.select("owner"), hosts.select("latest/1")) == ("dep1/w1",) * 3
        old = hosts.hosts[first][1]
        hosts.crash(first)
        assert not old.alive
        clock[0] = 29
        hosts.tick()
        assert history.of_kind("host.restarted") == []
        clock[0] = 30
        hosts.tick()
        [restarted] = history.of_kind("host.restarted")
        assert (restarted.host, restarted.deployment) == (first, "dep1")
        assert hosts.hosts[first][1].alive and hosts.hosts[first][1].pid != old.pid

        hosts.pause(first, 10)
        assert hosts.hosts[first][1].paused
        clock[0] = 40
        hosts.tick()
        assert not hosts.hosts[first][1].paused
        assert [r.kind for r in history.records if r.host == first] == [
            "host.crashed", "host.restarted", "host.paused", "host.resumed"]

        # An email of tool call inv1.t1 (turn inv1, on dep1) reaches the armed point: the
        # host running it dies before it hears back, and is restarted like any crash.
        hosts.arm("effect.email.after_send", "crash", 0, 1)
        running = hosts.hosts[first][1]
        history.add("effect.delivered", tool_call="inv1.t1", key="k1", data={"effect": "email"})
        [reached] = history.of_kind("faultpoint.reached")
        assert (reached.host, reached.data["point"]) == (first, "effect.email.after_send")
        assert not running.alive
        history.add("effect.delivered", tool_call="inv1.t1", key="k2", data={"effect": "email"})
        assert len(history.of_kind("faultpoint.reached")) == 1  # armed once, fired once
        with pytest.raises(ValueError, match="unknown fault point"):
            hosts.arm("effect.fax.after_send", "crash", 0, 1)
    finally:
        hosts.close()
    assert all(not group.alive for _, group in hosts.hosts.values())


def test_a_pause_ends_and_a_crash_restarts_on_time_while_the_runner_is_held(
        tmp_path: Path) -> None:
    """The runner may sit in an adapter call that cannot return while a worker is stopped (a
    DBOS client waiting on the SQLite lock the stopped worker holds): with `tick_every`, the
    hosts' own thread ends the pause and restarts the crashed worker, and nobody calls
    `tick()` here."""
    started = time.monotonic()
    history = History(lambda: time.monotonic() - started)

    def sleeper(dep: str) -> ProcessGroup:
        return ProcessGroup(["sleep", "600"], name=f"sleep-{dep}", log_dir=tmp_path)

    hosts = WorkerHosts(history, now=lambda: time.monotonic() - started, start=sleeper,
                        downtime=0.2, observer=_Pinned(history), tick_every=0.02)
    try:
        paused, crashed = hosts.add("dep1"), hosts.add("dep2")
        old = hosts.hosts[crashed][1]
        hosts.pause(paused, 0.2)
        hosts.crash(crashed)
        wait_until(lambda: (history.of_kind("host.resumed") and history.of_kind("host.restarted"))
                   or None, timeout=30, what="the hosts' own tick")
        assert not hosts.hosts[paused][1].paused
        restarted = hosts.hosts[crashed][1]
        assert restarted.alive and restarted.pid != old.pid
    finally:
        hosts.close()
    # The worker the hosts' thread restarted is stopped by close, with every other.
    assert all(not group.alive for _, group in hosts.hosts.values())


def test_a_worker_that_cannot_restart_in_the_background_fails_the_next_tick(
        tmp_path: Path) -> None:
    started = time.monotonic()
    history = History(lambda: time.monotonic() - started)
    starts = [0]

    def once(dep: str) -> ProcessGroup:
        starts[0] += 1
        if starts[0] > 1:
            raise RuntimeError("no room for another worker")
        return ProcessGroup(["sleep", "600"], name=f"sleep-{dep}", log_dir=tmp_path)

    hosts = WorkerHosts(history, now=lambda: time.monotonic() - started, start=once,
                        downtime=0.0, observer=_Pinned(history), tick_every=0.02)
    try:
        hosts.crash(hosts.add("dep1"))
        # This thread never ticks until the hosts' own thread has tried the restart, so the
        # error can only reach it through what that thread kept.
        wait_until(lambda: starts[0] > 1 or None, timeout=30, what="the restart")

        def failing_tick() -> str | None:
            try:
                hosts.tick()
            except RuntimeError as exc:
                return str(exc)
            return None

        assert wait_until(failing_tick, timeout=30, what="the tick") == "no room for another worker"
    finally:
        hosts.close()


class _Blind(Scripted):
    """An engine that has not shown the invocation yet (its first task still recording)."""

    def __init__(self, history: History) -> None:
        super().__init__(history, [Snapshot((), ())] * 100)
        self.poll()


def test_a_fault_point_fires_on_the_only_live_deployment_before_the_engine_shows_it(
        tmp_path: Path) -> None:
    history = History()

    def sleeper(dep: str) -> ProcessGroup:
        return ProcessGroup(["sleep", "600"], name=f"sleep-{dep}", log_dir=tmp_path)

    hosts = WorkerHosts(history, now=lambda: 0.0, start=sleeper, downtime=30,
                        observer=_Blind(history))
    try:
        first = hosts.add("dep1")
        hosts.arm("effect.email.after_send", "crash", 0, 1)
        running = hosts.hosts[first][1]
        history.add("effect.delivered", tool_call="inv1.t1", key="k1", data={"effect": "email"})
        # Only dep1 has a live worker: the delivery came from it, whatever the engine says yet.
        [reached] = history.of_kind("faultpoint.reached")
        assert reached.host == first and not running.alive

        # Two live deployments and an engine that says nothing: no guess, the point waits.
        hosts.tick()
        hosts.add("dep2")
        hosts.arm("effect.email.after_send", "crash", 0, 1)
        hosts.hosts[first] = ("dep1", sleeper("dep1"))
        history.add("effect.delivered", tool_call="inv2.t1", key="k2", data={"effect": "email"})
        assert len(history.of_kind("faultpoint.reached")) == 1
    finally:
        hosts.close()


class _ThreadBound(EngineObserver):
    """An engine client that only works on the thread that polls (Temporal's, on its loop)."""

    def snapshot(self) -> Snapshot:
        if threading.current_thread() is not self._thread:
            raise RuntimeError("this client belongs to the observer's thread")
        return Snapshot((inv("running"),), (V1,))


def test_refresh_from_inside_another_event_loop_reads_on_the_observers_thread() -> None:
    # A fault point fires inside the world server's request, itself inside an event loop.
    with _ThreadBound(History(), interval=60) as observer:  # no poll of its own for a minute
        async def in_a_request() -> bool:
            return observer.refresh(timeout=30)

        before = observer.polls
        assert asyncio.run(in_a_request()) is True
        assert observer.polls >= before + 2
        assert observer.last_error is None


def _world(history: History, clock: list[float]) -> World:
    return World(history, now=lambda: clock[0], sleep=lambda s: asyncio.sleep(0))


def test_a_turn_starts_when_its_handler_starts_not_when_its_message_is_queued() -> None:
    # A message queued behind a turn (a virtual object's inbox, a DBOS queue) is pending: its
    # turn has not started, so busy-rule cannot see two turns in progress.
    turns = {"inv1": ("s1", "s1.turn2", "s1.m2")}
    history = run([
        (0, Snapshot((inv("pending", None),), (V1,))),
        (5, Snapshot((inv("pending", None),), (V1,))),
        (9, Snapshot((inv("running"),), (V1,))),
        (12, Snapshot((inv("completed", detail="succeeded"),), (V1,))),
    ], turn_of=lambda i: turns.get(i.id))
    assert [(r.kind, r.time) for r in history.records if r.kind.startswith("turn.")] == [
        ("turn.started", 9), ("turn.ended", 12)]


def test_an_in_call_wait_on_a_person_counts_as_waiting_on_every_engine() -> None:
    # The engine says running (Restate before its inactivity timeout, DBOS in recv); the
    # turn has an open card: the invocation waits on a person, as Temporal reports it.
    clock = [0.0]
    history = History(lambda: clock[0])
    world = _world(history, clock)
    turns = {"inv1": ("s1", "s1.turn1", "s1.m1")}
    observer = Scripted(history, [Snapshot((inv("running"),), (V1,))] * 3, world=world,
                        turn_of=lambda i: turns.get(i.id))
    observer.poll()
    world.show_card(session="s1", turn="s1.turn1", tool_call="s1.turn1.t1", tool="send_email")
    clock[0] = 1
    observer.poll()
    world.close_card("s1.turn1.t1", "answered")
    clock[0] = 2
    observer.poll()
    assert [(r.kind, r.time) for r in history.records if r.kind.startswith("invocation.")] == [
        ("invocation.created", 0), ("invocation.started", 0), ("invocation.suspended", 1),
        ("invocation.resumed", 2)]


def test_a_card_is_recorded_before_the_answer_that_finds_it() -> None:
    # The answer step looks at the world's cards: the card's record is already there,
    # and a turn the engine had not shown started yet is read first so it starts before it.
    clock = [0.0]
    history = History(lambda: clock[0])
    world = _world(history, clock)
    turns = {"inv1": ("s1", "s1.turn1", "s1.m1")}
    observer = Scripted(history, [Snapshot((), (V1,)), Snapshot((inv("running"),), (V1,))],
                        world=world, turn_of=lambda i: turns.get(i.id))
    observer.poll()
    world.show_card(session="s1", turn="s1.turn1", tool_call="s1.turn1.t1", tool="send_email")
    assert world.cards.open_cards("s1")
    history.add("op.answer", "invoke", session="s1", tool_call="s1.turn1.t1")
    assert [r.kind for r in history.records if r.kind.startswith(("turn.", "tool.", "op."))
            ] == ["turn.started", "tool.awaiting", "op.answer"]


def test_cards_are_closed_from_the_engines_result_before_the_turn_ends() -> None:
    clock = [0.0]
    history = History(lambda: clock[0])
    world = _world(history, clock)
    turns = {"inv1": ("s1", "s1.turn1", "s1.m1")}

    def closed_by_result(turn: tuple[str, str, str], state: InvocationState) -> None:
        for card in world.cards.open_cards(turn[0]):
            world.close_card(card.tool_call, "expired" if state.detail == "expired" else "x")

    observer = Scripted(history, [Snapshot((inv("running"),), (V1,)),
                                  Snapshot((inv("completed", detail="expired"),), (V1,))],
                        world=world, turn_of=lambda i: turns.get(i.id),
                        on_turn_end=closed_by_result)
    observer.poll()
    world.show_card(session="s1", turn="s1.turn1", tool_call="s1.turn1.t1", tool="send_email")
    observer.poll()
    assert [(r.kind, r.data.get("outcome")) for r in history.records
            if r.kind in ("tool.result", "turn.ended")] == [
        ("tool.result", "expired"), ("turn.ended", None)]


def test_a_turn_that_ended_between_two_reads_ends_before_the_next_one_starts() -> None:
    # A virtual object's queued message runs once the turn before it ends; one read can show
    # both. Recorded in what order the read showed them, busy-rule would see two turns at once.
    turns = {"inv1": ("s1", "s1.turn1", "s1.m1"), "inv2": ("s1", "s1.turn2", "s1.m2")}
    first = InvocationState("inv1", "running", "dep1")
    second = InvocationState("inv2", "pending", None)
    history = run([
        (0, Snapshot((first, second), (V1,))),
        (1, Snapshot((InvocationState("inv2", "running", "dep1"),
                      InvocationState("inv1", "completed", "dep1")), (V1,))),
    ], turn_of=lambda i: turns.get(i.id))
    assert [(r.kind, r.turn) for r in history.records if r.kind.startswith("turn.")] == [
        ("turn.started", "s1.turn1"), ("turn.ended", "s1.turn1"),
        ("turn.started", "s1.turn2")]


def test_on_restate_a_message_in_a_virtual_objects_inbox_has_not_started_its_turn() -> None:
    # The false positive of before: turn.started when the invocation first appeared (its
    # message entering the inbox) put two turns in progress for a correctly queued message.
    from harness.observers import RestateObserver

    rows = [[{"id": "inv1", "target": "Agent/s1/run", "status": "suspended",
              "pinned_deployment_id": "dp_1"},
             {"id": "inv2", "target": "Agent/s1/run", "status": "pending"}],
            [{"id": "inv2", "target": "Agent/s1/run", "status": "running",
              "pinned_deployment_id": "dp_1"},
             {"id": "inv1", "target": "Agent/s1/run", "status": "completed",
              "pinned_deployment_id": "dp_1"}]]

    class Scripted(RestateObserver):
        def query(self, sql: str) -> list[dict[str, object]]:
            if "sys_deployment" in sql:
                return [{"id": "dp_1", "endpoint": "http://w1", "created_at": "1"}]
            return rows[min(self.polls, 1)]  # type: ignore[return-value]

    clock = [0.0]
    history = History(lambda: clock[0])
    turns = {"inv1": ("s1", "s1.turn1", "s1.m1"), "inv2": ("s1", "s1.turn2", "s1.m2")}
    observer = Scripted(history, admin_url="http://127.0.0.1:1",
                        turn_of=lambda i: turns.get(i.id))
    observer.poll()
    clock[0] = 5
    observer.poll()
    assert [(r.kind, r.turn, r.time) for r in history.records if r.kind.startswith("turn.")
            ] == [("turn.started", "s1.turn1", 0), ("turn.ended", "s1.turn1", 5),
                  ("turn.started", "s1.turn2", 5)]


def test_a_queued_turn_starts_when_it_runs_after_the_turn_before_ends() -> None:
    # Restate's inbox: inv2 waits (pending) behind inv1 of the same session; in one read
    # inv1 completes and inv2 runs. busy-rule must see inv1's end before inv2's start.
    turns = {"inv1": ("s1", "s1.turn1", "s1.m1"), "inv2": ("s1", "s1.turn2", "s1.m2")}

    def two(first: str, second: str) -> Snapshot:
        return Snapshot((InvocationState("inv1", first, "dep1"),  # type: ignore[arg-type]
                         InvocationState("inv2", second, "dep1")), (V1,))  # type: ignore[arg-type]

    history = run([(0, two("running", "pending")), (1, two("completed", "running")),
                   (2, two("completed", "completed"))],
                  turn_of=lambda i: turns.get(i.id))
    observed = [(r.kind, r.turn, r.time) for r in history.records if r.kind.startswith("turn.")]
    assert observed == [("turn.started", "s1.turn1", 0), ("turn.ended", "s1.turn1", 1),
                        ("turn.started", "s1.turn2", 1), ("turn.ended", "s1.turn2", 2)]


def test_settle_waits_until_every_invocation_is_done_or_waiting_two_reads_in_a_row() -> None:
    # The engine still runs the last step at the horizon (an answer's email): a run's
    # `finish` waits for it, else what it records after `run.end` is judged by nobody.
    busy = [Snapshot((inv("running"),), (V1,))] * 3
    calm = [Snapshot((inv("suspended"),), (V1,)), Snapshot((inv("completed"),), (V1,))]
    history = History(lambda: 0.0)
    observer = Scripted(history, [*busy, *calm, *calm * 50], interval=0.01)
    with observer:
        assert observer.settle(timeout=30.0) is True
        assert observer.polls >= 5  # not before the three busy reads and two calm ones
    assert history.of_kind("invocation.completed")


def test_settle_gives_up_after_its_timeout_on_an_engine_that_keeps_running() -> None:
    history = History(lambda: 0.0)
    observer = Scripted(history, [Snapshot((inv("running"),), (V1,))] * 1000, interval=0.01)
    with observer:
        assert observer.settle(timeout=0.3) is False
        assert observer.invocations()["inv1"].status == "running"
