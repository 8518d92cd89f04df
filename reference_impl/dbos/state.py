"""Virtual-object state for the DBOS binding: one row per (service, key, name) in PostgreSQL.

DBOS has workflows, not virtual objects; the binding keeps an object's state in a table of
DBOS's own system database (the engine's storage, not the application's thread log), read
once per invocation and written once when it ends, each in a DBOS step. Only one exclusive
handler of a key runs at a time (the partitioned queue), so a write never races another.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from reference_impl.dbos.names import STATE_TABLE

__all__ = ["StateStore"]

_SCHEMA = (f"CREATE TABLE IF NOT EXISTS {STATE_TABLE} (service text NOT NULL, "
           "key text NOT NULL, name text NOT NULL, value jsonb NOT NULL, "
           "PRIMARY KEY (service, key, name))")


class StateStore:
    """State at `conninfo` (a libpq URL or conninfo string)."""

    def __init__(self, conninfo: str, schema: str = "dbos") -> None:
        self.conninfo = conninfo
        self.schema = f"{schema}."
        self._lock = threading.Lock()
        self._conn: Any = None

    def _connection(self) -> Any:
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10)
        return self._conn

    def _execute(self, fn: Any) -> Any:
        with self._lock:
            try:
                return fn(self._connection())
            except Exception:
                # A broken connection is replaced at the next call (the step is retried).
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                raise

    def ensure_schema(self) -> None:
        def create(conn: Any) -> None:
            # Hosts start together: CREATE ... IF NOT EXISTS alone races (two creators of
            # the same row type), so creators take turns under a transaction-level lock.
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (STATE_TABLE,))
                conn.execute(_SCHEMA)

        self._execute(create)

    def runs_on(self, workflow_id: str, executor: str) -> bool:
        """Whether DBOS still has `workflow_id` PENDING on `executor` (a recovery moves a
        workflow to another executor when it dequeues it)."""

        def check(conn: Any) -> bool:
            row = conn.execute(f"SELECT status, executor_id FROM {self.schema}workflow_status "
                               "WHERE workflow_uuid = %s", (workflow_id,)).fetchone()
            return row is not None and row[0] == "PENDING" and row[1] == executor

        result: bool = self._execute(check)
        return result

    def read(self, service: str, key: str) -> dict[str, Any]:
        def read(conn: Any) -> dict[str, Any]:
            rows = conn.execute(f"SELECT name, value FROM {STATE_TABLE} "
                                "WHERE service = %s AND key = %s", (service, key)).fetchall()
            return {str(name): value for name, value in rows}

        result: dict[str, Any] = self._execute(read)
        return result

    def write(self, service: str, key: str, changes: dict[str, Any]) -> None:
        """Set each name to its value; a value of None deletes the name. One transaction."""

        def write(conn: Any) -> None:
            with conn.transaction():
                for name, value in changes.items():
                    if value is None:
                        conn.execute(f"DELETE FROM {STATE_TABLE} WHERE service = %s AND "
                                     "key = %s AND name = %s", (service, key, name))
                    else:
                        conn.execute(
                            f"INSERT INTO {STATE_TABLE} (service, key, name, value) "
                            "VALUES (%s, %s, %s, %s::jsonb) ON CONFLICT (service, key, name) "
                            "DO UPDATE SET value = EXCLUDED.value",
                            (service, key, name, json.dumps(value)))

        self._execute(write)
