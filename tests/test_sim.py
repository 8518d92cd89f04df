"""The simulator's rules, each pinned by a test that fails if the rule breaks."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from contract import faultpoints
from contract.binding import App, Context, Handler, HandlerRef, Service, TerminalError
from harness.clock import VirtualClock
from harness.errors import ClockError, SimulationError
from harness.sim import Simulator


class World:
    """Counts real executions of side effects (what a crash may repeat)."""

    def __init__(self) -> None:
        self.effects: list[str] = []


def make_app(world: World, version: str = "v1", *, extra_step: bool = False) -> App:
    async def workflow(ctx: Context, arg: Any) -> Any:
        await ctx.run("first", lambda: world.effects.append("first"))
        if extra_step:
            await ctx.run("inserted", lambda: None)
        await ctx.sleep(timedelta(seconds=arg.get("sleep", 10)))
        await ctx.run("second", lambda: world.effects.append("second"))
        return "done"

    async def eight_days(ctx: Context, arg: Any) -> Any:
        await ctx.sleep(timedelta(days=8))
        awk_id, fut = ctx.awakeable()
        ctx.set("awk", awk_id)
        return await fut

    async def record(ctx: Context, arg: Any) -> Any:
        log = await ctx.get("log") or []
        ctx.set("log", [*log, arg])
        await ctx.sleep(timedelta(seconds=5))
        return len(log) + 1

    async def wait_answer(ctx: Context, arg: Any) -> Any:
        awk_id, fut = ctx.awakeable()
        await ctx.run("publish", lambda: world.effects.append(awk_id))
        return await fut

    async def race(ctx: Context, arg: Any) -> Any:
        awk_id, fut = ctx.awakeable()
        await ctx.run("publish", lambda: world.effects.append(awk_id))
        return await ctx.select(answer=fut, timeout=ctx.sleep(timedelta(minutes=5)))

    async def parent(ctx: Context, arg: Any) -> Any:
        await ctx.sleep(timedelta(seconds=100))
        return await ctx.service_call(HandlerRef("Svc", "version"), None)

    async def version_of(ctx: Context, arg: Any) -> Any:
        return version

    async def sender(ctx: Context, arg: Any) -> Any:
        ctx.object_send(HandlerRef("Obj", "record"), "k", "late", send_delay=timedelta(hours=1))
        return None

    async def email(ctx: Context, arg: Any) -> Any:
        async def send() -> str:
            world.effects.append("email")
            await faultpoints.reach("effect.email.after_send")
            return "sent"

        return await ctx.run("send", send)

    async def failing(ctx: Context, arg: Any) -> Any:
        raise TerminalError("no")

    return App(version, (
        Service("Svc", (
            Handler("workflow", workflow), Handler("eight_days", eight_days),
            Handler("wait_answer", wait_answer), Handler("race", race),
            Handler("parent", parent), Handler("version", version_of),
            Handler("sender", sender), Handler("email", email), Handler("failing", failing),
        )),
        Service("Obj", (Handler("record", record),), kind="object"),
        Service("Obj8", (Handler("eight_days", eight_days),), kind="object"),
    ))


def test_replay_after_crash_does_not_rerun_completed_side_effects() -> None:
    world = World()
    sim = Simulator(seed=1)
    dep = sim.register(make_app(world))
    inv = sim.invoke("Svc", "workflow", {"sleep": 10})
    sim.run(until=5)
    assert world.effects == ["first"]
    sim.crash_host(dep.hosts[0].id)
    sim.run()
    assert world.effects == ["first", "second"]
    assert sim.invocation(inv).result == "done"
    assert any(r.kind == "attempt.started" and r.data["replay"] for r in sim.history)


def test_side_effect_in_flight_at_crash_runs_again() -> None:
    world = World()
    sim = Simulator(seed=1)
    dep = sim.register(make_app(world))
    sim.on_fault_point = lambda name, host: ("crash", None)
    inv = sim.invoke("Svc", "email")
    sim.run(until=1)
    sim.on_fault_point = None
    sim.run()
    assert world.effects == ["email", "email"]  # at-least-once
    assert sim.invocation(inv).result == "sent"
    assert dep.hosts[0].crashed is False


def test_exclusive_handlers_queue_per_key_in_order() -> None:
    sim = Simulator()
    sim.register(make_app(World()))
    ids = [sim.invoke("Obj", "record", f"m{i}", key="k") for i in range(3)]
    other = sim.invoke("Obj", "record", "x", key="other")
    sim.run()
    assert [sim.invocation(i).result for i in ids] == [1, 2, 3]
    assert sim.state("Obj", "k")["log"] == ["m0", "m1", "m2"]
    starts = {r.invocation: r.time for r in sim.history if r.kind == "invocation.started"}
    assert [starts[i] for i in ids] == [0, 5, 10]  # each waits for the previous to finish
    assert starts[other] == 0  # another key is not blocked


def test_timers_fire_in_order() -> None:
    sim = Simulator()
    sim.register(make_app(World()))
    for seconds in (30, 10, 20):
        sim.invoke("Svc", "workflow", {"sleep": seconds})
    sim.run()
    fired = [r.time for r in sim.history if r.kind == "timer.fired"]
    assert fired == sorted(fired) == [10, 20, 30]


def test_eight_day_sleep_completes_in_virtual_time() -> None:
    sim = Simulator()
    sim.register(make_app(World()))
    inv = sim.invoke("Obj8", "eight_days", key="s")
    sim.run()
    assert sim.clock.now() == 8 * 86400
    awk = sim.state("Obj8", "s")["awk"]
    sim.resolve_awakeable(awk, "approved")
    sim.run()
    assert sim.invocation(inv).result == "approved"


def test_suspended_intervals_are_recorded() -> None:
    sim = Simulator()
    sim.register(make_app(World()))
    inv = sim.invoke("Svc", "wait_answer")
    sim.run(until=3600)
    awk = sim.invocation(inv).journal[0].name
    sim.resolve_awakeable(awk, 42)
    sim.run()
    kinds = [(r.kind, r.time) for r in sim.history
             if r.invocation == inv and r.kind.startswith("invocation.")]
    assert ("invocation.suspended", 0.0) in kinds
    assert ("invocation.resumed", 3600.0) in kinds
    assert sim.invocation(inv).result == 42


def test_select_races_awakeable_and_timer() -> None:
    world = World()
    sim = Simulator()
    sim.register(make_app(world))
    fast = sim.invoke("Svc", "race")
    slow = sim.invoke("Svc", "race")
    sim.run(until=60)
    # The awakeable `fast` made (the two started at one instant, in an order the seed draws).
    awakeable = next(e.name for e in sim.invocation(fast).journal if e.kind == "awakeable")
    assert awakeable in world.effects
    sim.resolve_awakeable(awakeable, "yes")
    sim.run()
    assert sim.invocation(fast).result == ("answer", "yes")
    assert sim.invocation(slow).result == ("timeout", None)
    assert sim.invocation(slow).completed_at == 300


def test_pinned_invocation_keeps_its_deployment_and_new_calls_go_to_latest() -> None:
    sim = Simulator()
    v1 = sim.register(make_app(World(), "v1"))
    parent = sim.invoke("Svc", "parent")
    sim.run(until=50)
    v2 = sim.register(make_app(World(), "v2"))
    sim.run()
    inv = sim.invocation(parent)
    assert inv.deployment is v1  # pinned to the deployment that started it
    assert inv.result == "v2"  # a call made after the new registration goes to the latest
    drained = [r for r in sim.history if r.kind == "deployment.drained"]
    assert [(r.deployment, r.time) for r in drained] == [("dep1", 100.0)]
    assert v2.superseded_at is None


def test_delayed_send_starts_on_latest_deployment() -> None:
    sim = Simulator()
    sim.register(make_app(World(), "v1"))
    sim.invoke("Svc", "sender")
    sim.run(until=10)
    sim.register(make_app(World(), "v2"))
    sim.run()
    started = [r for r in sim.history if r.kind == "invocation.started"
               and r.data["target"] == "Obj/record"]
    assert [(r.deployment, r.time) for r in started] == [("dep2", 3600.0)]


def test_journal_mismatch_is_detected_when_replayed_against_other_code() -> None:
    world = World()
    sim = Simulator()
    sim.register(make_app(world, "v1"))
    inv = sim.invoke("Svc", "workflow", {"sleep": 100})
    sim.run(until=10)
    v2 = sim.register(make_app(world, "v2", extra_step=True))
    sim.repin(inv, v2.id)
    sim.run()
    mismatches = sim.history.of_kind("journal.mismatch")
    assert len(mismatches) == 1
    assert "inserted" in mismatches[0].data["detail"]
    assert sim.invocation(inv).status == "paused"


def test_paused_host_attempt_is_abandoned_and_stale_attempt_is_fenced() -> None:
    world = World()
    sim = Simulator(abort_timeout=60)
    dep = sim.register(make_app(world), hosts=2)
    # Pause whichever host runs the email at the point after the send.
    sim.on_fault_point = lambda name, host: ("pause", 600.0)
    inv = sim.invoke("Svc", "email")
    sim.run(until=30)
    sim.on_fault_point = None
    sim.run()
    kinds = [r.kind for r in sim.history]
    assert "attempt.abandoned" in kinds
    assert "attempt.fenced" in kinds  # the stale attempt could not write its journal entry
    assert world.effects == ["email", "email"]  # but its send outside the journal happened
    assert sim.invocation(inv).result == "sent"
    assert {r.host for r in sim.history.of_kind("attempt.started")} == {h.id for h in dep.hosts}


def test_paused_host_timers_do_not_fire_in_its_code_until_resume() -> None:
    world = World()
    sim = Simulator(abort_timeout=10_000)
    dep = sim.register(make_app(world))
    inv = sim.invoke("Svc", "workflow", {"sleep": 10})
    sim.run(until=1)
    sim.pause_host(dep.hosts[0].id, duration=100)
    sim.run(until=50)
    assert world.effects == ["first"]
    sim.run()
    assert world.effects == ["first", "second"]
    assert sim.invocation(inv).completed_at == 101


def test_terminal_error_completes_with_failure() -> None:
    sim = Simulator()
    sim.register(make_app(World()))
    inv = sim.invoke("Svc", "failing")
    sim.run()
    assert sim.invocation(inv).error == "no"
    assert sim.history[-1].type == "fail"


def test_same_seed_gives_the_same_history_byte_for_byte() -> None:
    def once(seed: int) -> str:
        world = World()
        sim = Simulator(seed=seed)
        dep = sim.register(make_app(world), hosts=3)
        for i in range(5):
            sim.invoke("Svc", "workflow", {"sleep": 10 + i})
            sim.invoke("Obj", "record", i, key=f"k{i % 2}")
        sim.at(12, lambda: sim.crash_host(dep.hosts[0].id))
        sim.at(13, lambda: sim.pause_host(dep.hosts[1].id, 100))
        sim.run()
        return sim.history.to_jsonl()

    assert once(7) == once(7)
    assert once(7) != once(8)


def test_clock_refuses_to_go_backwards() -> None:
    clock = VirtualClock()
    clock.jump(10)
    with pytest.raises(ClockError):
        clock.advance_to(5)
    with pytest.raises(ClockError):
        clock.jump(-1)


def test_handler_wall_clock_reads_follow_virtual_time() -> None:
    import datetime as dt

    from harness.clock import EPOCH

    seen: list[dt.datetime] = []

    async def reads_wall_clock(ctx: Context, arg: Any) -> Any:
        await ctx.sleep(timedelta(days=3))
        await ctx.run("now", lambda: seen.append(dt.datetime.now(dt.UTC)))
        return None

    sim = Simulator()
    sim.register(App("v1", (Service("W", (Handler("h", reads_wall_clock),)),)))
    sim.invoke("W", "h")
    sim.run(follow_wall_clock=True)
    assert seen == [EPOCH + dt.timedelta(days=3)]


def test_history_round_trips_through_jsonl(tmp_path: Any) -> None:
    from harness.history import History

    sim = Simulator(seed=3)
    sim.register(make_app(World()), hosts=2)
    sim.invoke("Svc", "workflow", {"sleep": 10})
    sim.run()
    path = sim.history.save(tmp_path / "h.jsonl")
    loaded = History.load(path)
    assert loaded.to_jsonl() == sim.history.to_jsonl()
    assert [r.kind for r in loaded] == [r.kind for r in sim.history]


def test_close_throws_suspended_coroutines_away_and_ends_the_run() -> None:
    ran: list[str] = []

    async def waits(ctx: Context, arg: Any) -> Any:
        try:
            await ctx.sleep(timedelta(days=30))
        finally:
            ran.append("finally")

    sim = Simulator()
    sim.register(App("v1", (Service("Svc", (Handler("waits", waits),)),)))
    sim.invoke("Svc", "waits")
    sim.run(until=60)
    assert ran == []
    sim.close()
    assert ran == ["finally"]  # as a crash does, at close, not whenever the GC gets to it
    with pytest.raises(SimulationError, match="closed"):
        sim.invoke("Svc", "waits")


def test_a_closed_run_is_freed_by_reference_counting() -> None:
    # Cycles (host <-> deployment, the app's ports -> the world -> the simulator, an
    # invocation <-> its attempt, timers) left a whole run to the cyclic GC, which then cost
    # a fifth of a simulated run; close() cuts them. With the GC off, only reference counting
    # can free the simulator, and a run left waiting (a turn waiting on approval, timers
    # pending, a coroutine suspended) must still go.
    import gc
    import weakref

    from contract.ports import Config
    from harness.adapters import load_adapter
    from harness.adapters.base import RunContext
    from harness.history import History

    runtime = load_adapter("reference").open(
        RunContext(seed=1, history=History(), config=Config(), hosts=2))
    runtime.send_message("s1", {"message_id": "s1.m1", "text": "email it", "user": "alice",
                                "plan": ["send_email"]})
    runtime.advance(600.0)
    assert any(inv.attempt is not None or inv.status != "completed"
               for inv in runtime.sim.invocations.values())  # a run left waiting
    runtime.finish()
    sim = weakref.ref(runtime.sim)
    gc.disable()
    try:
        runtime.close()
        del runtime
        assert sim() is None
    finally:
        gc.enable()


def test_the_wall_clock_follows_every_jump_to_the_microsecond() -> None:
    # The freezer is moved by setting its frozen time (not `move_to`) on each jump; the
    # simulated runs of the golden digests never read the wall clock, so this pins it.
    import datetime as dt

    from harness.clock import EPOCH, wall_clock_follows

    outer, inner = VirtualClock(), VirtualClock(100.0)
    with wall_clock_follows(outer):
        outer.advance_to(0.5)
        assert dt.datetime.now(dt.UTC) == EPOCH + dt.timedelta(seconds=0.5)
        with wall_clock_follows(inner):  # moves the freezer that is already on
            assert dt.datetime.now(dt.UTC) == EPOCH + dt.timedelta(seconds=100)
            for at in (101.234567, 8 * 86400 + 0.000001, 8 * 86400 + 7.5):
                inner.advance_to(at)
                assert dt.datetime.now(dt.UTC) == EPOCH + dt.timedelta(seconds=at)
                assert dt.datetime.utcnow() == (EPOCH + dt.timedelta(seconds=at)).replace(
                    tzinfo=None)
        outer.advance_to(2.25)
        assert dt.datetime.now(dt.UTC) == EPOCH + dt.timedelta(seconds=2.25)


def test_every_record_of_simulated_runs_is_in_the_vocabulary() -> None:
    # The simulator's own records skip History.add's vocabulary check (add_simulated): its
    # code fixes their kinds and fields. This is the check they skip, over scenario files and
    # generated schedules (crashes, pauses, redeploys, fault points) on both sim adapters.
    from pathlib import Path

    from contract import records as vocabulary
    from harness.adapters import load_adapter
    from harness.clock import wall_clock_follows
    from harness.history import History
    from harness.run import RunOptions, run_schedule
    from harness.schedules.generate import Size, generate
    from harness.schedules.scenario_file import load_scenario

    histories: list[History] = []

    class Kept(History):
        __slots__ = ()

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            histories.append(self)

    root = Path(__file__).resolve().parent.parent / "scenarios"
    runs = [load_scenario(f) for f in sorted(root.glob("*.toml"))]
    runs += [generate(11, i, Size()) for i in range(40)]
    names = ("process", "host", "deployment", "invocation", "session", "turn", "tool_call",
             "epoch", "key")
    kinds: set[str] = set()
    with pytest.MonkeyPatch.context() as mp, wall_clock_follows(VirtualClock()):
        mp.setattr("harness.adapters.opening.History", Kept)
        for adapter in (load_adapter("reference"), load_adapter("naive")):
            for schedule in runs:
                histories.clear()
                run_schedule(adapter, schedule, RunOptions(report_dir=None,
                                                           save_history=False))
                for record in histories[0]:
                    named = {n: getattr(record, n) for n in names}
                    assert (vocabulary.unknown_kind(record.kind)
                            or vocabulary.missing_field(record.kind, named, record.data)
                            ) is None, record.describe()
                    kinds.add(record.kind)
    # The runs reach the simulator's fault paths, not only the happy one.
    assert {"host.crashed", "host.paused", "attempt.abandoned", "deployment.drained",
            "faultpoint.reached", "journal.entry", "timer.fired"} <= kinds


def test_records_of_the_simulator_are_the_records_add_builds() -> None:
    import dataclasses

    from harness.history import History, Record

    seen: list[Record] = []
    history = History(lambda: 7.25, wall=lambda: 3.0)
    history.subscribe(seen.append)
    first = history.add("journal.entry", invocation="inv1", host="dep1.h1",
                        data={"index": 0, "entry": "run", "name": "x"})
    second = history.add_simulated("journal.entry", invocation="inv1", host="dep1.h1",
                                   data={"index": 0, "entry": "run", "name": "x"})
    assert type(second) is Record
    assert second == dataclasses.replace(first, index=1)
    assert seen == [first, second] and history.records == [first, second]
    third = history.add_simulated("invocation.completed", "fail", invocation="inv1",
                                  deployment="dep1")
    assert third == Record(2, 7.25, "fail", "invocation.completed", deployment="dep1",
                           invocation="inv1", wall=3.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        third.kind = "x"  # type: ignore[misc]
