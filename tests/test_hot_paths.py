"""What a run does on its hot paths, made cheaper without changing a verdict.

Pinned: one pass over the history for all checkers (`harness.checkers.base.dispatch`): a
checker that declares the kinds it `reads` is handed only those records (plus the first and
the last), in order with their indexes, one that declares nothing gets the whole history, and
on real runs (the reference and planted bugs, passing and failing) every built-in checker
returns the same result from its view as from the whole history; `History.add` builds the
same frozen Record and names an unknown field; the simulator records journal entries of
commands but not of state reads and writes (unless asked); the watchdog's timer thread is
woken only for a new earliest deadline.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import ClassVar

import pytest

from harness.adapters import load_adapter
from harness.checkers import ALL
from harness.checkers.base import CheckConfig, Result, dispatch, measured, run_checkers
from harness.clock import VirtualClock, wall_clock_follows
from harness.history import History, Record
from harness.run import RunOptions, run_schedule
from harness.schedules.generate import Size, schedules
from tests import planted


class _Spy:
    name = "spy"
    description = "records what it was given"
    reads: ClassVar[frozenset[str] | None] = frozenset({"turn.started", "fault.*"})

    def __init__(self) -> None:
        self.seen: list[Record] = []

    def check(self, history: History, config: CheckConfig) -> Result:
        self.seen = list(history.records)
        return Result(self.name, True)


class _Everything(_Spy):
    reads = None


def _history() -> History:
    h = History()
    h.add("send")  # first record: handed to every checker whatever it reads
    h.add("turn.started", session="s1", turn="t1")
    h.add("journal.entry", invocation="i1")
    h.add("fault.gc-pause", "info", host="h1", data={"duration": 5.0})
    h.add("faultpoint.reached", host="h1", data={"point": "tool.after_intent"})
    h.add("turn.started", session="s1", turn="t2")
    h.add("invocation.completed", "ok", invocation="i1")
    return h


def test_a_checker_gets_the_kinds_it_reads_with_the_first_and_last_record() -> None:
    spy, everything = _Spy(), _Everything()
    history = _history()
    run_checkers([spy, everything], history, CheckConfig())
    # The prefix `fault.*` takes fault.gc-pause, not faultpoint.reached.
    assert [r.index for r in spy.seen] == [0, 1, 3, 5, 6]
    assert all(a is history[a.index] for a in spy.seen)
    assert everything.seen == history.records


def test_no_checker_declaring_kinds_means_no_copy() -> None:
    history = _history()
    assert dispatch([_Everything()], history) == [history]


def test_records_built_by_add_are_the_frozen_dataclass() -> None:
    history = History(lambda: 12.5)
    record = history.add("turn.started", "event", session="s1", turn="t1",
                         data={"message": "s1.m1"})
    assert type(record) is Record
    assert record == Record(0, 12.5, "event", "turn.started", session="s1", turn="t1",
                            data={"message": "s1.m1"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.kind = "turn.ended"  # type: ignore[misc]
    assert dataclasses.replace(record, turn="t2").turn == "t2"
    with pytest.raises(TypeError, match="colour"):
        history.add("turn.started", colour="red")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="wall"):
        history.add("turn.started", wall=1.0)  # type: ignore[call-arg]
    assert len(history) == 1


def _journal(record_state: bool | None) -> list[str]:
    from contract.binding import App, Context, Handler, Service
    from harness.sim import Simulator

    async def bump(ctx: Context, arg: object) -> int:
        n = int(await ctx.get("n") or 0)
        ctx.set("n", n + 1)
        await ctx.sleep(60)
        return n + 1

    sim = (Simulator() if record_state is None else Simulator(record_state=record_state))
    sim.register(App("v1", (Service("Counter", (Handler("bump", bump),), "object"),)))
    sim.invoke("Counter", "bump", None, key="k")
    sim.run()
    assert sim.state("Counter", "k") == {"n": 1}
    return [r.data["entry"] for r in sim.history if r.kind == "journal.entry"]


def test_state_reads_and_writes_are_journaled_but_not_recorded_unless_asked() -> None:
    assert _journal(None) == ["sleep"]
    assert _journal(True) == ["get", "set", "sleep"]


def test_the_timer_thread_is_woken_only_for_a_new_earliest_deadline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import watchdog

    timers = watchdog._Timers()
    woken: list[int] = []
    original = timers._cond.notify

    def notify(n: int = 1) -> None:
        woken.append(n)
        original(n)

    monkeypatch.setattr(timers._cond, "notify", notify)
    fired: list[str] = []
    first = timers.schedule(60.0, lambda: fired.append("first"))
    assert len(woken) == 1  # the first deadline: the thread must learn of it
    later = [timers.schedule(60.0 + i, lambda: None) for i in range(5)]
    assert len(woken) == 1  # later deadlines: it wakes in time anyway
    timers.cancel(first)
    for ident in later:
        timers.cancel(ident)
    timers.schedule(0.0, lambda: fired.append("soon"))
    assert len(woken) == 2  # an earlier deadline wakes it
    give_up = time.monotonic() + 10
    while not fired and time.monotonic() < give_up:
        time.sleep(0.01)
    assert fired == ["soon"]


def _histories(tmp_path: Path) -> list[History]:
    """Histories of generated runs: the reference, and planted bugs that fail."""
    out = []
    spec = [("reference", load_adapter("reference"))] + [
        (name, planted.load(name).ADAPTER) for name in
        ("unfenced_append", "recovery_fresh_key", "busy_ignores_waiting", "queue_in_memory",
         "pinning_minutes", "rerun_skips_access", "expiry_after_answer")]
    with wall_clock_follows(VirtualClock()):
        for n, (name, adapter) in enumerate(spec):
            for schedule in schedules(n, 6, Size()):
                kept = dataclasses.replace(schedule, source="scenario",
                                           name=f"{name}-{schedule.name}")
                outcome = run_schedule(adapter, kept, RunOptions(report_dir=tmp_path))
                assert outcome.history_path is not None
                out.append(History.load(outcome.history_path))
    return out


def test_every_checker_judges_its_view_as_it_judges_the_whole_history(tmp_path: Path) -> None:
    failing = 0
    for history in _histories(tmp_path):
        config = measured(CheckConfig(), history)
        whole = [checker.check(history, config) for checker in ALL]
        assert run_checkers(ALL, history, CheckConfig()) == whole
        failing += any(r.valid is False for r in whole)
    assert failing >= 5  # the comparison covered violations, not only passing runs
