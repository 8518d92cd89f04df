"""Helpers for the thread-log tests: a PostgreSQL server fixture and a fault-point stall.

Import the fixtures into a test module by their function names, e.g.
`from pg_fixtures import pg_conninfo_fixture, pg_server_fixture  # noqa: F401`, and request them
as `pg_server` / `pg_conninfo`.

Every module that imports the session fixture gets its own copy of it (pytest registers
fixtures per module), so the server itself is shared through a reference count: one server per
test process, stopped when the last module's session fixture is torn down.

Without PostgreSQL binaries the tests skip with the reason, except in CI (`CI=true`), where a
missing component must fail loudly instead of turning the suite green by skipping.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Iterator
from types import TracebackType
from typing import NoReturn

import pytest

from contract import faultpoints
from harness.components.postgres import PostgresServer, PostgresUnavailable


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail under CI=true, because a real component is missing."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and PostgreSQL is required: {reason}", pytrace=False)
    pytest.skip(reason)


class _Shared:
    server: PostgresServer | None = None
    users = 0
    error: str | None = None


def _acquire() -> PostgresServer:
    if _Shared.error is not None:
        unavailable(_Shared.error)
    if _Shared.server is None:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            _Shared.error = "psycopg is not installed; pip install -e '.[postgres]'"
            unavailable(_Shared.error)
        server = PostgresServer()
        try:
            server.start()
        except PostgresUnavailable as exc:
            _Shared.error = str(exc)
            unavailable(_Shared.error)
        _Shared.server = server
    _Shared.users += 1
    return _Shared.server


def _release() -> None:
    _Shared.users -= 1
    if _Shared.users == 0 and _Shared.server is not None:
        server, _Shared.server = _Shared.server, None
        server.stop()


@pytest.fixture(scope="session", name="pg_server")
def pg_server_fixture() -> Iterator[PostgresServer]:
    server = _acquire()
    try:
        yield server
    finally:
        _release()


@pytest.fixture(name="pg_conninfo")
def pg_conninfo_fixture(pg_server: PostgresServer) -> str:
    """The server's conninfo, with the thread-log tables dropped and no other session left."""
    import psycopg

    with psycopg.connect(pg_server.conninfo, autocommit=True) as conn:
        # A failed test may leave a stalled session holding a control row; it must not leak
        # its lock (or its rows) into the next test.
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        conn.execute("DROP TABLE IF EXISTS thread_log, thread_control")
    return pg_server.conninfo


class Stall:
    """A fault-point hook that stops the first append reaching `point` until released.

    Used as a context manager around the part of a story where the stall is armed; leaving it
    restores the previous hook and releases a stalled append, so a failing test cannot leave a
    task blocked forever.
    """

    def __init__(self, point: str) -> None:
        if point not in faultpoints.POINTS:
            raise ValueError(f"unknown fault point {point!r}")
        self.point = point
        self.reached = asyncio.Event()
        self.release = asyncio.Event()
        self._armed = True
        self._previous: faultpoints.Hook | None = None

    def _hook(self, name: str) -> Awaitable[None] | None:
        if name != self.point or not self._armed:
            return None
        self._armed = False
        return self._wait()

    async def _wait(self) -> None:
        self.reached.set()
        await self.release.wait()

    def __enter__(self) -> Stall:
        self._previous = faultpoints.install(self._hook)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        faultpoints.install(self._previous)
        self.release.set()
