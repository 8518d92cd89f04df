"""fencing: the thread log's append skips the epoch check.

The store takes the control row, but does not compare the writer's epoch (and owner) with it:
a host that paused, was fenced off by a new owner and wakes up still lands its append, under
its stale epoch, after the new owner's entries.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from contract import faultpoints
from contract.binding import App
from contract.ports import Ports
from contract.threadlog import LogEntry, TransactionAborted
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from reference_impl.threadlog import InMemoryThreadLogStore
from tests.planted._plant import store_seen_as

INVARIANT = "fencing"


class _UnfencedStore(InMemoryThreadLogStore):
    """`InMemoryThreadLogStore.append` without the epoch check, nothing else changed."""

    async def append(
        self, thread_id: str, epoch: int, owner: str, kind: str, payload: dict[str, Any]
    ) -> LogEntry:
        await faultpoints.reach("threadlog.append.before_lock")
        thread = self._thread(thread_id)
        txn = self._lock(thread, thread_id)
        try:
            # (the reference raises StaleEpoch here unless (epoch, owner) is the control row)
            await faultpoints.reach("threadlog.append.locked")
            if txn.terminated or self._expired(txn):
                raise TransactionAborted(
                    f"append to thread {thread_id!r} by {owner!r} at epoch {epoch}: the "
                    "transaction was idle too long holding the control row and was terminated"
                )
            return self._commit(thread, thread_id, epoch, owner, kind, payload)
        finally:
            self._unlock(thread, txn)


def build(ports: Ports, version: str = "v1") -> App:
    store = store_seen_as(ports.threadlog, _UnfencedStore, __name__)
    return build_app(replace(ports, threadlog=store), version)


ADAPTER = SimAdapter("planted-unfenced-append", "thread-log append without the epoch check",
                     build)
