"""durable-chaos adapter for the DBOS approval agent, on the adapter kit (`harness.kit`): a
server process per application version, a workflow enqueued per message, a DBOS message per
answer; the kit runs the world, the observer, the servers and their faults, and the clock.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from dbos import DBOSClient

from harness.kit import KitAdapter, KitRuntime, Turn
from harness.observers import DbosObserver

from .settings import TIMING


class ApprovalRuntime(KitRuntime):
    app_dir = Path(__file__).resolve().parents[2]
    client: DBOSClient | None = None

    def observe(self, **wiring: Any) -> DbosObserver:
        self.db = f"sqlite:///{self.scratch}/system.sqlite"
        return DbosObserver(self.history, database_url=self.db, **wiring)

    def worker(self, version: str) -> list[str]:
        return [sys.executable, "-m", "examples.dbos_approval.agent"]

    def worker_env(self, version: str) -> dict[str, str]:
        return super().worker_env(version) | {"DBOS_SYSTEM_DATABASE_URL": self.db}

    def dbos(self) -> DBOSClient:
        self.client = self.client or DBOSClient(system_database_url=self.db)
        return self.client

    def send(self, turn: Turn) -> None:
        self.dbos().enqueue({"queue_name": "turns", "workflow_name": "approval_turn",
                             "workflow_id": turn.id}, turn.session, turn.id, turn.text,
                            turn.user, list(turn.plan), turn.max_wait)

    def reply(self, turn: Turn, tool_call: str, decision: str) -> None:
        self.dbos().send(turn.id, decision, topic="answer")

    def cancel(self, session: str) -> None:
        for turn in self.turns_of(session):
            self.dbos().cancel_workflow(turn.id)

    def close(self) -> None:
        if self.client is not None:
            self.client.destroy()
        super().close()


adapter = KitAdapter("dbos-approval", ApprovalRuntime, TIMING,
                     "naive approval agent on DBOS (SQLite system database)")
