"""The two stalls epoch fencing exists for, with real concurrent PostgreSQL sessions, and the
same stories on the in-memory store driven by hand.

(a) The old owner stalls after deciding to append, before it takes the control row; the thread
    moves; when the old owner wakes, its append is rejected with StaleEpoch.
(b) The old owner stalls while holding the control row; the reassignment must not wait
    forever: the database ends the stalled transaction, the reassignment goes through, and
    the old owner's commit fails with TransactionAborted.

In every story the log must stay linear (seq 1..n) and every entry must carry the epoch that
was current when it landed; no append with a stale epoch may land.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

import pytest
from pg_fixtures import Stall, pg_conninfo_fixture, pg_server_fixture  # noqa: F401

from contract import faultpoints
from contract.threadlog import Assignment, LockTimeout, LogEntry, StaleEpoch, TransactionAborted
from reference_impl.threadlog import InMemoryThreadLogStore, ThreadLog

T = TypeVar("T")

STALE = {"stale": True}
# How long a story may take before "the reassignment waited forever" is the verdict.
STORY_BOUND_S = 20.0


class Timeline:
    """What the test saw land, in order: assignments and committed appends."""

    def __init__(self) -> None:
        self.events: list[Assignment | LogEntry] = []

    def assigned(self, assignment: Assignment) -> Assignment:
        self.events.append(assignment)
        return assignment

    def landed(self, entry: LogEntry) -> LogEntry:
        self.events.append(entry)
        return entry

    def check(self, log: list[LogEntry]) -> None:
        assert [e.seq for e in log] == list(range(1, len(log) + 1)), "log is not linear"
        assert log == [e for e in self.events if isinstance(e, LogEntry)], (
            "the committed log differs from the appends that reported success"
        )
        current: Assignment | None = None
        for event in self.events:
            if isinstance(event, Assignment):
                current = event
                continue
            assert current is not None, f"{event} landed before any assignment"
            assert (event.epoch, event.owner) == (current.epoch, current.owner), (
                f"{event} landed while the current epoch was {current.epoch} of {current.owner}"
            )
        assert all(e.payload != STALE for e in log), "a stale append landed"


async def retry_on_lock_timeout(log: ThreadLog) -> tuple[Assignment, int]:
    """take_ownership, retried while the control row is held. Each attempt waits inside the
    database for up to lock_timeout, so no sleep is needed between attempts."""
    lock_timeouts = 0
    deadline = asyncio.get_running_loop().time() + STORY_BOUND_S
    while True:
        try:
            return await log.take_ownership(), lock_timeouts
        except LockTimeout:
            lock_timeouts += 1
            if asyncio.get_running_loop().time() > deadline:
                raise


def run(coro: Coroutine[Any, Any, T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, STORY_BOUND_S * 2)

    return asyncio.run(bounded())


async def idle_in_transaction_sessions(conninfo: str) -> int:
    import psycopg

    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'"
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


# --- PostgreSQL, real concurrent sessions --------------------------------------------------


@pytest.mark.real
def test_pg_owner_stalled_before_the_lock_is_fenced_by_the_new_epoch(pg_conninfo: str) -> None:
    from reference_impl.threadlog_pg import PostgresThreadLogStore

    async def story() -> None:
        host_a = PostgresThreadLogStore(pg_conninfo)
        host_b = PostgresThreadLogStore(pg_conninfo)
        await host_a.ensure_schema()
        seen = Timeline()
        old = ThreadLog(host_a, "t", "host-a")
        new = ThreadLog(host_b, "t", "host-b")
        seen.assigned(await old.take_ownership())
        seen.landed(await old.append("msg", {"n": 1}))
        with Stall("threadlog.append.before_lock") as stall:
            stalled = asyncio.create_task(old.append("msg", STALE))
            await stall.reached.wait()
            # Not yet in a transaction: a long stall here costs no lock and no idle timeout.
            assert await idle_in_transaction_sessions(pg_conninfo) == 0
            # The stalled host holds no lock yet: the thread moves at once.
            seen.assigned(await new.take_ownership())
            seen.landed(await new.append("msg", {"n": 2}))
            stall.release.set()
            with pytest.raises(StaleEpoch) as caught:
                await stalled
        assert (caught.value.current_epoch, caught.value.current_owner) == (2, "host-b")
        seen.landed(await new.append("msg", {"n": 3}))
        seen.check(await host_a.read("t"))

    run(story())


@pytest.mark.real
def test_pg_owner_stalled_holding_the_row_is_ended_by_the_database(pg_conninfo: str) -> None:
    from reference_impl.threadlog_pg import PostgresThreadLogStore

    async def story() -> None:
        host_a = PostgresThreadLogStore(pg_conninfo, idle_in_transaction_timeout_ms=300)
        # A lock timeout shorter than the holder's idle timeout: the first attempts give up,
        # which is the retry a host with lock_timeout does.
        host_b = PostgresThreadLogStore(pg_conninfo, lock_timeout_ms=100)
        await host_a.ensure_schema()
        seen = Timeline()
        old = ThreadLog(host_a, "t", "host-a")
        new = ThreadLog(host_b, "t", "host-b")
        seen.assigned(await old.take_ownership())
        seen.landed(await old.append("msg", {"n": 1}))
        with Stall("threadlog.append.locked") as stall:
            stalled = asyncio.create_task(old.append("msg", STALE))
            await stall.reached.wait()
            assignment, _ = await retry_on_lock_timeout(new)
            seen.assigned(assignment)
            assert assignment.epoch == 2
            stall.release.set()
            with pytest.raises(TransactionAborted):
                await stalled
        seen.landed(await new.append("msg", {"n": 2}))
        seen.check(await host_b.read("t"))

    run(story())


@pytest.mark.real
def test_pg_holder_idle_past_the_timeout_cannot_commit_even_without_contention(
    pg_conninfo: str,
) -> None:
    """The in-memory store aborts such a holder at its commit; this pins that PostgreSQL does
    the same (the timer fires whether or not anyone waits for the row)."""
    from reference_impl.threadlog_pg import PostgresThreadLogStore

    async def story() -> None:
        host_a = PostgresThreadLogStore(pg_conninfo, idle_in_transaction_timeout_ms=300)
        await host_a.ensure_schema()
        seen = Timeline()
        old = ThreadLog(host_a, "t", "host-a")
        seen.assigned(await old.take_ownership())
        with Stall("threadlog.append.locked") as stall:
            stalled = asyncio.create_task(old.append("msg", STALE))
            await stall.reached.wait()
            assert await idle_in_transaction_sessions(pg_conninfo) == 1
            # Wait for the effect (the database ended the session), not for a fixed time.
            deadline = asyncio.get_running_loop().time() + STORY_BOUND_S
            pause = 0.02
            while await idle_in_transaction_sessions(pg_conninfo) > 0:
                assert asyncio.get_running_loop().time() < deadline, "session never ended"
                await asyncio.sleep(pause)
                pause = min(pause * 1.5, 0.25)
            stall.release.set()
            with pytest.raises(TransactionAborted):
                await stalled
        seen.check(await host_a.read("t"))

    run(story())


# --- the same stories on the in-memory store, driven by hand --------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class HandPause:
    """A hook that suspends the first coroutine reaching `point`: `coro.send(None)` then
    returns this object, as a simulator would receive the host's pause."""

    def __init__(self, point: str) -> None:
        self.point = point
        self._armed = True
        self._previous: faultpoints.Hook | None = None

    def _hook(self, name: str) -> HandPause | None:
        if name != self.point or not self._armed:
            return None
        self._armed = False
        return self

    def __await__(self) -> Generator[HandPause, None, None]:
        yield self

    def __enter__(self) -> HandPause:
        self._previous = faultpoints.install(self._hook)
        return self

    def __exit__(self, *exc_info: object) -> None:
        faultpoints.install(self._previous)


def drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that must not suspend to the end."""
    try:
        suspended_at = coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    coro.close()
    raise AssertionError(f"coroutine suspended unexpectedly at {suspended_at!r}")


def stop_at(pause: HandPause, coro: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
    assert coro.send(None) is pause, f"did not stop at {pause.point}"
    return coro


def test_memory_owner_stalled_before_the_lock_is_fenced_by_the_new_epoch() -> None:
    store = InMemoryThreadLogStore(FakeClock(), idle_in_transaction_timeout=5.0)
    seen = Timeline()
    old = ThreadLog(store, "t", "host-a")
    new = ThreadLog(store, "t", "host-b")
    seen.assigned(drive(old.take_ownership()))
    seen.landed(drive(old.append("msg", {"n": 1})))
    with HandPause("threadlog.append.before_lock") as pause:
        stalled = stop_at(pause, old.append("msg", STALE))
        seen.assigned(drive(new.take_ownership()))
        seen.landed(drive(new.append("msg", {"n": 2})))
        with pytest.raises(StaleEpoch):
            drive(stalled)
    seen.landed(drive(new.append("msg", {"n": 3})))
    seen.check(drive(store.read("t")))


def test_memory_owner_stalled_holding_the_row_is_ended_once_idle_too_long() -> None:
    clock = FakeClock()
    store = InMemoryThreadLogStore(clock, idle_in_transaction_timeout=5.0)
    seen = Timeline()
    old = ThreadLog(store, "t", "host-a")
    new = ThreadLog(store, "t", "host-b")
    seen.assigned(drive(old.take_ownership()))
    seen.landed(drive(old.append("msg", {"n": 1})))
    with HandPause("threadlog.append.locked") as pause:
        clock.t = 10.0
        stalled = stop_at(pause, old.append("msg", STALE))
        clock.t = 14.9
        with pytest.raises(LockTimeout):
            drive(new.take_ownership())
        clock.t = 15.0
        seen.assigned(drive(new.take_ownership()))
        seen.landed(drive(new.append("msg", {"n": 2})))
        with pytest.raises(TransactionAborted):
            drive(stalled)
    seen.landed(drive(new.append("msg", {"n": 3})))
    seen.check(drive(store.read("t")))


def test_memory_holder_idle_past_the_timeout_cannot_commit_even_without_contention() -> None:
    clock = FakeClock()
    store = InMemoryThreadLogStore(clock, idle_in_transaction_timeout=5.0)
    seen = Timeline()
    old = ThreadLog(store, "t", "host-a")
    seen.assigned(drive(old.take_ownership()))
    with HandPause("threadlog.append.locked") as pause:
        stalled = stop_at(pause, old.append("msg", STALE))
        clock.t = 5.0
        with pytest.raises(TransactionAborted):
            drive(stalled)
    # The aborted transaction left the row free.
    seen.landed(drive(old.append("msg", {"n": 1})))
    seen.check(drive(store.read("t")))


def test_memory_holder_resumed_within_the_timeout_commits() -> None:
    clock = FakeClock()
    store = InMemoryThreadLogStore(clock, idle_in_transaction_timeout=5.0)
    seen = Timeline()
    old = ThreadLog(store, "t", "host-a")
    seen.assigned(drive(old.take_ownership()))
    with HandPause("threadlog.append.locked") as pause:
        stalled = stop_at(pause, old.append("msg", {"n": 1}))
        clock.t = 4.9
        seen.landed(drive(stalled))
    seen.check(drive(store.read("t")))


def test_memory_holder_thrown_away_by_a_crash_releases_the_row() -> None:
    """A crashed host's coroutine is closed, not resumed: like a dropped connection, its
    transaction rolls back and the row is free at once, without waiting for the timeout."""
    store = InMemoryThreadLogStore(FakeClock(), idle_in_transaction_timeout=5.0)
    seen = Timeline()
    old = ThreadLog(store, "t", "host-a")
    new = ThreadLog(store, "t", "host-b")
    seen.assigned(drive(old.take_ownership()))
    with HandPause("threadlog.append.locked") as pause:
        stalled = stop_at(pause, old.append("msg", STALE))
        stalled.close()
    seen.assigned(drive(new.take_ownership()))
    seen.landed(drive(new.append("msg", {"n": 1})))
    seen.check(drive(store.read("t")))
