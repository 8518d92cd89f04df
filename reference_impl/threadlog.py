"""The thread log with epoch fencing.

Every thread has one owner host, the only writer of its log. A control row holds (owner,
epoch). `assign_thread` bumps the epoch; every `append` takes the control row FOR UPDATE inside
its transaction and rejects a stale epoch, so a host that pauses and wakes after the thread
moved cannot write. A host that pauses while it *holds* the control row would block the
reassignment forever, so the database ends such a stalled transaction
(`idle_in_transaction_session_timeout`, `lock_timeout`) and its commit fails.

Two stores implement `ThreadLogStore` with the same meaning: `InMemoryThreadLogStore` below
(for the deterministic simulator) and `PostgresThreadLogStore` in `threadlog_pg`. Both reach
the same fault points at the same places, so a schedule that stops a host "between FOR UPDATE
and COMMIT" means the same thing on both.
"""

from __future__ import annotations

import json
import marshal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from contract import faultpoints
from contract.threadlog import (
    Assignment,
    LockTimeout,
    LogEntry,
    StaleEpoch,
    ThreadLogError,
    ThreadLogStore,
    TransactionAborted,
)

__all__ = ["InMemoryThreadLogStore", "ThreadLog"]


@dataclass(eq=False)
class _Transaction:
    thread_id: str
    locked_at: float
    terminated: bool = False


@dataclass(frozen=True, slots=True)
class _Row:
    """A committed entry as the store keeps it: its payload encoded, as on disk.

    No caller ever holds a reference into the log, so none can change a committed entry by
    mutating a dict it was given or gave: every read decodes its own copy, as rows read from a
    database are the reader's own.
    """

    seq: int
    epoch: int
    owner: str
    kind: str
    # The payload as jsonb would give it back (`_copy_json`), in `marshal`'s format rather
    # than JSON text: C code for exactly these types, it decodes several times faster, and a
    # turn reads the whole log.
    payload: bytes


@dataclass
class _Thread:
    control: Assignment | None = None
    rows: list[_Row] = field(default_factory=list)
    holder: _Transaction | None = None


class InMemoryThreadLogStore:
    """A single-process store with PostgreSQL's transactional meaning, in virtual time.

    Only `faultpoints.reach` suspends, so an append stopped at "threadlog.append.locked" holds
    the control row exactly as a PostgreSQL session idle in its transaction would. Waiting for
    a lock is modelled as failing at once with LockTimeout (a session with a short
    `lock_timeout`): the simulator owns time and scheduling, so the caller retries at a time
    the simulator chooses instead of blocking in here. A holder idle for at least
    `idle_in_transaction_timeout` (by `now()`) is terminated when it is found in the way, or
    when it comes back to commit, as PostgreSQL's timer would have done meanwhile.

    No asyncio primitive is used: the simulator drives these coroutines with send/throw.
    """

    def __init__(self, now: Callable[[], float], idle_in_transaction_timeout: float = 5.0) -> None:
        if idle_in_transaction_timeout <= 0:
            raise ValueError(
                "Expected idle_in_transaction_timeout > 0 but got "
                f"idle_in_transaction_timeout={idle_in_transaction_timeout!r}"
            )
        self._now = now
        self._idle_timeout = idle_in_transaction_timeout
        self._threads: dict[str, _Thread] = {}

    def _thread(self, thread_id: str) -> _Thread:
        thread = self._threads.get(thread_id)
        if thread is None:
            thread = self._threads[thread_id] = _Thread()
        return thread

    def _expired(self, txn: _Transaction) -> bool:
        return self._now() - txn.locked_at >= self._idle_timeout

    def _lock(self, thread: _Thread, thread_id: str) -> _Transaction:
        holder = thread.holder
        if holder is not None:
            if not self._expired(holder):
                raise LockTimeout(
                    f"control row of thread {thread_id!r} is held by another transaction "
                    f"since t={holder.locked_at}",
                    held_since=holder.locked_at, idle_timeout=self._idle_timeout,
                )
            holder.terminated = True
        txn = _Transaction(thread_id, locked_at=self._now())
        thread.holder = txn
        return txn

    @staticmethod
    def _unlock(thread: _Thread, txn: _Transaction) -> None:
        # A terminated transaction already lost the row to whoever terminated it.
        if thread.holder is txn:
            thread.holder = None

    async def assign_thread(self, thread_id: str, owner: str) -> Assignment:
        thread = self._thread(thread_id)
        txn = self._lock(thread, thread_id)
        try:
            epoch = 1 if thread.control is None else thread.control.epoch + 1
            thread.control = Assignment(thread_id, owner, epoch, len(thread.rows))
            return thread.control
        finally:
            self._unlock(thread, txn)

    async def append(
        self, thread_id: str, epoch: int, owner: str, kind: str, payload: dict[str, Any]
    ) -> LogEntry:
        await faultpoints.reach("threadlog.append.before_lock")
        thread = self._thread(thread_id)
        txn = self._lock(thread, thread_id)
        try:
            control = thread.control
            if control is None or control.epoch != epoch or control.owner != owner:
                raise StaleEpoch(
                    thread_id,
                    epoch,
                    owner,
                    None if control is None else control.epoch,
                    None if control is None else control.owner,
                )
            await faultpoints.reach("threadlog.append.locked")
            if txn.terminated or self._expired(txn):
                raise TransactionAborted(
                    f"append to thread {thread_id!r} by {owner!r} at epoch {epoch}: the "
                    f"transaction was idle longer than {self._idle_timeout}s holding the "
                    "control row and was terminated; nothing was committed"
                )
            return self._commit(thread, thread_id, epoch, owner, kind, payload)
        finally:
            self._unlock(thread, txn)

    @staticmethod
    def _commit(
        thread: _Thread, thread_id: str, epoch: int, owner: str, kind: str,
        payload: dict[str, Any],
    ) -> LogEntry:
        copied = _copy_json(payload)
        row = _Row(len(thread.rows) + 1, epoch, owner, kind, marshal.dumps(copied))
        thread.rows.append(row)
        # `copied` is the caller's own: the log keeps only the encoded row.
        return LogEntry(thread_id, row.seq, epoch, owner, kind, copied)

    async def read(self, thread_id: str) -> list[LogEntry]:
        thread = self._threads.get(thread_id)
        if thread is None:
            return []
        # Each entry decodes its own payload (see _Row): the caller may mutate it.
        return [LogEntry(thread_id, row.seq, row.epoch, row.owner, row.kind,
                         marshal.loads(row.payload))
                for row in thread.rows]

    async def current(self, thread_id: str) -> Assignment | None:
        thread = self._threads.get(thread_id)
        return None if thread is None else thread.control


