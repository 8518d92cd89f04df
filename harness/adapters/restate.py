"""The reference implementation (and its naive variant) on a real Restate server.

`open(ctx)` starts, all on 127.0.0.1: PostgreSQL (the thread log), restate-server (unless the
user points at their own with `DURABLE_CHAOS_RESTATE_INGRESS_URL` / `..._ADMIN_URL`),
Toxiproxy (between the workers and PostgreSQL, link "pg", and between the workers and the
world, link "world"), the world server (fake model provider, outbox, ledger, cards, observer)
and, per deployment, `ctx.hosts` worker processes (hosts `depN.hI`), each its own process
group, registered with `POST /deployments`.

Hosts of one deployment serve one endpoint: they accept from one listening socket the harness
owns (`SharedListener`), as replicas behind a load balancer would. Restate multiplexes
invocations over HTTP/2 connections to the endpoint; a paused host keeps its connections
open, so the harness's restate-server pings them every second and drops a connection after a
second without an answer (`http2-keep-alive-*`): Restate's retry of the attempt then opens a
new connection, which a live host accepts. That is the takeover of a thread by another host
(epoch + 1) while the old owner is frozen. A user's own Restate server keeps its own
keep-alive settings: there a paused host is only abandoned after its ping timeout (20 s by
default) or the invoker's abort timeout.

Time is virtual, as on the simulator, so the same scenario gets the same verdict: the
workers keep their durable timers (`ctx.sleep`, delayed sends) and `ctx.time()` with the
harness (`DURABLE_CHAOS_TIMERS_URL`, the world server's `/timers/*`): a sleep is an awakeable
the harness resolves through the ingress once its clock passes the deadline, a delayed send
is a one-way call it makes then. The clock (`AutojumpClock`) counts real time at rate 1 and
jumps to the next deadline (a timer, or the runner's next step) when the engine is
quiescent: no invocation of the app running, ready or backing off in `sys_invocation`, no
request to the world in flight, and nothing done by the harness or the world for `settle`
real seconds. Journals, suspension, pinning, crashes and recovery stay Restate's own; 5
minutes and 8 days are 5 minutes and 8 days (`Config()`), and an 8-day wait costs seconds.
History times are these virtual seconds, with the wall clock beside them.

Faults with a duration d (a GC pause, a pause at a fault point, a network toxic, the
`RESTART_AFTER` downtime of a crash) are where real seconds matter: what they provoke is the
stack's real timeouts (Restate's keep-alive, inactivity and abort timeouts, PostgreSQL's
idle-transaction and lock timeouts). So a fault holds for min(d, `fault_floor`) real
seconds, during which the clock does not jump (it runs with real time, and every timeout of
the stack, all shorter than the floor, fires as it would); then the clock moves to the
fault's end (start + d) if it is not there yet, and the fault ends. Nothing can happen inside
a stopped process, and the rest of the system has had every real timeout to react, so what
the skipped rest of a long pause could still bring is only timers, and those fire at once.

The operator retires a superseded deployment (stops its workers) once Restate's own
`sys_invocation` shows nothing pinned to it; each change in that count is recorded as
`restate.pinned` {deployment, count}, so `pinning-bound` judges what Restate measured.

Faults: gc-pause (SIGSTOP/SIGCONT of a host's process group), crash (SIGKILL, then the same
version restarts on the same socket; a host that crashes itself at a fault point is restarted
the same way), redeploy, the named fault points (the worker asks the harness at each one and
stops or kills itself when armed; `reset-after-commit` is a third action, see `arm`), and
network toxics (`NetworkFaults.toxic`).
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
from typing import Any, ClassVar, Literal

from contract.faultpoints import POINTS as FAULT_POINTS
from contract.ports import Config
from harness.adapters.base import LINKS, TOXICS, WORLD_ENDPOINTS, NetworkFaults, RunContext
from harness.checkers.base import CheckConfig
from harness.clock import AutojumpClock
from harness.components.net import wait_until
from harness.components.procs import ProcessGroup, sweep_stale
from harness.components.restate import RestateServer
from harness.components.stack import component_stack
from harness.components.workers import SharedListener, WorkerProcess
from harness.errors import UsageError
from harness.history import History
from harness.world import World
from harness.world_server import Timer, TimerTable, WorldServer

__all__ = [
    "ADMIN_ENV",
    "INGRESS_ENV",
    "LINKS",
    "TOXICS",
    "NaiveRestateAdapter",
    "NetworkFaults",
    "ReferenceRestateAdapter",
    "RestateRuntime",
    "use_restate",
]

INGRESS_ENV = "DURABLE_CHAOS_RESTATE_INGRESS_URL"
KEEP_LOGS_ENV = "DURABLE_CHAOS_KEEP_LOGS"
_LOG_PREFIX = "durable-chaos-run-"
ADMIN_ENV = "DURABLE_CHAOS_RESTATE_ADMIN_URL"
_REPO_ROOT = Path(__file__).resolve().parents[2]

Variant = Literal["reference", "naive"]

RESET_AFTER_COMMIT = "reset-after-commit"
_APPEND_POINTS = ("threadlog.append.before_lock", "threadlog.append.locked")
# PostgreSQL settings that let the harness hold one COMMIT at the server (see `arm`):
# synchronous replication to a standby that never comes is configured, but no session waits
# for it unless the harness switches synchronous_commit on for the duration of the hold. Both
# go through ALTER SYSTEM, not the command line, which would outrank later changes.
_HOLD_STANDBY = "durable_chaos_hold"
_MAX_RESTARTS = 20
# The scenario seconds a crashed host stays down before it restarts (as on the simulator).
RESTART_AFTER = 5.0
# Statuses of `sys_invocation` in which an invocation makes progress by itself in real time.
_ACTIVE = frozenset({"ready", "running", "backing-off", "invoked"})
# What the real path runs through in the harness's process: its own modules, event loops,
# subprocess, socket servers and the database and HTTP clients (see `_real_clock`).
_REAL_TIME_MODULES = (
    "harness.adapters.restate", "harness.components", "harness.world_server", "asyncio",
    "concurrent", "subprocess", "socketserver", "http.server", "selectors", "threading",
    "psycopg", "httpx", "httpcore", "h11", "anyio",
)


@contextlib.contextmanager
def _real_clock() -> Iterator[None]:
    """Real time for the real path, even inside a freezegun freezer.

    The suite runner freezes the wall clock for the whole suite so that simulated handlers
    read virtual time; that freezer also stops `time.monotonic`, which event loops, socket
    and database timeouts and this runtime's clock all need to move. freezegun answers
    with the real clock to callers from the modules of its ignore list: the real path's are
    added to the active freezer's list while a runtime is open, and taken away after.
    """
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


def use_restate(ingress_url: str | None, admin_url: str | None) -> None:
    """Point the Restate adapters of this process at a Restate server the user runs (what
    `--restate-ingress-url` / `--restate-admin-url` do): both URLs, or neither."""
    if ingress_url is None and admin_url is None:
        return
    if not ingress_url or not admin_url:
        raise UsageError("give both --restate-ingress-url and --restate-admin-url (the "
                         "ingress, e.g. http://127.0.0.1:8080, and the admin API, e.g. "
                         "http://127.0.0.1:9070), or neither to let the harness start its own")
    os.environ[INGRESS_ENV] = ingress_url
    os.environ[ADMIN_ENV] = admin_url


@dataclass(eq=False)
class _Host:
    name: str
    worker: WorkerProcess
    deployment: _Deployment
    restarts: int = 0


@dataclass(eq=False)
class _Deployment:
    version: str
    index: int
    listener: SharedListener
    hosts: list[_Host] = field(default_factory=list)
    id: str = ""
    superseded: bool = False
    drained: bool = False
    last_count: int | None = None


@dataclass(eq=False)
class _Toxic:
    link: str
    kind: str
    name: str
    until: float
    real_until: float


@dataclass(eq=False)
class _Hold:
    """A fault with a duration: it ends once `real_until` (monotonic) has passed, and the
    clock is then moved to `until` (virtual) if it is behind (see the module docstring)."""

    host: _Host
    action: Literal["resume", "restart"]
    until: float
    real_until: float


@dataclass
class RestateRuntime:
    """One run on the real stack. Capabilities: background, cancel, gc-pause, crash, deploy,
    arm (every point of reference_impl.faultpoints), network; the workers call the world's
    provider and identity over HTTP."""

    world_endpoints: ClassVar[tuple[str, ...]] = WORLD_ENDPOINTS
    points: ClassVar[tuple[str, ...]] = tuple(FAULT_POINTS)

    ctx: RunContext
    variant: Variant
    config: Config
    restate_ingress_url: str | None = None
    restate_admin_url: str | None = None
    model_latency: float = 0.05
    poll_interval: float = 0.1
    drain_timeout: float = 30.0
    toxic_latency_ms: int = 1000
    keep_alive: float = 1.0
    # Real seconds without any activity before the engine counts as quiescent.
    settle: float = 0.3
    # The longest real stretch of a fault with a duration (see the module docstring): above
    # every timeout of the stack the harness starts (abort 5 s, keep-alive 1 s, PostgreSQL
    # idle-in-transaction 2 s and lock 1 s).
    fault_floor: float = 6.0
    # How long (real seconds) a harness action may go unseen in sys_invocation.
    expect_timeout: float = 2.0
    # Real seconds of an engine never quiescent after which the clock jumps anyway.
    stall_after: float = 60.0
    history: History = field(init=False)
    world: World = field(init=False)

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
        self._holds: list[_Hold] = []
        self._last_action = time.monotonic()
        # Invocations the harness started or woke, not yet seen to react: id -> real deadline
        # after which the harness stops waiting for a sign (and the row it last saw, if any).
        self._expect: dict[str, tuple[float, str | None]] = {}
        self._rows: dict[str, dict[str, Any]] = {}
        self._jumps = 0
        self._fired = 0
        self._fire_lag = 0.0
        # Deadlines of timers fired since the engine was last quiescent, and the longest
        # delay from a deadline to the engine being quiescent again (its latency).
        self._acting: list[float] = []
        self._latency = 0.0
        self._armed: dict[str, list[tuple[str, float]]] = {}
        self._toxics: list[_Toxic] = []
        self._toxic_count = 0
        self._commit_holds: list[threading.Thread] = []
        self._closed = False
        self._invocations: dict[str, str] = {}
        self._services: tuple[str, ...] = ()
        # The logs of the run's workers and Toxiproxy: removed when the run closes (kept with
        # DURABLE_CHAOS_KEEP_LOGS=1 for post-mortems); the pid in the name lets the next run
        # remove those of a harness that was killed.
        sweep_stale(Path(tempfile.gettempdir()), _LOG_PREFIX)
        self.log_dir = Path(tempfile.mkdtemp(prefix=f"{_LOG_PREFIX}{os.getpid()}-"))
        # Processes or containers (`--components`): the same interfaces either way.
        self.stack = component_stack()
        self.pg = self.stack.postgres()
        self.toxiproxy = self.stack.toxiproxy(log_dir=self.log_dir)
        ingress = self.restate_ingress_url or os.environ.get(INGRESS_ENV)
        admin = self.restate_admin_url or os.environ.get(ADMIN_ENV)
        if bool(ingress) != bool(admin):
            raise UsageError(f"give both the Restate ingress and admin URLs ({INGRESS_ENV} "
                             f"and {ADMIN_ENV}), or neither to let the harness start its own")
        self.external = bool(ingress and admin)
        self.restate = (RestateServer.external(str(ingress), str(admin)) if self.external
                        else self.stack.restate(http2_keep_alive_interval=self.keep_alive,
                                                http2_keep_alive_timeout=self.keep_alive))
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
        started = time.monotonic()
        self.history.bind_clock(lambda: 0.0)  # startup happens "before" time 0
        self.pg.start()
        self.toxiproxy.start()
        self.restate.start()
        self.world_server.start()
        toxi = self.toxiproxy.client
        self._pg_proxy = toxi.create_proxy("pg", 0, f"127.0.0.1:{self.pg.port}")
        self._world_proxy = toxi.create_proxy("world", 0,
                                              f"127.0.0.1:{self.world_server.port}")
        self._set_commit_hold(False, standby=_HOLD_STANDBY)
        # The reference's PostgreSQL store, imported here: the harness core never loads the
        # system under test.
        from reference_impl.threadlog_pg import PostgresThreadLogStore

        self.store = PostgresThreadLogStore(self.pg.conninfo)
        asyncio.run(self.store.ensure_schema())
        self.history.add("restate.started", data={
            "seconds": round(time.monotonic() - started, 3), "external": self.external,
            "ingress": self.restate.ingress_url, "admin": self.restate.admin_url,
            "logs": str(self.log_dir)})
        self.deploy("v1")
        if self.external:
            self._clean_restate("before the run")
        self.clock.restart(0.0)
        self.history.bind_clock(self.now)

    def now(self) -> float:
        """Virtual seconds since the run started (scenario time): the history's time."""
        return self.clock.now()

    elapsed = now

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

    def _stop_everything(self) -> None:
        for thread in self._commit_holds:
            thread.join(timeout=15)
        if self.external and self._services:
            with contextlib.suppress(Exception):
                self._clean_restate("after the run")
        try:
            self.stack.stop_workers([h.worker for d in self._deployments for h in d.hosts])
            for dep in self._deployments:
                dep.listener.close()
                if self.external and dep.id:
                    with contextlib.suppress(Exception):
                        self.restate.admin.delete_deployment(dep.id)
        finally:
            # Whatever failed above, the servers go too.
            for stop in (self.world_server.stop, self.restate.stop, self.toxiproxy.stop,
                         self.pg.stop):
                with contextlib.suppress(Exception):
                    stop()

    def _clean_restate(self, when: str) -> None:
        """On a user's Restate server: kill what is left of this app's invocations and clear
        its virtual objects' state, so that runs do not see each other's leftovers."""
        admin = self.restate.admin
        names = ", ".join(f"'{s}'" for s in self._services)
        left = admin.query(f"SELECT id FROM sys_invocation WHERE status <> 'completed' "
                           f"AND target_service_name IN ({names})")
        for row in left:
            with contextlib.suppress(Exception):
                admin.kill_invocation(str(row["id"]))
        keys = admin.query(f"SELECT DISTINCT service_name, service_key FROM state "
                           f"WHERE service_name IN ({names})")
        for row in keys:
            admin.clear_state(str(row["service_name"]), str(row["service_key"]))

        def clean() -> bool | None:
            rows = admin.query(
                f"SELECT (SELECT count(*) FROM state WHERE service_name IN ({names})) "
                f"+ (SELECT count(*) FROM sys_invocation WHERE status <> 'completed' AND "
                f"target_service_name IN ({names})) AS n")
            return True if int(rows[0].get("n", 0)) == 0 else None

        wait_until(clean, timeout=15, what=f"cleanup of the Restate server {when}",
                   interval=0.05)
        self.history.add("restate.cleaned", data={
            "when": when, "invocations_killed": len(left), "objects_cleared": len(keys)})

    # -- driving --------------------------------------------------------------------------

    def advance(self, until: float) -> None:
        """Run until the clock reads `until`, jumping whenever the engine is quiescent.

        An engine that stays busy for `stall_after` real seconds (an invocation retrying
        for ever, say) would otherwise make the run last as long as the scenario: the clock
        then jumps all the same, and `restate.stalled` records what kept it busy.
        """
        busy_since: float | None = None
        while True:
            quiet = self._tick()
            now = self.clock.now()
            if now >= until:
                return
            real = time.monotonic()
            if quiet:
                busy_since = None
            elif busy_since is None:
                busy_since = real
            elif real - busy_since > self.stall_after and not self._holds:
                self.history.add("restate.stalled", "info", data={
                    "seconds": round(real - busy_since, 1),
                    "active": [r for r in self._rows.values()
                               if str(r.get("status")) in _ACTIVE][:10]})
                busy_since, quiet = None, True
            if quiet:
                deadline = self.timers.next_deadline()
                target = until if deadline is None else min(until, deadline)
                if self.clock.jump_to(target) > 0:
                    self._jumps += 1
                continue
            time.sleep(min(self.poll_interval, max(0.0, until - now)))

    def _sent(self, invocation_id: str) -> None:
        self._last_action = time.monotonic()
        with self._lock:
            self._expect[invocation_id] = (self._last_action + self.expect_timeout, None)

    def send_message(self, session: str, message: dict[str, object]) -> None:
        self._sent(self.restate.admin.send("Controller", "onMessage", session, message))

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        self._sent(self.restate.admin.send("PendingToolCall", "answer", tool_call,
                                           {"decision": decision, "user": user}))

    def background(self, session: str, tool_call: str) -> None:
        self._sent(self.restate.admin.send("Controller", "background", session,
                                           {"tool_call": tool_call}))

    def cancel(self, session: str) -> None:
        self._sent(self.restate.admin.send("Controller", "cancel", session, {}))

    # -- the clock --------------------------------------------------------------------------

    def _fire_due(self) -> None:
        """Fire the engine's timers whose deadline the clock has passed."""
        now = self.clock.now()
        for timer in self.timers.due(now):
            self._fire(timer, now)

    def _fire(self, timer: Timer, now: float) -> None:
        admin = self.restate.admin
        self._fired += 1
        self._fire_lag = max(self._fire_lag, now - timer.deadline)
        self._acting.append(timer.deadline)
        self._last_action = time.monotonic()
        try:
            if timer.kind == "sleep":
                assert timer.awakeable is not None
                admin.resolve_awakeable(timer.awakeable, None)
                row = self._rows.get(timer.invocation or "")
                if row is not None and timer.invocation:
                    # Woken: its row must change (or it completes) before the engine is
                    # quiescent again.
                    with self._lock:
                        self._expect[timer.invocation] = (
                            self._last_action + self.expect_timeout,
                            json.dumps(row, sort_keys=True))
            else:
                assert timer.service is not None and timer.handler is not None
                # The timer's id is the idempotency key: a send fired twice happens once.
                self._sent(admin.send(timer.service, timer.handler, timer.key, timer.arg,
                                      idempotency_key=timer.id))
        except Exception as exc:
            # A sleep whose invocation moved on (its other branch won) has no one to wake.
            self.history.add("restate.timer_unfired", "info", invocation=timer.invocation,
                             data={"timer": timer.id, "kind": timer.kind,
                                   "error": f"{type(exc).__name__}: {exc}"[:300]})

    def _quiescent(self, rows: list[dict[str, Any]]) -> bool:
        """Whether nothing would happen without a timer: see the module docstring."""
        real = time.monotonic()
        with self._lock:
            if self._holds or self._toxics:
                return False
        if any(t.is_alive() for t in self._commit_holds):
            return False
        if real - self._last_action < self.settle or self.world_server.busy(self.settle):
            return False
        current = {str(r["id"]): r for r in rows}
        with self._lock:
            for inv_id, (deadline, before) in list(self._expect.items()):
                row = current.get(inv_id)
                if before is None:
                    seen = row is not None  # a new invocation: seen at all
                else:
                    seen = row is None or json.dumps(row, sort_keys=True) != before
                if seen or real > deadline:
                    del self._expect[inv_id]
            if self._expect:
                return False
        holders = {(r.get("target_service_name"), r.get("target_service_key"))
                   for r in rows if r.get("status") == "suspended"}
        for row in rows:
            status = str(row.get("status"))
            if status in _ACTIVE:
                return False
            if status in ("pending", "inboxed") and (
                    (row.get("target_service_name"), row.get("target_service_key"))
                    not in holders):
                return False
        return True

    def finish(self) -> None:
        """Heal what is still broken, wait (bounded) until Restate has nothing of this app
        left to run (quiescent: what still waits, waits on a person or a timer past the
        horizon, as on the simulator), then record the thread logs."""
        self._heal_all()
        with self._lock:
            pending, self._holds = self._holds, []
        for hold in pending:
            self._end_hold(hold)
        for thread in self._commit_holds:
            thread.join(timeout=15)
        admin = self.restate.admin

        def quiet() -> bool | None:
            return True if self._tick() else None

        try:
            wait_until(quiet, timeout=self.drain_timeout, what="Restate invocations",
                       interval=self.poll_interval)
        except TimeoutError as exc:
            left = admin.invocations(f"status <> 'completed' AND {self._ours()}")
            self.history.add("restate.not_quiet", data={"error": str(exc), "left": left[:20]})
        self._tick()
        # How the virtual clock went, and the latency the checkers add to their tolerance.
        self.history.add("clock.latency", data={
            "seconds": round(self._latency, 3), "timers_fired": self._fired,
            "max_fire_lag": round(self._fire_lag, 3), "jumps": self._jumps,
            "skipped": round(self.clock.jumped, 3)})
        asyncio.run(self._record_logs())

    async def _record_logs(self) -> None:
        sessions = {r.session for r in self.history.of_kind("threadlog.assigned") if r.session}
        for thread_id in sorted(sessions):
            for entry in await self.store.read(thread_id):
                self.history.add("threadlog.committed", session=thread_id, epoch=entry.epoch,
                                 data={"seq": entry.seq, "owner": entry.owner,
                                       "kind": entry.kind, "entry": entry.payload.get("id")})
            current = await self.store.current(thread_id)
            if current is not None:
                self.history.add("threadlog.owner", session=thread_id, epoch=current.epoch,
                                 data={"owner": current.owner})

    def _ours(self) -> str:
        if not self._services:
            return "true"
        return "target_service_name IN (" + ", ".join(f"'{s}'" for s in self._services) + ")"

    # -- the operator ---------------------------------------------------------------------

    def _tick(self) -> bool:
        """One round of the operator; returns whether the engine is quiescent."""
        real = time.monotonic()
        with self._lock:
            due = [h for h in self._holds if h.real_until <= real]
            for hold in due:
                self._holds.remove(hold)
        for hold in due:
            self.clock.jump_to(hold.until)
            self._end_hold(hold)
        self._heal_due(real)
        self._fire_due()
        self._restart_crashed()
        rows = self._observe_invocations()
        self._drain()
        quiet = self._quiescent(rows)
        if quiet and self._acting:
            now = self.clock.now()
            self._latency = max(self._latency, now - min(self._acting))
            self._acting.clear()
        return quiet

    def _drain(self) -> None:
        if not any(d.superseded and not d.drained for d in self._deployments):
            return
        counts = {c.deployment_id: c.invocations for c in self.restate.admin.pinned_counts()}
        for dep in self._deployments:
            if not dep.superseded or dep.drained:
                continue
            count = counts.get(dep.id, 0)
            if count != dep.last_count:
                dep.last_count = count
                self.history.add("restate.pinned", deployment=dep.id,
                                 data={"deployment": dep.id, "count": count,
                                       "version": dep.version})
            with self._lock:
                resuming = any(h.host.deployment is dep for h in self._holds)
            if count == 0 and not resuming:
                dep.drained = True
                self.history.add("deployment.drained", deployment=dep.id,
                                 data={"version": dep.version, "source": "sys_invocation"})
                self.stack.stop_workers([h.worker for h in dep.hosts])
                dep.listener.close()

    def _end_hold(self, hold: _Hold) -> None:
        # The clock skipped the rest of the fault: what timers were doing meanwhile is no
        # measure of the engine's latency.
        self._acting.clear()
        host = hold.host
        if hold.action == "resume":
            if host.worker.alive:
                host.worker.resume()
                self.history.add("host.resumed", host=host.name, deployment=host.deployment.id)
        elif not host.deployment.drained:
            host.worker.start()
            self.history.add("host.restarted", host=host.name, deployment=host.deployment.id)
        self._last_action = time.monotonic()

    def _hold(self, host: _Host, action: Literal["resume", "restart"], duration: float) -> float:
        until = self.clock.now() + duration
        with self._lock:
            self._holds.append(_Hold(host, action, until,
                                     time.monotonic() + min(duration, self.fault_floor)))
        return until

    def _restart_crashed(self) -> None:
        """A host that died (it crashed itself at a fault point) restarts, same version."""
        for dep in self._deployments:
            if dep.drained:
                continue
            for host in dep.hosts:
                if host.worker.alive or host.restarts >= _MAX_RESTARTS:
                    continue
                with self._lock:
                    if any(h.host is host for h in self._holds):
                        continue  # crashed by the harness: it restarts when its hold ends
                host.restarts += 1
                code = host.worker.process.returncode
                self.history.add("host.crashed", host=host.name, deployment=dep.id,
                                 data={"exit": code})
                host.worker.spawn()
                self.history.add("host.restarted", host=host.name, deployment=dep.id,
                                 data={"exit": code, "restarts": host.restarts})

    def _observe_invocations(self) -> list[dict[str, Any]]:
        """Invocation lifecycle as Restate's `sys_invocation` shows it (source of truth for
        pinning): started (pinned to a deployment), suspended, resumed, completed. Returns
        every invocation of the app not completed (for `_quiescent`)."""
        every = self.restate.admin.query(
            "SELECT id, target, status, pinned_deployment_id, target_service_name, "
            "target_service_key, modified_at, journal_size FROM sys_invocation "
            f"WHERE status <> 'completed' AND {self._ours()}")
        self._rows = {str(r["id"]): r for r in every}
        rows = [r for r in every if r.get("pinned_deployment_id") is not None]
        current = {str(r["id"]): r for r in rows}
        for inv_id, row in current.items():
            status = str(row.get("status"))
            dep = str(row["pinned_deployment_id"])
            seen = self._invocations.get(inv_id)
            if seen is None:
                self.history.add("invocation.started", invocation=inv_id, deployment=dep,
                                 data={"target": row.get("target"), "source": "sys_invocation"})
                seen = self._invocations[inv_id] = "running"
            if status == "suspended" and seen != "suspended":
                self.history.add("invocation.suspended", invocation=inv_id, deployment=dep)
            elif status != "suspended" and seen == "suspended":
                self.history.add("invocation.resumed", invocation=inv_id, deployment=dep)
            self._invocations[inv_id] = "suspended" if status == "suspended" else "running"
        for inv_id in [i for i in self._invocations if i not in current]:
            del self._invocations[inv_id]
            self.history.add("invocation.completed", invocation=inv_id)
        return every

    def _deployment_of(self, host: str) -> str | None:
        for dep in self._deployments:
            for h in dep.hosts:
                if h.name == host:
                    return dep.id or None
        return None

    # -- capabilities: deploy, gc-pause, crash ----------------------------------------------

    def deploy(self, version: str) -> str:
        index = len(self._deployments) + 1
        version = version or f"v{index}"
        dep = _Deployment(version, index, SharedListener())
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
                "DURABLE_CHAOS_CONFIG": config,
                "DURABLE_CHAOS_HOST": name,
                "DURABLE_CHAOS_TIMERS_URL": self.world_server.url,
            }
            worker = self.stack.worker("reference_impl.worker:app", env=env,
                                       name=f"worker-{name}", pythonpath=[_REPO_ROOT],
                                       cwd=_REPO_ROOT, listener=dep.listener,
                                       log_dir=self.log_dir)
            dep.hosts.append(_Host(name, worker, dep))
        for host in dep.hosts:  # start in parallel, then wait for each
            host.worker.spawn()
        for host in dep.hosts:
            host.worker.wait_ready()
        dep.id = self.restate.admin.register_deployment(dep.listener.url)
        if not self._services:
            rows = self.restate.admin.query(
                f"SELECT name FROM sys_service WHERE deployment_id = '{dep.id}'")
            self._services = tuple(sorted(str(r["name"]) for r in rows))
        self.history.add("deployment.registered", deployment=dep.id, host=dep.hosts[0].name,
                         data={"version": version, "hosts": [h.name for h in dep.hosts],
                               "endpoint": dep.listener.url})
        for old in self._deployments[:-1]:
            if not old.superseded:
                old.superseded = True
                self.history.add("deployment.superseded", deployment=old.id,
                                 data={"version": old.version, "by": dep.id})
        self._tick()
        return dep.id

    def _live(self) -> list[_Deployment]:
        return [d for d in self._deployments if not d.drained]

    def _select(self, selector: str) -> _Host:
        for dep in self._deployments:
            for host in dep.hosts:
                if selector == host.name:
                    return host
            if selector == dep.id:
                return dep.hosts[0]
        live = self._live()
        latest = live[-1]
        if selector == "owner":
            hosts = {h.name: h for d in live for h in d.hosts}
            for record in reversed(self.history.records):
                if record.kind == "threadlog.assigned" and record.host in hosts:
                    return hosts[record.host]
            return latest.hosts[0]
        if selector == "any":
            return self._random.choice(latest.hosts)
        if selector == "latest":
            return latest.hosts[0]
        if selector.startswith("latest/"):
            number = selector.split("/", 1)[1]
            if number.isdigit() and 1 <= int(number) <= len(latest.hosts):
                return latest.hosts[int(number) - 1]
        names = [h.name for d in self._deployments for h in d.hosts]
        raise UsageError(f"unknown host {selector!r}: use 'owner', 'any', 'latest/N' (N from 1 "
                         f"to {len(latest.hosts)}) or one of {names}")

    def pause_host(self, host: str, duration: float) -> str:
        target = self._select(host)
        target.worker.pause()
        until = self._hold(target, "resume", duration)
        self.history.add("host.paused", host=target.name, deployment=target.deployment.id,
                         data={"until": round(until, 3)})
        return target.name

    def crash_host(self, host: str) -> str:
        """SIGKILL now; the same version restarts `RESTART_AFTER` scenario seconds later (as
        on the simulator), so the crash's downtime is a window of the history."""
        target = self._select(host)
        target.worker.kill()
        self.history.add("host.crashed", host=target.name, deployment=target.deployment.id)
        self._hold(target, "restart", RESTART_AFTER)
        return target.name

    # -- capabilities: fault points ---------------------------------------------------------

    def arm(self, point: str, action: str, duration: float, times: int) -> None:
        """At the next `times` arrivals at `point`: "pause" (the worker stops itself, the
        harness resumes it after `duration`), "crash" (it kills itself; the harness restarts
        it), or "reset-after-commit" (only at a thread-log append point: the append goes on,
        its COMMIT is held at the server once it is durable, and Toxiproxy resets the
        worker's connection in place of the answer, so the worker cannot know the outcome)."""
        if action not in ("pause", "crash", RESET_AFTER_COMMIT):
            raise UsageError(f"unknown fault-point action {action!r}: use 'pause', 'crash' or "
                             f"'{RESET_AFTER_COMMIT}'")
        if action == RESET_AFTER_COMMIT and point not in _APPEND_POINTS:
            raise UsageError(f"'{RESET_AFTER_COMMIT}' needs a thread-log append point: one of "
                             f"{list(_APPEND_POINTS)}")
        with self._lock:
            self._armed.setdefault(point, []).extend([(action, duration)] * times)

    def _fault_point(self, point: str, host: str, pid: int) -> str | None:
        # Called from a world-server thread while the worker waits for the answer.
        with self._lock:
            armed = self._armed.get(point)
            if not armed:
                return None
            action, duration = armed.pop(0)
            target = next((h for d in self._deployments for h in d.hosts if h.name == host),
                          None)
            if action == "pause" and target is not None:
                self._hold(target, "resume", duration)
                # The worker stops itself on this answer: a pause window of the history, as
                # the simulator records one.
                self.history.add("host.paused", host=target.name,
                                 deployment=target.deployment.id,
                                 data={"duration": duration, "point": point})
        if action == RESET_AFTER_COMMIT:
            try:
                self._hold_next_commit(host)
            except Exception as exc:  # the worker must not wait on a broken harness
                self.history.add("network.reset_after_commit", "info", host=host,
                                 data={"error": f"{type(exc).__name__}: {exc}"})
            return None
        return action

    # -- reset after commit ---------------------------------------------------------------

    @contextlib.contextmanager
    def _pg_admin(self) -> Iterator[Any]:
        import psycopg

        with psycopg.connect(self.pg.conninfo, autocommit=True, connect_timeout=5) as conn:
            conn.execute("SET synchronous_commit = local")
            yield conn

    def _set_commit_hold(self, on: bool, *, standby: str | None = None) -> None:
        """Switch synchronous_commit for every session (the harness's own excepted) and
        wait until the postmaster has passed the change on to the running sessions."""
        import psycopg

        value = "on" if on else "local"
        with self._pg_admin() as conn:
            conn.execute(f"ALTER SYSTEM SET synchronous_commit = '{value}'")
            if standby is not None:
                conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{standby}'")
            conn.execute("SELECT pg_reload_conf()")

        def applied() -> bool | None:
            # A new session starts from the postmaster's settings, and the postmaster signals
            # the running sessions as soon as it has reloaded them.
            with psycopg.connect(self.pg.conninfo, connect_timeout=5) as probe:
                row = probe.execute("SHOW synchronous_commit").fetchone()
            return True if row is not None and row[0] == value else None

        wait_until(applied, timeout=5, what=f"synchronous_commit = {value}", interval=0.01)

    def _hold_next_commit(self, host: str) -> None:
        self._set_commit_hold(True)
        thread = threading.Thread(target=self._reset_after_commit, args=(host,),
                                  name="reset-after-commit", daemon=True)
        self._commit_holds.append(thread)
        thread.start()

    def _reset_after_commit(self, host: str) -> None:
        """Once the worker's COMMIT waits at the server (durable locally, held for a
        standby that never comes), put a reset on the PostgreSQL link's answers, release the
        COMMIT and let its answer hit the reset; then take the reset away."""
        data: dict[str, Any] = {"host": host}
        toxi = self.toxiproxy.client
        toxic: str | None = None
        try:
            with self._pg_admin() as conn:
                def waiting() -> int | None:
                    row = conn.execute("SELECT pid FROM pg_stat_activity "
                                       "WHERE wait_event = 'SyncRep' LIMIT 1").fetchone()
                    return None if row is None else int(row[0])

                pid = wait_until(waiting, timeout=10, what="a COMMIT held at the server",
                                 interval=0.01)
                data["backend"] = pid
                toxic = toxi.add_reset_peer("pg", 0, stream="downstream")
                self._set_commit_hold(False)
                conn.execute("SELECT pg_cancel_backend(%s)", (pid,))

                def gone() -> bool | None:
                    row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                                       (pid,)).fetchone()
                    return True if row is not None and row[0] == 0 else None

                wait_until(gone, timeout=10, what="the reset of the held connection",
                           interval=0.01)
                data["outcome"] = "committed at the server; the answer was reset"
        except Exception as exc:
            data["error"] = f"{type(exc).__name__}: {exc}"
            with contextlib.suppress(Exception):
                self._set_commit_hold(False)
        finally:
            if toxic is not None:
                with contextlib.suppress(Exception):
                    toxi.remove_toxic("pg", toxic)
            self.history.add("network.reset_after_commit", "info", host=host,
                             deployment=self._deployment_of(host), data=data)

    # -- capabilities: network ------------------------------------------------------------

    def toxic(self, link: str, kind: str, duration: float) -> None:
        if link not in LINKS:
            raise UsageError(f"unknown link {link!r}: use one of {list(LINKS)}")
        if kind not in TOXICS:
            raise UsageError(f"unknown network fault {kind!r}: use one of {list(TOXICS)}")
        real = min(duration, self.fault_floor)
        toxi = self.toxiproxy.client
        self._toxic_count += 1
        name = f"{kind}_{self._toxic_count}"
        if kind == "down":
            toxi.down(link)
        elif kind == "latency":
            toxi.add_toxic(link, "latency", {"latency": self.toxic_latency_ms, "jitter": 0},
                           toxic_name=name)
        elif kind == "timeout":
            # Nothing gets through, and the connections close when the fault ends.
            toxi.add_toxic(link, "timeout", {"timeout": max(1, round(real * 1000))},
                           toxic_name=name)
        else:
            toxi.add_toxic(link, "reset_peer", {"timeout": 0}, toxic_name=name)
        until = self.clock.now() + duration
        with self._lock:
            self._toxics.append(_Toxic(link, kind, name, until, time.monotonic() + real))
        self.history.add("network.toxic", data={"link": link, "kind": kind,
                                                "until": round(until, 3), "toxic": name})

    def _heal(self, toxic: _Toxic) -> None:
        toxi = self.toxiproxy.client
        if toxic.kind == "down":
            if not any(t.link == toxic.link and t.kind == "down" for t in self._toxics):
                toxi.up(toxic.link)
        else:
            with contextlib.suppress(Exception):
                toxi.remove_toxic(toxic.link, toxic.name)
        self.history.add("network.healed", data={"link": toxic.link, "kind": toxic.kind,
                                                 "toxic": toxic.name})

    def _heal_due(self, real: float) -> None:
        with self._lock:
            due = [t for t in self._toxics if t.real_until <= real]
            for t in due:
                self._toxics.remove(t)
        for t in due:
            self.clock.jump_to(t.until)
            self._acting.clear()
            self._heal(t)

    def _heal_all(self) -> None:
        with self._lock:
            due, self._toxics = self._toxics, []
        for t in due:
            self._heal(t)

    def process_groups(self) -> list[int]:
        """Process group ids this runtime started (for leak checks): every worker's and
        every component's (`_components`)."""
        groups: list[ProcessGroup] = [h.worker.process for d in self._deployments
                                      for h in d.hosts if h.worker._group is not None]
        groups += [comp for comp in self._components() if comp is not None]
        return [g.pgid for g in groups]

    def _components(self) -> tuple[ProcessGroup | None, ...]:
        """The components' process groups (None: not started, or not ours); an engine
        runtime built on this one names its own."""
        return (self.restate.process, self.toxiproxy.process, self.pg.process)


