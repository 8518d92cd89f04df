"""One contract for every ThreadLogStore: the in-memory store must mean what PostgreSQL means.

Each test runs against both stores. The in-memory store is what the simulator uses; if it
drifted from PostgreSQL, simulated schedules would prove things about a system nobody runs.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from pg_fixtures import Stall, pg_conninfo_fixture, pg_server_fixture  # noqa: F401

from contract.threadlog import (
    Assignment,
    LockTimeout,
    LogEntry,
    StaleEpoch,
    ThreadLogError,
    ThreadLogStore,
)
from reference_impl.threadlog import InMemoryThreadLogStore, ThreadLog

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@dataclass
class Backend:
    name: str
    store: ThreadLogStore
    # Another host's session on the same database. PostgreSQL settings are per session;
    # the in-memory store never waits for a lock, so it has no lock timeout to vary.
    other_host: Callable[[int], ThreadLogStore]


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.real)])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "memory":
        store = InMemoryThreadLogStore(FakeClock())
        yield Backend("memory", store, lambda lock_timeout_ms: store)
        return
    from reference_impl.threadlog_pg import PostgresThreadLogStore

    conninfo: str = request.getfixturevalue("pg_conninfo")
    pg_store = PostgresThreadLogStore(conninfo)
    run(pg_store.ensure_schema())
    yield Backend(
        "postgres",
        pg_store,
        lambda lock_timeout_ms: PostgresThreadLogStore(conninfo, lock_timeout_ms=lock_timeout_ms),
    )


def summary(entries: list[LogEntry]) -> list[tuple[int, int, str, str]]:
    return [(e.seq, e.epoch, e.owner, e.kind) for e in entries]


def test_unknown_thread_has_no_assignment_and_an_empty_log(backend: Backend) -> None:
    async def story() -> tuple[Assignment | None, list[LogEntry]]:
        return await backend.store.current("t"), await backend.store.read("t")

    assert run(story()) == (None, [])


def test_first_assignment_of_an_unknown_thread_is_epoch_1(backend: Backend) -> None:
    assert run(backend.store.assign_thread("t", "host-a")) == Assignment("t", "host-a", 1)


def test_every_assignment_bumps_the_epoch_by_one_and_moves_the_owner(backend: Backend) -> None:
    async def story() -> list[Assignment | None]:
        s = backend.store
        seen: list[Assignment | None] = []
        for owner in ("host-a", "host-b", "host-a", "host-a"):
            await s.assign_thread("t", owner)
            seen.append(await s.current("t"))
        return seen

    assert run(story()) == [
        Assignment("t", "host-a", 1),
        Assignment("t", "host-b", 2),
        Assignment("t", "host-a", 3),
        Assignment("t", "host-a", 4),
    ]


def test_appends_with_the_current_epoch_land_with_contiguous_seq(backend: Backend) -> None:
    async def story() -> tuple[list[LogEntry], list[LogEntry]]:
        s = backend.store
        a = await s.assign_thread("t", "host-a")
        returned = [await s.append("t", a.epoch, "host-a", "msg", {"n": n}) for n in range(5)]
        return returned, await s.read("t")

    returned, read = run(story())
    assert [e.seq for e in read] == [1, 2, 3, 4, 5]
    assert returned == read
    assert [e.payload for e in read] == [{"n": n} for n in range(5)]
    assert {(e.epoch, e.owner) for e in read} == {(1, "host-a")}


def test_a_stale_epoch_is_rejected_naming_the_current_owner_and_nothing_lands(
    backend: Backend,
) -> None:
    async def story() -> tuple[StaleEpoch, list[LogEntry]]:
        s = backend.store
        await s.assign_thread("thread-7", "host-a")
        await s.append("thread-7", 1, "host-a", "msg", {"n": 1})
        await s.assign_thread("thread-7", "host-b")
        with pytest.raises(StaleEpoch) as caught:
            await s.append("thread-7", 1, "host-a", "msg", {"n": "stale"})
        return caught.value, await s.read("thread-7")

    err, log = run(story())
    assert (err.thread_id, err.epoch, err.owner) == ("thread-7", 1, "host-a")
    assert (err.current_epoch, err.current_owner) == (2, "host-b")
    message = str(err)
    for part in ("'thread-7'", "epoch 1", "current epoch is 2", "'host-b'"):
        assert part in message
    assert summary(log) == [(1, 1, "host-a", "msg")]


def test_the_wrong_owner_is_rejected_even_with_the_current_epoch(backend: Backend) -> None:
    async def story() -> tuple[StaleEpoch, list[LogEntry]]:
        s = backend.store
        await s.assign_thread("t", "host-a")
        with pytest.raises(StaleEpoch) as caught:
            await s.append("t", 1, "host-b", "msg", {})
        return caught.value, await s.read("t")

    err, log = run(story())
    assert (err.current_epoch, err.current_owner) == (1, "host-a")
    assert log == []


def test_an_epoch_from_the_future_is_rejected(backend: Backend) -> None:
    async def story() -> None:
        await backend.store.assign_thread("t", "host-a")
        await backend.store.append("t", 2, "host-a", "msg", {})

    with pytest.raises(StaleEpoch):
        run(story())


def test_an_append_to_a_never_assigned_thread_is_rejected(backend: Backend) -> None:
    with pytest.raises(StaleEpoch) as caught:
        run(backend.store.append("t", 1, "host-a", "msg", {}))
    assert caught.value.current_epoch is None
    assert "never been assigned" in str(caught.value)


def test_a_rejected_append_consumes_no_seq_and_releases_the_control_row(
    backend: Backend,
) -> None:
    async def story() -> list[LogEntry]:
        s = backend.store
        await s.assign_thread("t", "host-a")
        await s.append("t", 1, "host-a", "msg", {})
        with pytest.raises(StaleEpoch):
            await s.append("t", 9, "host-a", "msg", {})
        # A short lock timeout: if the rejected append still held the row, this would fail.
        await backend.other_host(200).assign_thread("t", "host-a")
        await s.append("t", 2, "host-a", "msg", {})
        return await s.read("t")

    assert [(e.seq, e.epoch) for e in run(story())] == [(1, 1), (2, 2)]


def test_threads_have_independent_epochs_and_seqs(backend: Backend) -> None:
    async def story() -> tuple[list[LogEntry], list[LogEntry]]:
        s = backend.store
        await s.assign_thread("t1", "host-a")
        await s.assign_thread("t1", "host-a")
        await s.assign_thread("t2", "host-b")
        await s.append("t1", 2, "host-a", "msg", {})
        await s.append("t2", 1, "host-b", "msg", {})
        await s.append("t1", 2, "host-a", "msg", {})
        return await s.read("t1"), await s.read("t2")

    t1, t2 = run(story())
    assert summary(t1) == [(1, 2, "host-a", "msg"), (2, 2, "host-a", "msg")]
    assert summary(t2) == [(1, 1, "host-b", "msg")]


def test_payloads_round_trip_as_json_and_committed_rows_do_not_change(backend: Backend) -> None:
    payload: dict[str, Any] = {
        "text": "héllo",
        "n": 3,
        "ok": True,
        "none": None,
        "nested": {"list": [1, 2.5, "x"]},
        "tuple": (1, 2),
    }

    async def story() -> tuple[LogEntry, list[LogEntry]]:
        s = backend.store
        await s.assign_thread("t", "host-a")
        entry = await s.append("t", 1, "host-a", "tool-intent", payload)
        payload["nested"]["list"].append("mutated after the commit")
        first = await s.read("t")
        first[0].payload["text"] = "mutated by a reader"
        return entry, await s.read("t")

    entry, log = run(story())
    expected = {
        "text": "héllo",
        "n": 3,
        "ok": True,
        "none": None,
        "nested": {"list": [1, 2.5, "x"]},
        "tuple": [1, 2],
    }
    assert entry.payload == expected
    assert log[0].payload == expected
    assert log[0].kind == "tool-intent"


def test_the_writer_mutating_the_entry_it_got_back_changes_no_committed_row(
    backend: Backend,
) -> None:
    async def story() -> list[LogEntry]:
        s = backend.store
        await s.assign_thread("t", "host-a")
        entry = await s.append("t", 1, "host-a", "msg", {"nested": {"list": [1]}})
        entry.payload["nested"]["list"].append("mutated by the writer")
        entry.payload["added"] = True
        return await s.read("t")

    assert [e.payload for e in run(story())] == [{"nested": {"list": [1]}}]


class Color(enum.IntEnum):
    RED = 1


class Mode(enum.StrEnum):
    FAST = "fast"


def test_payloads_that_json_converts_are_converted_as_json_does(backend: Backend) -> None:
    # Keys that are not str, subclasses of JSON types, a list subclass: what jsonb stores.
    payload: dict[Any, Any] = {1: "one", 2.5: "x", False: "f", None: "n", "color": Color.RED,
                               "mode": Mode.FAST, "deep": [{"k": (Color.RED,)}]}

    async def story() -> tuple[LogEntry, list[LogEntry]]:
        s = backend.store
        await s.assign_thread("t", "host-a")
        entry = await s.append("t", 1, "host-a", "msg", payload)
        return entry, await s.read("t")

    entry, log = run(story())
    expected = {"1": "one", "2.5": "x", "false": "f", "null": "n", "color": 1, "mode": "fast",
                "deep": [{"k": [1]}]}
    assert entry.payload == expected and log[0].payload == expected
    assert type(log[0].payload["color"]) is int and type(log[0].payload["mode"]) is str


def test_in_memory_store_rejects_a_payload_that_is_not_json() -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic

    async def story(payload: dict[str, Any]) -> None:
        s = InMemoryThreadLogStore(FakeClock())
        await s.assign_thread("t", "host-a")
        await s.append("t", 1, "host-a", "msg", payload)

    with pytest.raises(TypeError, match="set is not JSON serializable"):
        run(story({"tags": {"a"}}))
    with pytest.raises(ValueError, match="Circular reference"):
        run(story(cyclic))


def test_the_log_stays_linear_across_owners(backend: Backend) -> None:
    async def story() -> list[LogEntry]:
        s = backend.store
        for owner, appends in (("host-a", 2), ("host-b", 2), ("host-a", 1)):
            epoch = (await s.assign_thread("t", owner)).epoch
            for _ in range(appends):
                await s.append("t", epoch, owner, "msg", {})
            # The previous owner's epoch is dead from now on.
            if epoch > 1:
                with pytest.raises(StaleEpoch):
                    await s.append(
                        "t",
                        epoch - 1,
                        "host-a" if owner == "host-b" else "host-b",
                        "msg",
                        {"stale": True},
                    )
        return await s.read("t")

    assert summary(run(story())) == [
        (1, 1, "host-a", "msg"),
        (2, 1, "host-a", "msg"),
        (3, 2, "host-b", "msg"),
        (4, 2, "host-b", "msg"),
        (5, 3, "host-a", "msg"),
    ]


def test_thread_log_fences_off_the_host_that_lost_the_thread(backend: Backend) -> None:
    async def story() -> tuple[list[LogEntry], int | None, int | None]:
        old = ThreadLog(backend.store, "t", "host-a")
        new = ThreadLog(backend.store, "t", "host-b")
        assert await old.take_ownership() == Assignment("t", "host-a", 1)
        await old.append("msg", {"n": 1})
        # The new epoch knows seq 1 was committed before it (after_seq).
        assert await new.take_ownership() == Assignment("t", "host-b", 2, after_seq=1)
        with pytest.raises(StaleEpoch):
            await old.append("msg", {"n": "stale"})
        await new.append("msg", {"n": 2})
        assert await old.entries() == await new.entries()
        return await new.entries(), old.epoch, new.epoch

    log, old_epoch, new_epoch = run(story())
    assert [(e.seq, e.epoch, e.payload) for e in log] == [(1, 1, {"n": 1}), (2, 2, {"n": 2})]
    assert (old_epoch, new_epoch) == (1, 2)


def test_thread_log_refuses_to_append_before_taking_ownership(backend: Backend) -> None:
    log = ThreadLog(backend.store, "t", "host-a")
    with pytest.raises(ThreadLogError, match="take_ownership"):
        run(log.append("msg", {}))
    assert run(log.entries()) == []


def test_a_held_control_row_times_out_other_writers_and_its_holder_still_commits(
    backend: Backend,
) -> None:
    """Within the idle timeout the holder keeps its row: others get LockTimeout, not a wait
    forever and not the row."""

    async def story() -> tuple[LogEntry, Assignment, list[LogEntry]]:
        s = backend.store
        await s.assign_thread("t", "host-a")
        other = backend.other_host(100)
        with Stall("threadlog.append.locked") as stall:
            holder = asyncio.create_task(s.append("t", 1, "host-a", "msg", {"n": 1}))
            await stall.reached.wait()
            with pytest.raises(LockTimeout):
                await other.assign_thread("t", "host-b")
            with pytest.raises(LockTimeout):
                await other.append("t", 1, "host-a", "msg", {"n": "concurrent"})
            stall.release.set()
            landed = await holder
        moved = await other.assign_thread("t", "host-b")
        return landed, moved, await s.read("t")

    landed, moved, log = run(story())
    assert (landed.seq, landed.epoch) == (1, 1)
    assert moved == Assignment("t", "host-b", 2, after_seq=1)  # the held append landed first
    assert [e.payload for e in log] == [{"n": 1}]


def test_in_memory_store_rejects_a_non_positive_idle_timeout() -> None:
    with pytest.raises(ValueError, match="idle_in_transaction_timeout"):
        InMemoryThreadLogStore(FakeClock(), idle_in_transaction_timeout=0)
