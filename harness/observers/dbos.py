"""DBOS's own state as the checkers' records: `workflow_status` and `application_versions`.

DBOS keeps everything in its system database, so each poll is two queries:

- `workflow_status`: a workflow is pinned to its `application_version` (a relaunched process
  recovers only the PENDING workflows of its own version). ENQUEUED is `pending` (no
  version yet, unless the enqueue pinned one); PENDING is `running`: DBOS has no suspension,
  a workflow waiting in `DBOS.recv` or `DBOS.sleep` holds a thread of a process of its
  version, so it keeps that version alive exactly like a running one;
  MAX_RECOVERY_ATTEMPTS_EXCEEDED is `paused`; SUCCESS, ERROR and CANCELLED are `completed`;
- `application_versions`: each version a process registered; the newest is current (DBOS
  gives unpinned work to it).

By default (`waits=True`, so that a waiting workflow counts as it does on Temporal), a
PENDING workflow waiting in `DBOS.recv` (or `DBOS.sleep`) with no message
to read is `suspended`, read from the same database: its latest step is the wait's timeout
(`DBOS.sleep` in `operation_outputs`, with no `DBOS.recv` result before it) and no unread
message waits for it in `notifications`. DBOS keeps such a workflow in a process of its
version all the same; what the status adds is when it waits on something outside (a person,
a timer) rather than works, which is what the pinning bound measures.

SQLite (`sqlite:///PATH`) is read with the standard library; PostgreSQL (`postgresql://...`)
with psycopg (`durable-chaos[postgres]`).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from harness.history import History
from harness.observers.base import (
    DeploymentState,
    EngineObserver,
    InvocationState,
    Snapshot,
    Status,
    TurnEnd,
    TurnOf,
)
from harness.world import World

__all__ = ["DbosObserver"]

_STATUS: dict[str, Status] = {
    "ENQUEUED": "pending", "DELAYED": "pending", "PENDING": "running",
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "paused",
    "SUCCESS": "completed", "ERROR": "completed", "CANCELLED": "completed",
}
_WORKFLOWS = ("SELECT workflow_uuid, status, name, application_version FROM {schema}"
              "workflow_status ORDER BY created_at, workflow_uuid")
# PENDING workflows waiting in recv/sleep with nothing to read (see the module docstring).
_WAITING = ("SELECT s.workflow_uuid FROM {schema}operation_outputs s JOIN {schema}"
            "workflow_status w ON w.workflow_uuid = s.workflow_uuid WHERE w.status = 'PENDING' "
            "AND s.function_name = 'DBOS.sleep' AND NOT EXISTS (SELECT 1 FROM {schema}"
            "operation_outputs r WHERE r.workflow_uuid = s.workflow_uuid AND "
            "(r.function_id > s.function_id OR (r.function_id = s.function_id - 1 AND "
            "r.function_name = 'DBOS.recv'))) AND NOT EXISTS (SELECT 1 FROM {schema}"
            "notifications n WHERE n.destination_uuid = s.workflow_uuid AND NOT n.consumed)")
_VERSIONS = ("SELECT version_name, version_timestamp FROM {schema}application_versions "
             "ORDER BY version_timestamp, version_name")


class DbosObserver(EngineObserver):
    """Observe the DBOS system database at `database_url` (the app's `system_database_url`)."""

    def __init__(self, history: History, *, database_url: str, schema: str = "dbos",
                 interval: float = 0.1, turn_of: TurnOf | None = None,
                 world: World | None = None, waits: bool = True,
                 on_turn_end: TurnEnd | None = None) -> None:
        super().__init__(history, interval=interval, turn_of=turn_of, world=world,
                         on_turn_end=on_turn_end)
        self.database_url = database_url
        self.waits = waits
        self.sqlite = database_url.startswith("sqlite:///")
        # SQLite has no schemas: DBOS puts its tables in the main database.
        self.schema = "" if self.sqlite else f"{schema}."
        self._conn: Any = None

    def _rows(self, sql: str) -> list[tuple[Any, ...]]:
        if self._conn is None:
            if self.sqlite:
                path = self.database_url.removeprefix("sqlite:///")
                self._conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True,
                                             check_same_thread=False)
            else:
                import psycopg

                self._conn = psycopg.connect(self.database_url, autocommit=True)
        return list(self._conn.execute(sql.format(schema=self.schema)).fetchall())

    def snapshot(self) -> Snapshot:
        try:
            workflows = self._rows(_WORKFLOWS)
            versions = self._rows(_VERSIONS)
            waiting = {str(r[0]) for r in self._rows(_WAITING)} if self.waits else set()
        except Exception as exc:
            if "no such table" in str(exc) or "does not exist" in str(exc):
                return Snapshot()  # no DBOS process has created its tables yet
            self.close_engine()  # reconnect next poll
            raise
        invocations = tuple(
            InvocationState(str(wf_id), "suspended" if str(wf_id) in waiting
                            else _STATUS.get(str(status), "running"),
                            str(version) if version else None, target=name,
                            detail={"SUCCESS": "succeeded"}.get(str(status),
                                                                 str(status).lower()))
            for wf_id, status, name, version in workflows
        )
        latest = versions[-1][0] if versions else None
        deployments = tuple(DeploymentState(str(v), str(v), current=v == latest)
                            for v, _ in versions)
        return Snapshot(invocations, deployments)

    def close_engine(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None
