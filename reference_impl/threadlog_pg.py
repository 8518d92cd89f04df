"""The thread log on PostgreSQL: the control row is a real row, fencing is a real row lock.

One connection per operation: a host that stalls holds exactly one session, and the database,
not this code, decides when that session has been idle in its transaction for too long
(`idle_in_transaction_session_timeout`) and how long a writer waits for the control row
(`lock_timeout`). Both are set per session, so two stores with different settings behave like
two hosts configured differently against the same database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, NoReturn

import psycopg
from psycopg import errors, sql
from psycopg.rows import TupleRow
from psycopg.types.json import Jsonb

from contract import faultpoints
from contract.threadlog import (
    Assignment,
    LockTimeout,
    LogEntry,
    StaleEpoch,
    ThreadLogError,
    TransactionAborted,
)

__all__ = ["CommitOutcomeUnknown", "PostgresThreadLogStore"]

_SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS thread_control (
        thread_id text PRIMARY KEY,
        owner text NOT NULL,
        epoch bigint NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS thread_log (
        thread_id text,
        seq bigint,
        epoch bigint,
        owner text,
        kind text,
        payload jsonb,
        PRIMARY KEY (thread_id, seq)
    )
    """,
)

_LOCK_CONTROL = "SELECT owner, epoch FROM thread_control WHERE thread_id = %s FOR UPDATE"
_LAST_SEQ = "SELECT COALESCE(MAX(seq), 0) FROM thread_log WHERE thread_id = %s"

# The SELECT ... FOR UPDATE before it waits for (and holds) an existing row; the upsert covers
# a thread that has no row yet, including two hosts creating it at once.
_ASSIGN = """
    INSERT INTO thread_control (thread_id, owner, epoch) VALUES (%s, %s, 1)
    ON CONFLICT (thread_id)
    DO UPDATE SET owner = EXCLUDED.owner, epoch = thread_control.epoch + 1
    RETURNING owner, epoch
"""

# Safe without a sequence or a unique retry: only the holder of the control row inserts, and in
# READ COMMITTED this statement's snapshot is taken after the lock was granted.
_INSERT = """
    INSERT INTO thread_log (thread_id, seq, epoch, owner, kind, payload)
    SELECT %s, COALESCE(MAX(seq), 0) + 1, %s, %s, %s, %s
    FROM thread_log WHERE thread_id = %s
    RETURNING seq, payload
"""

_READ = """
    SELECT thread_id, seq, epoch, owner, kind, payload
    FROM thread_log WHERE thread_id = %s ORDER BY seq
"""

# The session is gone or the server ended the transaction. The idle-in-transaction timeout
# arrives as a FATAL with SQLSTATE 25P03, which psycopg files under InternalError, not
# OperationalError.
_ENDED_BY_SERVER = (psycopg.OperationalError, errors.IdleInTransactionSessionTimeout)


class CommitOutcomeUnknown(ThreadLogError):
    """The connection was lost after an append sent its COMMIT and before the answer came: the
    entry may or may not be committed. Not a `TransactionAborted` (which promises nothing was
    committed): the caller must read the log to know, as `append_once` does on its retry."""


