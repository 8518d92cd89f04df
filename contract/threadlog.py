"""The thread log's contract: the store protocol, its values and its errors.

A runtime keeps each thread's log behind a `ThreadLogStore`; the harness only names the type
(the world hands a store to the runtime through `contract.ports.Ports`) and reads the committed
entries at the end of a run. The stores themselves (in memory, PostgreSQL) belong to the
runtime: `reference_impl.threadlog` and `reference_impl.threadlog_pg`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Protocol

__all__ = [
    "REJECTIONS",
    "Assignment",
    "LockTimeout",
    "LogEntry",
    "StaleEpoch",
    "ThreadLogError",
    "ThreadLogStore",
    "TransactionAborted",
]


@dataclass(frozen=True)
class LogEntry:
    """One committed entry of a thread's log; `seq` runs 1, 2, 3... without gaps."""

    thread_id: str
    seq: int
    epoch: int
    owner: str
    kind: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class Assignment:
    """The control row of a thread: who owns it, since which epoch.

    `after_seq` is the last seq committed when this assignment was made (0 for an empty log),
    read under the same lock: an append of an older epoch at or below it was committed before
    this owner took over, whenever its report reaches an observer. Observers on a real engine
    hear two processes in whatever order their messages arrive; the store's order is this.
    """

    thread_id: str
    owner: str
    epoch: int
    after_seq: int = 0


class ThreadLogError(Exception):
    """Base of every error of the thread log."""


class StaleEpoch(ThreadLogError):
    """An append carried an epoch (or owner) that is not the thread's current one.

    The thread was reassigned after the writer took ownership: the writer must stop writing
    and let the current owner continue from the committed log.
    """

    def __init__(
        self,
        thread_id: str,
        epoch: int,
        owner: str,
        current_epoch: int | None,
        current_owner: str | None,
    ) -> None:
        self.thread_id = thread_id
        self.epoch = epoch
        self.owner = owner
        self.current_epoch = current_epoch
        self.current_owner = current_owner
        if current_epoch is None:
            now = "the thread has never been assigned"
        else:
            now = f"the current epoch is {current_epoch}, owned by {current_owner!r}"
        super().__init__(
            f"stale append to thread {thread_id!r} by {owner!r} with epoch {epoch}: {now}"
        )


class LockTimeout(ThreadLogError):
    """The control row is held by another transaction; retry later.

    A store that knows it says since when the holder has held the row (`held_since`, in the
    store's clock) and after how long idle the database ends such a transaction
    (`idle_timeout`, seconds): a holder past that bound should have been ended, not waited
    for (a paused host would block its session for as long as it is away)."""

    def __init__(self, message: str, *, held_since: float | None = None,
                 idle_timeout: float | None = None) -> None:
        super().__init__(message)
        self.held_since = held_since
        self.idle_timeout = idle_timeout


class TransactionAborted(ThreadLogError):
    """The database ended the transaction (e.g. idle in transaction too long); nothing of it
    was committed."""


# The rejections a store raises, by name: the reason of a `threadlog.rejected` report, and what
# an engine names an attempt that failed on one.
REJECTIONS: Final = (StaleEpoch.__name__, TransactionAborted.__name__, LockTimeout.__name__)


class ThreadLogStore(Protocol):
    """Where thread logs and their control rows live."""

    async def assign_thread(self, thread_id: str, owner: str) -> Assignment:
        """Give the thread to `owner` at the next epoch (1 for a thread never assigned)."""
        ...

    async def append(
        self, thread_id: str, epoch: int, owner: str, kind: str, payload: dict[str, Any]
    ) -> LogEntry:
        """Append one entry if (`owner`, `epoch`) is still the thread's control row.

        Raises StaleEpoch if it is not, LockTimeout if another transaction holds the row, and
        TransactionAborted if the database ended this transaction before its commit.
        """
        ...

    async def read(self, thread_id: str) -> list[LogEntry]:
        """The committed entries of the thread, by seq."""
        ...

    async def current(self, thread_id: str) -> Assignment | None:
        """The thread's control row, or None if it was never assigned."""
        ...
