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
from reference_impl.threadlog import InMemoryThreadLogStore

INVARIANT = "fencing"


class _PatientStore(InMemoryThreadLogStore):
    """`InMemoryThreadLogStore._lock` with the idle test reversed, nothing else changed."""

    def _lock(self, thread: Any, thread_id: str) -> Any:
        holder = thread.holder
        if holder is not None:
            if self._expired(holder):  # the bug: the reference ends this holder
                raise LockTimeout(
                    f"control row of thread {thread_id!r} is held by another transaction "
                    f"since t={holder.locked_at}",
                    held_since=holder.locked_at, idle_timeout=self._idle_timeout,
                )
            holder.terminated = True
        return super()._lock(_Free(thread), thread_id)


class _Free:
    """The thread as `_lock` sees it once its holder was dealt with: the row is taken over."""

    def __init__(self, thread: Any) -> None:
        self.__dict__["_thread"] = thread

    def __getattr__(self, name: str) -> Any:
        return None if name == "holder" else getattr(self._thread, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._thread, name, value)


def _patient(store: Any) -> Any:
    if not isinstance(store, InMemoryThreadLogStore):
        raise TypeError(f"{__name__} plants its bug in InMemoryThreadLogStore, not {store!r}")
    view = object.__new__(_PatientStore)
    view.__dict__ = store.__dict__
    return view


def build(ports: Ports, version: str = "v1") -> App:
    return build_app(replace(ports, threadlog=_patient(ports.threadlog)), version)


ADAPTER = SimAdapter("planted-idle-holder-waited-for",
                     "the thread log waits for an idle holder instead of ending it", build)