class PostgresThreadLogStore:
    """`ThreadLogStore` on PostgreSQL through psycopg 3 (autocommit off)."""

    def __init__(
        self,
        conninfo: str,
        *,
        idle_in_transaction_timeout_ms: int = 5000,
        lock_timeout_ms: int = 2000,
    ) -> None:
        for name, value in (
            ("idle_in_transaction_timeout_ms", idle_in_transaction_timeout_ms),
            ("lock_timeout_ms", lock_timeout_ms),
        ):
            # 0 would mean "no timeout" to PostgreSQL: the stalled holder blocks forever.
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(
                    f"Expected a positive int but got {name}={value!r} "
                    f"(type={type(value).__name__})"
                )
        self.conninfo = conninfo
        self.idle_in_transaction_timeout_ms = idle_in_transaction_timeout_ms
        self.lock_timeout_ms = lock_timeout_ms

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[psycopg.AsyncConnection[TupleRow]]:
        conn = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=False)
        try:
            await conn.execute(
                sql.SQL("SET idle_in_transaction_session_timeout = {}").format(
                    sql.Literal(self.idle_in_transaction_timeout_ms)
                )
            )
            await conn.execute(
                sql.SQL("SET lock_timeout = {}").format(sql.Literal(self.lock_timeout_ms))
            )
            # With autocommit off the SETs opened a transaction: a rollback would undo them,
            # and leaving it open would make the session idle in transaction before it even
            # asked for the control row.
            await conn.commit()
            yield conn
        finally:
            await conn.close()

    async def ensure_schema(self) -> None:
        """Create the two tables if they do not exist."""
        async with self._session() as conn:
            for statement in _SCHEMA:
                await conn.execute(statement)
            await conn.commit()

    async def assign_thread(self, thread_id: str, owner: str) -> Assignment:
        async with self._session() as conn:
            try:
                await conn.execute(_LOCK_CONTROL, (thread_id,))
                cur = await conn.execute(_ASSIGN, (thread_id, owner))
                row = await cur.fetchone()
                # Under the control row's lock: no append can commit between this read and
                # the new epoch (see Assignment.after_seq).
                cur = await conn.execute(_LAST_SEQ, (thread_id,))
                last = await cur.fetchone()
                await conn.commit()
            except errors.LockNotAvailable as exc:
                _lock_timeout(exc, thread_id, f"assigning it to {owner!r}")
            except _ENDED_BY_SERVER as exc:
                raise TransactionAborted(
                    f"assigning thread {thread_id!r} to {owner!r}: the session ended before "
                    f"the commit ({exc})"
                ) from exc
        assert row is not None and last is not None  # RETURNING / an aggregate: one row
        return Assignment(thread_id, str(row[0]), int(row[1]), int(last[0]))

    async def append(
        self, thread_id: str, epoch: int, owner: str, kind: str, payload: dict[str, Any]
    ) -> LogEntry:
        async with self._session() as conn:
            await faultpoints.reach("threadlog.append.before_lock")
            try:
                cur = await conn.execute(_LOCK_CONTROL, (thread_id,))
                control = await cur.fetchone()
            except errors.LockNotAvailable as exc:
                _lock_timeout(exc, thread_id, f"appending by {owner!r} at epoch {epoch}")
            except _ENDED_BY_SERVER as exc:
                raise TransactionAborted(
                    f"append to thread {thread_id!r} by {owner!r} at epoch {epoch}: the "
                    f"session ended while taking the control row ({exc})"
                ) from exc
            if control is None or control[0] != owner or control[1] != epoch:
                await conn.rollback()
                raise StaleEpoch(
                    thread_id,
                    epoch,
                    owner,
                    None if control is None else int(control[1]),
                    None if control is None else str(control[0]),
                )
            await faultpoints.reach("threadlog.append.locked")
            try:
                cur = await conn.execute(
                    _INSERT, (thread_id, epoch, owner, kind, Jsonb(payload), thread_id)
                )
                row = await cur.fetchone()
            except _ENDED_BY_SERVER as exc:
                # The stalled-holder case: the server ended the idle transaction, so the INSERT
                # fails before any COMMIT is sent.
                raise TransactionAborted(
                    f"append to thread {thread_id!r} by {owner!r} at epoch {epoch}: the "
                    f"database ended the transaction holding the control row; nothing was "
                    f"committed ({exc})"
                ) from exc
            try:
                await conn.commit()
            except errors.IdleInTransactionSessionTimeout as exc:
                raise TransactionAborted(
                    f"append to thread {thread_id!r} by {owner!r} at epoch {epoch}: the "
                    f"database ended the transaction before its COMMIT; nothing was "
                    f"committed ({exc})"
                ) from exc
            except psycopg.OperationalError as exc:
                # The COMMIT was sent and the connection went away before its answer: the
                # server may have committed or not, and this client cannot tell which.
                raise CommitOutcomeUnknown(
                    f"append to thread {thread_id!r} by {owner!r} at epoch {epoch}: the "
                    f"connection was lost during COMMIT; the entry may or may not be in the "
                    f"log ({exc})"
                ) from exc
        assert row is not None  # INSERT ... SELECT over an aggregate yields exactly one row
        return LogEntry(thread_id, int(row[0]), epoch, owner, kind, dict(row[1]))

    async def read(self, thread_id: str) -> list[LogEntry]:
        async with self._session() as conn:
            cur = await conn.execute(_READ, (thread_id,))
            rows = await cur.fetchall()
            await conn.rollback()
        return [
            LogEntry(str(t), int(seq), int(ep), str(own), str(kind), dict(payload))
            for t, seq, ep, own, kind, payload in rows
        ]

    async def current(self, thread_id: str) -> Assignment | None:
        async with self._session() as conn:
            cur = await conn.execute(
                "SELECT owner, epoch FROM thread_control WHERE thread_id = %s", (thread_id,)
            )
            row = await cur.fetchone()
            await conn.rollback()
        return None if row is None else Assignment(thread_id, str(row[0]), int(row[1]))


def _lock_timeout(exc: errors.LockNotAvailable, thread_id: str, doing: str) -> NoReturn:
    raise LockTimeout(
        f"control row of thread {thread_id!r} is held by another transaction; gave up "
        f"{doing} after lock_timeout ({exc})"
    ) from exc
