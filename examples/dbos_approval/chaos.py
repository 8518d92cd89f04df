"""durable-chaos adapter for the DBOS approval agent: it drives only the application (a server
process per application version, a workflow enqueued per message, a DBOS message per answer);
`DbosObserver` records what DBOS does, `WorkerHosts` runs the servers and their faults.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbos import DBOSClient

from harness.adapters.base import RunContext
from harness.checkers.base import CheckConfig
from harness.components.net import wait_until
from harness.components.procs import ProcessGroup
from harness.observers import DbosObserver, WorkerHosts
from harness.observers.hosts import POINTS
from harness.scaling import ScaledClock, TimeScale
from harness.world_server import WorldServer

from .settings import Settings, current

ROOT = Path(__file__).resolve().parents[2]


class ApprovalRuntime:
    """Redeployable, Crashable, Pausable, FaultPoints, Cancellable; calls the world's model."""

    world_endpoints, points = ("provider",), tuple(POINTS)

    def __init__(self, ctx: RunContext, s: Settings) -> None:
        self.s, self.clock = s, ScaledClock(TimeScale(s.scale))
        self.server = WorldServer(ctx.history, now=self.now).start()
        self.world = self.server.world
        self.scratch = tempfile.mkdtemp(prefix="dbos-approval-")  # database and logs
        self.db = f"sqlite:///{self.scratch}/system.sqlite"
        self.turns: dict[str, tuple[str, str, str]] = {}  # workflow id -> session, turn, msg
        self.observer = DbosObserver(ctx.history, database_url=self.db, world=self.world,
                                     turn_of=lambda inv: self.turns.get(inv.id))
        self.hosts = WorkerHosts(ctx.history, now=self.now, start=self._server,
                                 downtime=s.crash_downtime, observer=self.observer)
        self.observer.start()
        self.deploy("v1")
        self.client = DBOSClient(system_database_url=self.db)
        self.clock.start()  # schedule time starts once the runtime is up
        ctx.history.bind_clock(self.now)

    def now(self) -> float:
        return self.clock.now()

    def advance(self, until: float) -> None:
        self.clock.sleep_until(until, tick=self.hosts.tick)

    def _server(self, version: str) -> ProcessGroup:
        return ProcessGroup([sys.executable, "-m", "examples.dbos_approval.agent"],
                            name=f"dbos-{version}", cwd=ROOT, log_dir=self.scratch,
                            env={"WORLD_URL": self.server.url, "PYTHONPATH": str(ROOT),
                                 "APP_VERSION": version, "DBOS_SYSTEM_DATABASE_URL": self.db})

    def deploy(self, version: str) -> str:
        version = version or f"v{len(self.hosts.hosts) + 1}"
        self.hosts.add(version)
        # Released once DBOS lists the version as the newest (it then takes new work).
        wait_until(lambda: self.observer.current() == version or None, timeout=60,
                   what=f"DBOS server of {version}", interval=0.1)
        return version

    def crash_host(self, host: str) -> str:
        return self.hosts.crash(self.hosts.select(host))

    def pause_host(self, host: str, duration: float) -> str:
        return self.hosts.pause(self.hosts.select(host), duration)

    def arm(self, point: str, action: str, duration: float, times: int) -> None:
        self.hosts.arm(point, action, duration, times)

    def send_message(self, session: str, message: dict[str, Any]) -> None:
        turn = f"{session}.turn{sum(s == session for s, _, _ in self.turns.values()) + 1}"
        self.turns[turn] = (session, turn, str(message["message_id"]))
        self.client.enqueue({"queue_name": "turns", "workflow_name": "approval_turn",
                             "workflow_id": turn}, session, turn, message["text"],
                            message["user"], message["plan"], self.s.real(self.s.max_wait))
        self.observer.wait_polls(2)  # turn.started before its card

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        self.client.send(self.world.state.cards[tool_call].turn, decision, topic="answer")

    def cancel(self, session: str) -> None:
        for turn in [t for t, (s, _, _) in self.turns.items() if s == session]:
            self.client.cancel_workflow(turn)

    def finish(self) -> None:
        self.observer.wait_polls(2)

    def close(self) -> None:
        self.observer.stop()
        self.hosts.close()
        if hasattr(self, "client"):
            self.client.destroy()
        self.server.stop()
        shutil.rmtree(self.scratch, ignore_errors=True)


@dataclass(frozen=True)
class ApprovalAdapter:
    settings: Settings = field(default_factory=current)
    name: str = "dbos-approval"
    description: str = "naive approval agent on DBOS (SQLite system database)"
    engine: str = "real"

    def check_config(self) -> CheckConfig:
        s = self.settings  # the pinning bound is the checkers' hand_off_after
        return CheckConfig(s.pinning_bound, s.max_wait, s.tolerance, liveness_bound=s.max_wait)

    def open(self, ctx: RunContext) -> ApprovalRuntime:
        return ApprovalRuntime(ctx, self.settings)


adapter = ApprovalAdapter()
