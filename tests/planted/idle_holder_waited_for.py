"""fencing: the thread log waits for a holder the database should have ended.

A host that pauses while it holds the control row (inside its transaction) is ended by the
database after `idle_in_transaction_session_timeout`: the next writer takes the row. Here the
store reads the bound backwards: a holder idle past it is waited for (every writer refused
with a lock timeout until the paused host comes back), and one within it is ended at once.
The session's writes wait on the paused host for as long as it is away.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from contract.binding import App
from contract.ports import Ports
from contract.threadlog import LockTimeout
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from reference_impl.threadlog import InMemoryThreadLogStore, _Transaction
from tests.planted._plant import store_seen_as

INVARIANT = "fencing"


class _PatientStore(InMemoryThreadLogStore):
    """`InMemoryThreadLogStore._lock` with the idle test reversed, nothing else changed."""

    def _lock(self, thread: Any, thread_id: str) -> _Transaction:
        holder = thread.holder
        if holder is not None:
            if self._expired(holder):  # the bug: the reference ends this holder, not the writer
                raise LockTimeout(
                    f"control row of thread {thread_id!r} is held by another transaction "
                    f"since t={holder.locked_at}",
                    held_since=holder.locked_at, idle_timeout=self._idle_timeout,
                )
            holder.terminated = True
        txn = _Transaction(thread_id, locked_at=self._now())
        thread.holder = txn
        return txn


def build(ports: Ports, version: str = "v1") -> App:
    store = store_seen_as(ports.threadlog, _PatientStore, __name__)
    return build_app(replace(ports, threadlog=store), version)


ADAPTER = SimAdapter("planted-idle-holder-waited-for",
                     "the thread log waits for an idle holder instead of ending it", build)
