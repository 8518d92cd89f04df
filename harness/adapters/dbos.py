"""The reference implementation (and its naive variant) on DBOS, with PostgreSQL.

`open(ctx)` starts, all on 127.0.0.1: PostgreSQL (DBOS's system database `dbos_sys`, and the
thread log in `postgres`), Toxiproxy (between the workers and the thread log, link "pg", and
between the workers and the world, link "world"), the world server, and per application
version `ctx.hosts` DBOS worker processes (`python -m reference_impl.dbos.worker`, hosts
`depN.hI`), each its own process group and its own DBOS executor. DBOS's system database is
the engine's storage: the workers reach it directly, as Restate's workers do not see
Restate's log through Toxiproxy.

What DBOS decides stays DBOS's: a redeploy is a new application version (its processes
register it, and DBOS gives new work, any enqueue that names no version, to the latest);
a workflow stays with the version that started it, and only a process of that version can
run or recover it; crash = SIGKILL of a host's process group (the same host restarts and
DBOS recovers its PENDING workflows), pause = SIGSTOP. Pinning is read from DBOS's own
state through `DbosObserver` (`workflow_status`: the version each workflow is pinned to;
`operation_outputs` and `notifications`: a workflow waiting in `recv` with no message to
read is "suspended"); the operator stops a superseded version's processes once DBOS shows
nothing pinned to it.

Time is virtual as on every real engine (`harness.adapters.engine`, whose operator, clock,
fault holds, fault points and network faults this runtime reuses): the workers keep
their timers with the harness's `TimerTable` (`DURABLE_CHAOS_TIMERS_URL`); a sleep is a
message the harness sends to the waiting workflow's inbox (`DBOSClient.send`) once the
clock passes its deadline, a delayed send is an enqueue it makes then, with the timer's id
as the workflow id (idempotent). The clock jumps when DBOS is quiescent: no workflow of the
app enqueued or running (a workflow in `recv` with an unread message is running), no
request to the world in flight, nothing done for `settle` real seconds.

A host that stops answering (paused or crashed) has its workflows taken over by another live
host of the same version after `takeover_after` real seconds, as Restate's keep-alive lets
another host of the deployment take the attempt. Open-source DBOS has no liveness check of
its executors; what declares one dead is a recovery service (DBOS Conductor does it, or an
operator with `DBOS.recover_pending_workflows`). The harness plays that service, with DBOS's
own call: the dead executor's PENDING workflows of that version go back to their queue
(`reenqueue_for_recovery`) and a live process of the version runs them from their recorded
steps. A paused host that wakes up then finds its workflows owned by another executor: DBOS
refuses its writes to the workflow (`owner_xid`), and the thread log's epoch refuses its
appends (recorded as `dbos.recovered`).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, cast

from harness.adapters.base import RunContext
from harness.adapters.engine import (
    REPO_ROOT,
    Deployment,
    EngineAdapter,
    EngineRuntime,
    Hold,
    Variant,
)
from harness.components.net import wait_until
from harness.components.procs import ProcessGroup
from harness.components.stack import ComponentStack, component_stack
from harness.components.workers import WorkerProcess
from harness.errors import UsageError
from harness.observers.dbos import DbosObserver
from harness.world_server import Timer
from reference_impl.dbos.names import (
    APP_NAME,
    INBOX,
    OBJECTS_QUEUE,
    SERVICES_QUEUE,
    WORKFLOW,
    inbox_message,
    partition,
    workflow_of,
)

__all__ = ["DbosRuntime", "DbosWorker", "NaiveDbosAdapter", "ReferenceDbosAdapter"]

_SYSTEM_DB = "dbos_sys"
# Where DBOS's own recovery puts a recovered workflow that came from no queue.
_RECOVERY_QUEUE = "_dbos_internal_queue"
# Handlers the harness invokes on a virtual object (all exclusive); a delayed send from the
# app (PendingToolCall.expire) is one too.
_OBJECT_SERVICES = frozenset({"Controller", "PendingToolCall"})


class DbosWorker(WorkerProcess):
    """A DBOS worker process (`python -m reference_impl.dbos.worker`): ready once it wrote
    its ready file, i.e. DBOS is launched and its queues are served."""

    def __init__(self, *, ready_file: Path, **kwargs: Any) -> None:
        super().__init__("reference_impl.dbos.worker:main", **kwargs)
        self.ready_file = ready_file
        self.env["DURABLE_CHAOS_READY_FILE"] = str(ready_file)

    def argv(self) -> list[str]:
        return [self.python, "-m", "reference_impl.dbos.worker"]

    def spawn(self) -> WorkerProcess:
        if not self.alive:
            self.ready_file.unlink(missing_ok=True)
            self.port = self.port or 1  # no port: readiness is the ready file
        return super().spawn()

    def _wait_ready(self, group: ProcessGroup) -> None:
        def ready() -> bool | None:
            if not group.alive:
                raise RuntimeError(f"DBOS worker {self.name} exited with {group.returncode} "
                                   f"before it was ready:\n{group.log_tail()}")
            return True if self.ready_file.exists() else None

        wait_until(ready, timeout=self.startup_timeout, what=f"DBOS worker {self.name}",
                   interval=0.05)


@dataclass
class DbosRuntime(EngineRuntime):
    """One run on DBOS. Capabilities: background, cancel, gc-pause, crash, deploy, arm,
    network."""

    engine_name: ClassVar[str] = "dbos"
    work: ClassVar[str] = "DBOS workflows"
    real_time_modules: ClassVar[tuple[str, ...]] = (
        "harness.adapters.dbos", "harness.observers", "dbos", "sqlalchemy")

    # Real seconds a host may stop answering before another host of its version takes over
    # its workflows (Restate's keep-alive on the Restate path is 1 s).
    takeover_after: float = 1.0

    def _component_stack(self) -> ComponentStack:
        stack = component_stack()
        if stack.name != "processes":
            raise UsageError("the DBOS adapters run their components as processes: drop "
                             "--components containers for reference-dbos / naive-dbos")
        return stack

    def _init_engine(self) -> None:
        self._taken_over: set[int] = set()
        self._ids = itertools.count(1)
        self._busy_count = 0
        self.client: Any = None
        self.observer: DbosObserver | None = None

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def dbos_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.pg.port}/{_SYSTEM_DB}"

    def _start_engine(self) -> None:
        # DBOS's engine is its system database, in the run's PostgreSQL.
        import psycopg

        with psycopg.connect(self.pg.conninfo, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {_SYSTEM_DB}")

    def _open_engine(self, started: float) -> None:
        from dbos import DBOSClient

        self.deploy("v1")
        self.client = DBOSClient(system_database_url=self.dbos_url,
                                 application_name=APP_NAME)
        self.history.add("dbos.started", data={
            "seconds": round(time.monotonic() - started, 3), "database": self.dbos_url,
            "logs": str(self.log_dir)})

    def _stop_engine(self) -> None:
        if self.observer is not None:
            self.observer.close_engine()
        if self.client is not None:
            self.client.destroy()
            self.client = None

    def _components(self) -> tuple[ProcessGroup | None, ...]:
        return (self.toxiproxy.process, self.pg.process)

    # -- driving --------------------------------------------------------------------------

    def _invoke(self, service: str, handler: str, key: str | None, arg: Any,
                workflow_id: str | None = None) -> None:
        """Enqueue one handler invocation, for the latest version (no version named)."""
        options: dict[str, Any] = {
            "workflow_name": WORKFLOW, "queue_name": SERVICES_QUEUE,
            "workflow_id": workflow_id or f"harness-{service}.{handler}-{next(self._ids)}",
        }
        if key is not None and service in _OBJECT_SERVICES:
            options["queue_name"] = OBJECTS_QUEUE
            options["queue_partition_key"] = partition(service, key)
        self._last_action = time.monotonic()
        self.client.enqueue(cast(Any, options), service, handler, key, arg)

    # -- the clock --------------------------------------------------------------------------

    def _fire(self, timer: Timer) -> None:
        if timer.kind == "sleep":
            assert timer.awakeable is not None
            self.client.send(workflow_of(timer.awakeable), inbox_message(timer.awakeable),
                             topic=INBOX, idempotency_key=timer.id)
        else:
            assert timer.service is not None and timer.handler is not None
            # The timer's id is the workflow id: a send fired twice runs once.
            self._invoke(timer.service, timer.handler, timer.key, timer.arg,
                         workflow_id=timer.id)

    def _engine_quiescent(self, rows: list[dict[str, Any]]) -> bool:
        # Enqueued, running, or in `recv` with a message to read: it goes on by itself.
        return not any(r["status"] in ("pending", "running") for r in rows)

    def _stalled_on(self) -> list[dict[str, Any]]:
        return [r for r in self._rows.values() if r.get("status") == "running"]

    def _not_quiet(self) -> dict[str, Any]:
        return {"left": [r for r in self._rows.values() if r["status"] != "suspended"][:20]}

    def _observe_invocations(self) -> list[dict[str, Any]]:
        """Poll DBOS's own state (`DbosObserver`): it records invocation.* and deployment.*;
        returns every workflow not completed (for `_quiescent`)."""
        observer = self.observer
        if observer is None:
            return []
        if not observer.poll():
            self._busy_count += 1
            return [{"id": "?", "status": "running"}]  # unknown: not quiescent
        rows = [{"id": i.id, "status": i.status, "deployment": i.deployment}
                for i in observer.invocations().values() if i.status != "completed"]
        self._rows = {str(r["id"]): r for r in rows}
        return rows

    def _drain(self) -> None:
        observer = self.observer
        if observer is None:
            return
        current = observer.current()
        for dep in self._deployments:
            if dep.drained or current is None or dep.version == current:
                continue
            if not dep.superseded:
                dep.superseded = True
            count = len(observer.pinned_to(dep.version))
            if count != dep.last_count:
                dep.last_count = count
                self.history.add("dbos.pinned", deployment=dep.id,
                                 data={"deployment": dep.id, "count": count,
                                       "version": dep.version})
            if count == 0 and not self._held(dep):
                dep.drained = True
                self.history.add("deployment.retired", deployment=dep.id,
                                 data={"version": dep.version, "source": "workflow_status"})
                self._stop_hosts(dep)

    # -- takeover ---------------------------------------------------------------------------

    def _tick(self) -> bool:
        self._take_over()
        return super()._tick()

    def _take_over(self) -> None:
        """Declare the executors of hosts that stopped answering dead (see the module
        docstring): another live host of the same version recovers their workflows."""
        real = time.monotonic()
        with self._lock:
            due: list[Hold] = [h for h in self._holds if id(h) not in self._taken_over
                               and real - h.started >= self.takeover_after]
            held = {h.host.name for h in self._holds}
        for hold in due:
            dead, dep = hold.host, hold.host.deployment
            live = [h for h in dep.hosts if h.name not in held and h.worker.alive]
            self._taken_over.add(id(hold))
            if not live or self.client is None:
                continue
            sys_db = self.client._sys_db
            recovered = []
            for pending in sys_db.get_pending_workflows(dead.name, dep.version):
                if sys_db.reenqueue_for_recovery(pending.workflow_id, [dead.name],
                                                 _RECOVERY_QUEUE):
                    recovered.append(pending.workflow_id)
            self._last_action = time.monotonic()
            self.history.add("dbos.recovered", host=dead.name, deployment=dep.id,
                             data={"executor": dead.name, "version": dep.version,
                                   "workflows": recovered, "live": [h.name for h in live]})

    # -- capabilities: deploy -------------------------------------------------------------

    def deploy(self, version: str) -> str:
        index = len(self._deployments) + 1
        version = version or f"v{index}"
        if any(d.version == version for d in self._deployments):
            raise UsageError(f"version {version!r} is already deployed: give each deploy step "
                             "a new version")
        dep = Deployment(version, index, id=version)
        self._deployments.append(dep)

        def worker(name: str, env: dict[str, str]) -> WorkerProcess:
            env["DURABLE_CHAOS_DBOS_URL"] = self.dbos_url
            return DbosWorker(ready_file=self.log_dir / f"{name}.ready", env=env,
                              name=f"worker-{name}", pythonpath=[REPO_ROOT],
                              cwd=REPO_ROOT, log_dir=self.log_dir)

        self._start_hosts(dep, worker)
        self.history.add("deployment.registered", deployment=dep.id, host=dep.hosts[0].name,
                         data={"version": version, "hosts": [h.name for h in dep.hosts]})
        if self.observer is None:
            # Polled by the operator itself (no thread of its own), so a record is never
            # later than the clock's next jump.
            self.observer = DbosObserver(self.history, database_url=self.dbos_url,
                                         waits=True)
        # Released once DBOS lists the version as the newest (it then takes new work).
        observer = self.observer

        def current() -> bool | None:
            observer.poll()
            return True if observer.current() == version else None

        wait_until(current, timeout=30, what=f"DBOS version {version}", interval=0.05)
        self._tick()
        return dep.id


@dataclass(frozen=True)
class ReferenceDbosAdapter(EngineAdapter):
    """The reference implementation on DBOS with PostgreSQL (virtual time)."""

    name: str = "reference-dbos"
    description: str = ("the reference implementation on DBOS, with PostgreSQL and Toxiproxy "
                        "(virtual time)")

    def _preflight_engine(self) -> None:
        """The `dbos` package is installed."""
        try:
            import dbos  # noqa: F401
        except ModuleNotFoundError:
            raise UsageError("the DBOS adapters need the dbos package: pip install "
                             "'durable-chaos[dbos]'") from None

    def open(self, ctx: RunContext) -> DbosRuntime:
        return DbosRuntime(ctx, self.variant, self.config)


@dataclass(frozen=True)
class NaiveDbosAdapter(ReferenceDbosAdapter):
    """The naive 'before' design (recv up to max_wait in the workflow) on DBOS."""

    name: str = "naive-dbos"
    description: str = ("the naive 'before' design (in-call recv up to max_wait, no "
                        "hand-off) on DBOS (virtual time)")
    variant: Variant = "naive"