@dataclass(frozen=True)
class ReferenceRestateAdapter:
    """The reference implementation on a real Restate server (virtual time)."""

    name: str = "reference-restate"
    description: str = ("the reference implementation on a real Restate server, with "
                        "PostgreSQL and Toxiproxy (virtual time)")
    engine: str = "real"
    variant: Variant = "reference"
    config: Config = field(default_factory=Config)
    restate_ingress_url: str | None = None
    restate_admin_url: str | None = None

    def check_config(self) -> CheckConfig:
        # The simulator's thresholds: time is scenario time on both engines.
        return CheckConfig(hand_off_after=self.config.hand_off_after,
                           max_wait=self.config.max_wait)

    def preflight(self) -> None:
        """Before any run: the binaries are installed and a Restate the user named answers
        (see harness.adapters.base.Preflight)."""
        from harness.components.postgres import find_binaries
        from harness.components.restate import find_restate_server
        from harness.components.toxiproxy import find_toxiproxy_server

        find_binaries()
        find_toxiproxy_server()
        ingress = self.restate_ingress_url or os.environ.get(INGRESS_ENV)
        admin = self.restate_admin_url or os.environ.get(ADMIN_ENV)
        if not (ingress and admin):
            find_restate_server()
            return
        import httpx

        for option, url in (("--restate-ingress-url", ingress), ("--restate-admin-url", admin)):
            try:
                httpx.get(url, timeout=5.0)  # any answer will do: something listens there
            except Exception as exc:
                raise UsageError(f"{option} {url} does not answer ({type(exc).__name__}: "
                                 f"{exc}); start Restate there or fix the URL") from None

    def open(self, ctx: RunContext) -> RestateRuntime:
        return RestateRuntime(ctx, self.variant, self.config,
                              restate_ingress_url=self.restate_ingress_url,
                              restate_admin_url=self.restate_admin_url)


@dataclass(frozen=True)
class NaiveRestateAdapter(ReferenceRestateAdapter):
    """The naive 'before' design (in-call wait up to max_wait) on a real Restate server."""

    name: str = "naive-restate"
    description: str = ("the naive 'before' design (in-call wait, no hand-off) on a real "
                        "Restate server (virtual time)")
    variant: Variant = "naive"