def _copy_json(value: dict[str, Any]) -> dict[str, Any]:
    """What PostgreSQL's jsonb would give back: a fresh copy with tuples turned into lists;
    a payload that is not JSON fails here as it would there."""
    try:
        copied: dict[str, Any] = _copy_plain_json(value)
    except (_NotPlainJson, RecursionError):
        # Anything else (a subclass of a JSON type, a key that is not a str, a cycle) is
        # converted or rejected exactly as `json` does it.
        copied = json.loads(json.dumps(value))
    return copied


class _NotPlainJson(Exception):
    pass


def _copy_plain_json(value: Any) -> Any:
    # The same result as a json dumps+loads round trip for values made only of dict (str
    # keys), list, tuple, str, int, float, bool and None, about three times faster: every
    # append copies its payload, and payloads are such values. Exact types only: a subclass
    # (an IntEnum, a str Enum) may encode otherwise, so it takes the round trip.
    cls = type(value)
    if cls is str or cls is int or cls is float or cls is bool or value is None:
        return value
    if cls is dict:
        copied = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlainJson
            copied[key] = _copy_plain_json(item)
        return copied
    if cls is list or cls is tuple:
        return [_copy_plain_json(item) for item in value]
    raise _NotPlainJson


class ThreadLog:
    """One thread's log as seen by the host that owns it."""

    def __init__(self, store: ThreadLogStore, thread_id: str, owner: str) -> None:
        self.store = store
        self.thread_id = thread_id
        self.owner = owner
        self._epoch: int | None = None

    @property
    def epoch(self) -> int | None:
        """The epoch this host was given by its last `take_ownership`, if any."""
        return self._epoch

    async def take_ownership(self) -> Assignment:
        """Become the owner of the thread at a new epoch, fencing off every earlier owner."""
        assignment = await self.store.assign_thread(self.thread_id, self.owner)
        self._epoch = assignment.epoch
        return assignment

    async def append(self, kind: str, payload: dict[str, Any]) -> LogEntry:
        """Append with the epoch this host owns; StaleEpoch once the thread has moved on."""
        if self._epoch is None:
            raise ThreadLogError(
                f"{self.owner!r} appended to thread {self.thread_id!r} without owning it; "
                "call take_ownership() first"
            )
        return await self.store.append(self.thread_id, self._epoch, self.owner, kind, payload)

    async def entries(self) -> list[LogEntry]:
        """The committed log of the thread, by seq."""
        return await self.store.read(self.thread_id)
