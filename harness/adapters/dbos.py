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

Time is virtual exactly as on the Restate path (`harness.adapters.restate`, whose operator,
clock, fault holds, fault points and network faults this runtime reuses): the workers keep
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

import asyncio
import contextlib
import itertools
import json
import os
import random
import shutil
import tempfile
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from harness.adapters.base import RunContext
from harness.adapters.restate import (
    _LOG_PREFIX,
    _REPO_ROOT,
    KEEP_LOGS_ENV,
    RestateRuntime,
    Variant,
    _Deployment,
    _Hold,
    _Host,
    _real_clock,
)
from harness.checkers.base import CheckConfig
from harness.clock import AutojumpClock
from harness.components.net import wait_until
from harness.components.procs import ProcessGroup, stop_groups, sweep_stale
from harness.components.stack import component_stack
from harness.components.workers import WorkerProcess
from harness.errors import UsageError
from harness.observers.dbos import DbosObserver
from harness.world_server import Timer, TimerTable, WorldServer
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
from reference_impl.ports import Config
from reference_impl.threadlog_pg import PostgresThreadLogStore

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
class DbosRuntime(RestateRuntime):
    """One run on DBOS. Capabilities: gc-pause, crash, deploy, arm, network."""

    # Real seconds a host may stop answering before another host of its version takes over
    # its workflows (Restate's keep-alive on the Restate path is 1 s).
    takeover_after: float = 1.0

    def __post_init__(self) -> None:
        self._hold_started: dict[int, float] = {}
        self._taken_over: set[int] = set()
        self._exit = ExitStack()
        self._exit.enter_context(_real_clock())
        self.history = self.ctx.history
        self.clock = AutojumpClock()
        self.timers = TimerTable(self.clock.now)
        self.history.bind_clock(self.now)
        self._random = random.Random(self.ctx.seed)
        self._lock = threading.RLock()
        self._deployments = []
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
        self._ids = itertools.count(1)
        self._busy_count = 0
        self.external = False
        sweep_stale(Path(tempfile.gettempdir()), _LOG_PREFIX)
        self.log_dir = Path(tempfile.mkdtemp(prefix=f"{_LOG_PREFIX}{os.getpid()}-"))
        self.stack = component_stack()
        if self.stack.name != "processes":
            raise UsageError("the DBOS adapters run their components as processes: drop "
                             "--components containers for reference-dbos / naive-dbos")
        self.pg = self.stack.postgres()
        self.toxiproxy = self.stack.toxiproxy(log_dir=self.log_dir)
        self.world_server = WorldServer(self.history, now=self.now,
                                        model_latency=self.model_latency,
                                        deployment_of=self._deployment_of,
                                        on_fault_point=self._fault_point,
                                        timers=self.timers)
        self.world = self.world_server.world
        self.client: Any = None
        self.observer: DbosObserver | None = None
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def dbos_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.pg.port}/{_SYSTEM_DB}"

    def _start(self) -> None:
        import psycopg
        from dbos import DBOSClient

        started = time.monotonic()
        self.history.bind_clock(lambda: 0.0)  # startup happens "before" time 0
        self.pg.start()
        self.toxiproxy.start()
        self.world_server.start()
        with psycopg.connect(self.pg.conninfo, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {_SYSTEM_DB}")
        toxi = self.toxiproxy.client
        self._pg_proxy = toxi.create_proxy("pg", 0, f"127.0.0.1:{self.pg.port}")
        self._world_proxy = toxi.create_proxy("world", 0,
                                              f"127.0.0.1:{self.world_server.port}")
        self._set_commit_hold(False, standby="durable_chaos_hold")
        self.store = PostgresThreadLogStore(self.pg.conninfo)
        asyncio.run(self.store.ensure_schema())
        self.deploy("v1")
        self.client = DBOSClient(system_database_url=self.dbos_url,
                                 application_name=APP_NAME)
        self.history.add("dbos.started", data={
            "seconds": round(time.monotonic() - started, 3), "database": self.dbos_url,
            "logs": str(self.log_dir)})
        self.clock.restart(0.0)
        self.history.bind_clock(self.now)

    def _stop_everything(self) -> None:
        for thread in self._commit_holds:
            thread.join(timeout=15)
        try:
            workers = [h.worker for d in self._deployments for h in d.hosts]
            stop_groups([w.process for w in workers if w._group is not None], 5.0,
                        term_grace=0.3)
        finally:
            for stop in (self._close_clients, self.world_server.stop, self.toxiproxy.stop,
                         self.pg.stop):
                with contextlib.suppress(Exception):
                    stop()

    def _close_clients(self) -> None:
        if self.observer is not None:
            self.observer.close_engine()
        if self.client is not None:
            self.client.destroy()
            self.client = None

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

    def _invoke(self, service: str, handler: str, key: str | None, arg: Any,
                workflow_id: str | None = None) -> str:
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
        return str(options["workflow_id"])

    def send_message(self, session: str, message: dict[str, object]) -> None:
        self._invoke("Controller", "onMessage", session, message)

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        self._invoke("PendingToolCall", "answer", tool_call,
                     {"decision": decision, "user": user})

    def background(self, session: str, tool_call: str) -> None:
        self._invoke("Controller", "background", session, {"tool_call": tool_call})

    def cancel(self, session: str) -> None:
        self._invoke("Controller", "cancel", session, {})

    # -- the clock --------------------------------------------------------------------------

    def _fire(self, timer: Timer, now: float) -> None:
        self._fired += 1
        self._fire_lag = max(self._fire_lag, now - timer.deadline)
        self._acting.append(timer.deadline)
        self._last_action = time.monotonic()
        try:
            if timer.kind == "sleep":
                assert timer.awakeable is not None
                self.client.send(workflow_of(timer.awakeable), inbox_message(timer.awakeable),
                                 topic=INBOX, idempotency_key=timer.id)
            else:
                assert timer.service is not None and timer.handler is not None
                # The timer's id is the workflow id: a send fired twice runs once.
                self._invoke(timer.service, timer.handler, timer.key, timer.arg,
                             workflow_id=timer.id)
        except Exception as exc:
            self.history.add("dbos.timer_unfired", "info", invocation=timer.invocation,
                             data={"timer": timer.id, "kind": timer.kind,
                                   "error": f"{type(exc).__name__}: {exc}"[:300]})

    def _quiescent(self, rows: list[dict[str, Any]]) -> bool:
        real = time.monotonic()
        with self._lock:
            if self._holds or self._toxics:
                return False
        if any(t.is_alive() for t in self._commit_holds):
            return False
        if real - self._last_action < self.settle or self.world_server.busy(self.settle):
            return False
        # Enqueued, running, or in `recv` with a message to read: it goes on by itself.
        return not any(r["status"] in ("pending", "running") for r in rows)

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
            with self._lock:
                resuming = any(h.host.deployment is dep for h in self._holds)
            if count == 0 and not resuming:
                dep.drained = True
                self.history.add("deployment.retired", deployment=dep.id,
                                 data={"version": dep.version, "source": "workflow_status"})
                workers = [h.worker for h in dep.hosts]
                stop_groups([w.process for w in workers if w._group is not None], 5.0,
                            term_grace=0.3)

    def finish(self) -> None:
        """Heal what is still broken, wait (bounded) until DBOS has nothing of this app left
        to run, then record the thread logs."""
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
            wait_until(quiet, timeout=self.drain_timeout, what="DBOS workflows",
                       interval=self.poll_interval)
        except TimeoutError as exc:
            left = [r for r in self._rows.values() if r["status"] != "suspended"]
            self.history.add("dbos.not_quiet", data={"error": str(exc), "left": left[:20]})
        self._tick()
        self.history.add("clock.latency", data={
            "seconds": round(self._latency, 3), "timers_fired": self._fired,
            "max_fire_lag": round(self._fire_lag, 3), "jumps": self._jumps,
            "skipped": round(self.clock.jumped, 3)})
        asyncio.run(self._record_logs())

    # -- takeover ---------------------------------------------------------------------------

    def _hold(self, host: _Host, action: Any, duration: float) -> float:
        until = super()._hold(host, action, duration)
        with self._lock:
            self._hold_started[id(self._holds[-1])] = time.monotonic()
        return until

    def _tick(self) -> bool:
        self._take_over()
        return super()._tick()

    def _take_over(self) -> None:
        """Declare the executors of hosts that stopped answering dead (see the module
        docstring): another live host of the same version recovers their workflows."""
        real = time.monotonic()
        with self._lock:
            due: list[_Hold] = [
                h for h in self._holds if id(h) not in self._taken_over
                and real - self._hold_started.get(id(h), real) >= self.takeover_after]
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
        dep = _Deployment(version, index, cast(Any, None))
        dep.id = version
        self._deployments.append(dep)
        config = json.dumps({
            "hand_off_after": self.config.hand_off_after, "max_wait": self.config.max_wait,
            "max_steps_per_turn": self.config.max_steps_per_turn})
        for i in range(1, max(1, self.ctx.hosts) + 1):
            name = f"dep{index}.h{i}"
            env = {
                "DURABLE_CHAOS_VERSION": version,
                "DURABLE_CHAOS_VARIANT": self.variant,
                "DURABLE_CHAOS_WORLD_URL": f"http://127.0.0.1:{self._world_proxy.listen_port}",
                "DURABLE_CHAOS_OBSERVER_URL": self.world_server.url,
                "DURABLE_CHAOS_PG": (f"host=127.0.0.1 port={self._pg_proxy.listen_port} "
                                     "user=postgres dbname=postgres"),
                "DURABLE_CHAOS_DBOS_URL": self.dbos_url,
                "DURABLE_CHAOS_CONFIG": config,
                "DURABLE_CHAOS_HOST": name,
                "DURABLE_CHAOS_TIMERS_URL": self.world_server.url,
            }
            worker = DbosWorker(ready_file=self.log_dir / f"{name}.ready", env=env,
                                name=f"worker-{name}", pythonpath=[_REPO_ROOT],
                                cwd=_REPO_ROOT, log_dir=self.log_dir)
            dep.hosts.append(_Host(name, worker, dep))
        for host in dep.hosts:  # start in parallel, then wait for each
            host.worker.spawn()
        for host in dep.hosts:
            host.worker.wait_ready()
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

    def _components(self) -> tuple[ProcessGroup | None, ...]:
        return (self.toxiproxy.process, self.pg.process)


@dataclass(frozen=True)
class ReferenceDbosAdapter:
    """The reference implementation on DBOS with PostgreSQL (virtual time)."""

    name: str = "reference-dbos"
    description: str = ("the reference implementation on DBOS, with PostgreSQL and Toxiproxy "
                        "(virtual time)")
    engine: str = "real"
    variant: Variant = "reference"
    config: Config = field(default_factory=Config)

    def check_config(self) -> CheckConfig:
        # The simulator's thresholds: time is scenario time on both engines.
        return CheckConfig(hand_off_after=self.config.hand_off_after,
                           max_wait=self.config.max_wait)

    def preflight(self) -> None:
        """Before any run: PostgreSQL, Toxiproxy and the `dbos` package are installed."""
        from harness.components.postgres import find_binaries
        from harness.components.toxiproxy import find_toxiproxy_server

        find_binaries()
        find_toxiproxy_server()
        try:
            import dbos  # noqa: F401
        except ModuleNotFoundError:
            raise UsageError("the DBOS adapters need the dbos package: pip install "
                             "'durable-chaos[dbos,postgres]'") from None

    def open(self, ctx: RunContext) -> DbosRuntime:
        return DbosRuntime(ctx, self.variant, self.config)


@dataclass(frozen=True)
class NaiveDbosAdapter(ReferenceDbosAdapter):
    """The naive 'before' design (recv up to max_wait in the workflow) on DBOS."""

    name: str = "naive-dbos"
    description: str = ("the naive 'before' design (in-call recv up to max_wait, no "
                        "hand-off) on DBOS (virtual time)")
    variant: Variant = "naive"
