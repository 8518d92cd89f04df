"""What every real-engine runtime shares: the stack, the operator, virtual time and faults.

`EngineRuntime` is one run of the reference implementation (or its naive variant) on a real
engine; `harness.adapters.restate`, `.temporal` and `.dbos` subclass it with only what is
their engine's own (its server, how to invoke a handler, how to fire a timer, how to read
what it runs, how to deploy a version). `EngineAdapter` is their adapters' shared face.

`open(ctx)` starts, all on 127.0.0.1: PostgreSQL (the thread log), Toxiproxy (between the
workers and PostgreSQL, link "pg", and between the workers and the world, link "world"), the
engine's own server, the world server (fake model provider, outbox, ledger, cards, observer,
timers) and, per deployment, `ctx.hosts` worker processes (hosts `depN.hI`), each its own
process group. The components are processes, or containers where the engine supports it
(`--components`).

Time is virtual, as on the simulator, so the same scenario gets the same verdict: the
workers keep their durable timers and `ctx.time()` with the harness
(`DURABLE_CHAOS_TIMERS_URL`, the world server's `/timers/*`), which fires a timer through
the engine once its clock passes the deadline. The clock (`AutojumpClock`) counts real time
at rate 1 and jumps to the next deadline (a timer, or the runner's next step) when the
engine is quiescent: nothing of the app running or ready to run in the engine, no request to
the world in flight, and nothing done by the harness or the world for `settle` real seconds.
Journals, suspension, pinning, crashes and recovery stay the engine's own; 5 minutes and 8
days are 5 minutes and 8 days (`Config()`), and an 8-day wait costs seconds. History times
are these virtual seconds, with the wall clock beside them. An engine that stays busy for
`stall_after` real seconds does not hold the clock: it jumps all the same, and
`clock.stalled` records what kept the engine busy.

Faults with a duration d (a GC pause, a pause at a fault point, a network toxic, the
`RESTART_AFTER` downtime of a crash) are where real seconds matter: what they provoke is the
stack's real timeouts (the engine's, PostgreSQL's idle-transaction and lock timeouts). So a
fault holds for min(d, `fault_floor`) real seconds, during which the clock does not jump (it
runs with real time, and every timeout of the stack, all shorter than the floor, fires as it
would); then the clock moves to the fault's end (start + d) if it is not there yet, and the
fault ends. Nothing can happen inside a stopped process, and the rest of the system has had
every real timeout to react, so what the skipped rest of a long pause could still bring is
only timers, and those fire at once.

Faults: gc-pause (SIGSTOP/SIGCONT of a host's process group), crash (SIGKILL, then the same
version restarts; a host that crashes itself at a fault point is restarted the same way),
redeploy, the named fault points (the worker asks the harness at each one and stops or kills
itself when armed; `reset-after-commit` is a third action, see `arm`), and network toxics
(`NetworkFaults.toxic`). The operator retires a superseded deployment (stops its workers)
once the engine shows nothing pinned to it.
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
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from contract.faultpoints import POINTS as FAULT_POINTS
from contract.network import LINKS, TOXICS
from contract.ports import Config
from contract.thresholds import CheckConfig
from harness.adapters.base import WORLD_ENDPOINTS, RunContext, record_committed
from harness.clock import AutojumpClock
from harness.components.net import wait_until
from harness.components.procs import ProcessGroup, sweep_stale
from harness.components.stack import ComponentStack, component_stack
from harness.components.workers import SharedListener, WorkerProcess
from harness.errors import UsageError
from harness.faults import RESTART_AFTER
from harness.history import History
from harness.world import World
from harness.world_server import Timer, TimerTable, WorldServer

__all__ = [
    "KEEP_LOGS_ENV",
    "REPO_ROOT",
    "RESET_AFTER_COMMIT",
    "Deployment",
    "EngineAdapter",
    "EngineRuntime",
    "Hold",
    "Host",
    "Variant",
    "real_clock",
]

KEEP_LOGS_ENV = "DURABLE_CHAOS_KEEP_LOGS"
LOG_PREFIX = "durable-chaos-run-"
REPO_ROOT = Path(__file__).resolve().parents[2]

Variant = Literal["reference", "naive"]

RESET_AFTER_COMMIT = "reset-after-commit"
_APPEND_POINTS = ("threadlog.append.before_lock", "threadlog.append.locked")
# PostgreSQL settings that let the harness hold one COMMIT at the server (see `arm`):
# synchronous replication to a standby that never comes is configured, but no session waits
# for it unless the harness switches synchronous_commit on for the duration of the hold. Both
# go through ALTER SYSTEM, not the command line, which would outrank later changes.
_HOLD_STANDBY = "durable_chaos_hold"
_MAX_RESTARTS = 20
# What every real path runs through in the harness's process: this module, the components,
# event loops, subprocess, socket servers and the database and HTTP clients (see
# `real_clock`); each engine adds its own adapter module and client libraries.
_REAL_TIME_MODULES = (
    "harness.adapters.engine", "harness.components", "harness.world_server", "asyncio",
    "concurrent", "subprocess", "socketserver", "http.server", "selectors", "threading",
    "psycopg", "httpx", "httpcore", "h11", "anyio",
)


@contextlib.contextmanager
def real_clock(modules: tuple[str, ...]) -> Iterator[None]:
    """Real time for the real path, even inside a freezegun freezer.

    The suite runner freezes the wall clock for the whole suite so that simulated handlers
    read virtual time; that freezer also stops `time.monotonic`, which event loops, socket
    and database timeouts and this runtime's clock all need to move. freezegun answers
    with the real clock to callers from the modules of its ignore list: `modules` are
    added to the active freezer's list while a runtime is open, and taken away after.
    """
    api = sys.modules.get("freezegun.api")
    lists: list[tuple[str, ...]] | None = getattr(api, "ignore_lists", None)
    if not lists:
        yield
        return
    index, before = len(lists) - 1, lists[-1]
    lists[index] = tuple(before) + modules
    try:
        yield
    finally:
        if len(lists) > index:
            lists[index] = before


@dataclass(eq=False)
class Host:
    name: str
    worker: WorkerProcess
    deployment: Deployment
    restarts: int = 0


@dataclass(eq=False)
class Deployment:
    """One version of the code and its hosts. `id` is the engine's name for it."""

    version: str
    index: int
    hosts: list[Host] = field(default_factory=list)
    id: str = ""
    # The socket its hosts accept from, where the engine calls its workers (Restate); None
    # where the workers poll the engine.
    listener: SharedListener | None = None
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
class Hold:
    """A fault with a duration: it ends once `real_until` (monotonic) has passed, and the
    clock is then moved to `until` (virtual) if it is behind (see the module docstring).
    `started` is when it began (monotonic)."""

    host: Host
    action: Literal["resume", "restart"]
    until: float
    real_until: float
    started: float = field(default_factory=time.monotonic)


@dataclass
class EngineRuntime(ABC):
    """One run on a real engine. Capabilities: background, cancel, gc-pause, crash, deploy,
    arm (every point of contract.faultpoints), network; the workers call the world's provider
    and identity over HTTP.

    The lifecycle, written once here: `__post_init__` builds the components (`_init_engine`
    adds the engine's own), `_start` starts them (`_start_engine`, then `_open_engine`
    connects and deploys v1); the runner then calls `advance`, the drive methods (each an
    `_invoke`) and the fault capabilities; `finish` heals, waits for the engine to settle and
    records the thread logs; `close` stops everything (`_stop_workers`, `_stop_engine`).
    """

    world_endpoints: ClassVar[tuple[str, ...]] = WORLD_ENDPOINTS
    points: ClassVar[tuple[str, ...]] = tuple(FAULT_POINTS)
    # The engine's name: the namespace of its own diagnostic records (`restate.started`).
    engine_name: ClassVar[str]
    # What `finish` waits for, in words ("Restate invocations").
    work: ClassVar[str]
    # The engine adapter's own modules and client libraries (see `real_clock`).
    real_time_modules: ClassVar[tuple[str, ...]] = ()

    ctx: RunContext
    variant: Variant
    config: Config
    model_latency: float = 0.05
    poll_interval: float = 0.1
    drain_timeout: float = 30.0
    toxic_latency_ms: int = 1000
    # Real seconds without any activity before the engine counts as quiescent.
    settle: float = 0.3
    # The longest real stretch of a fault with a duration (see the module docstring): above
    # every timeout of the stack the harness starts (Restate's abort 5 s and keep-alive 1 s,
    # PostgreSQL idle-in-transaction 2 s and lock 1 s).
    fault_floor: float = 6.0
    # Real seconds of an engine never quiescent after which the clock jumps anyway.
    stall_after: float = 60.0
    history: History = field(init=False)
    world: World = field(init=False)

    def __post_init__(self) -> None:
        self._exit = ExitStack()
        self._exit.enter_context(real_clock(_REAL_TIME_MODULES + self.real_time_modules))
        self.history = self.ctx.history
        self.clock = AutojumpClock()
        self.timers = TimerTable(self.clock.now)
        self.history.bind_clock(self.now)
        self._random = random.Random(self.ctx.seed)
        self._lock = threading.RLock()
        self._deployments: list[Deployment] = []
        self._holds: list[Hold] = []
        self._last_action = time.monotonic()
        # The engine's last view of the app's unfinished invocations, by id.
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
        # The logs of the run's workers and components: removed when the run closes (kept
        # with DURABLE_CHAOS_KEEP_LOGS=1 for post-mortems); the pid in the name lets the next
        # run remove those of a harness that was killed.
        sweep_stale(Path(tempfile.gettempdir()), LOG_PREFIX)
        self.log_dir = Path(tempfile.mkdtemp(prefix=f"{LOG_PREFIX}{os.getpid()}-"))
        self.stack = self._component_stack()
        self.pg = self.stack.postgres()
        self.toxiproxy = self.stack.toxiproxy(log_dir=self.log_dir)
        self._init_engine()
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

    # -- what each engine supplies --------------------------------------------------------

    def _component_stack(self) -> ComponentStack:
        """Processes or containers (`--components`): the same interfaces either way."""
        return component_stack()

    @abstractmethod
    def _init_engine(self) -> None:
        """The engine's own components and state, not started yet."""

    @abstractmethod
    def _start_engine(self) -> None:
        """Start the engine's server (PostgreSQL and Toxiproxy are up)."""

    @abstractmethod
    def _open_engine(self, started: float) -> None:
        """Connect to the engine, record `<engine>.started` and deploy v1 (every component
        is up; `started` is when the start began, monotonic)."""

    @abstractmethod
    def _invoke(self, service: str, handler: str, key: str, arg: Any) -> None:
        """Invoke a handler of the app through the engine (a one-way send)."""

    @abstractmethod
    def _fire(self, timer: Timer) -> None:
        """Hand a due timer to the engine: wake the sleep, or make the delayed send."""

    @abstractmethod
    def _observe_invocations(self) -> list[dict[str, Any]]:
        """Read the engine's invocations (recording what changed); returns the rows
        `_engine_quiescent` judges."""

    @abstractmethod
    def _engine_quiescent(self, rows: list[dict[str, Any]]) -> bool:
        """Whether the engine, by its own state, runs nothing that goes on by itself."""

    @abstractmethod
    def _drain(self) -> None:
        """Retire the superseded deployments the engine shows nothing pinned to."""

    @abstractmethod
    def deploy(self, version: str) -> str:
        """Start a version's hosts and route new work to it; returns its deployment id."""

    @abstractmethod
    def _stop_engine(self) -> None:
        """Stop the engine's server and close its clients."""

    @abstractmethod
    def _components(self) -> tuple[ProcessGroup | None, ...]:
        """The components' process groups (None: not started, or not ours)."""

    def _not_quiet(self) -> dict[str, Any]:
        """What was left running when `finish` gave up waiting (for `<engine>.not_quiet`)."""
        return {}

    def _stalled_on(self) -> list[dict[str, Any]]:
        """What keeps the engine busy (for `clock.stalled`)."""
        return []

    def _record_failures(self) -> None:
        """Why invocations failed, where the engine says so (at the end of `finish`)."""
        return None

    # -- lifecycle ------------------------------------------------------------------------

    def _start(self) -> None:
        started = time.monotonic()
        self.history.bind_clock(lambda: 0.0)  # startup happens "before" time 0
        self.pg.start()
        self.toxiproxy.start()
        self._start_engine()
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
        self._open_engine(started)
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
        try:
            self._stop_workers()
        finally:
            # Whatever failed above, the servers go too.
            for stop in (self.world_server.stop, self._stop_engine, self.toxiproxy.stop,
                         self.pg.stop):
                with contextlib.suppress(Exception):
                    stop()

    def _stop_workers(self) -> None:
        """Stop every worker host of the run."""
        self.stack.stop_workers([h.worker for d in self._deployments for h in d.hosts])

    def process_groups(self) -> list[int]:
        """Process group ids this runtime started (for leak checks): every worker's and
        every component's (`_components`)."""
        groups: list[ProcessGroup] = [h.worker.process for d in self._deployments
                                      for h in d.hosts if h.worker._group is not None]
        groups += [comp for comp in self._components() if comp is not None]
        return [g.pgid for g in groups]

    # -- driving --------------------------------------------------------------------------

    def advance(self, until: float) -> None:
        """Run until the clock reads `until`, jumping whenever the engine is quiescent.

        An engine that stays busy for `stall_after` real seconds (an invocation retrying
        for ever, say) would otherwise make the run last as long as the scenario: the clock
        then jumps all the same, and `clock.stalled` records what kept it busy.
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
                self.history.add("clock.stalled", "info", data={
                    "seconds": round(real - busy_since, 1), "active": self._stalled_on()[:10]})
                busy_since, quiet = None, True
            if quiet:
                deadline = self.timers.next_deadline()
                target = until if deadline is None else min(until, deadline)
                if self.clock.jump_to(target) > 0:
                    self._jumps += 1
                continue
            time.sleep(min(self.poll_interval, max(0.0, until - now)))

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

    def _fire_due(self) -> None:
        """Fire the engine's timers whose deadline the clock has passed."""
        now = self.clock.now()
        for timer in self.timers.due(now):
            self._fired += 1
            self._fire_lag = max(self._fire_lag, now - timer.deadline)
            self._acting.append(timer.deadline)
            self._last_action = time.monotonic()
            try:
                self._fire(timer)
            except Exception as exc:
                # A sleep whose invocation moved on (its other branch won) has no one to wake.
                self.history.add(f"{self.engine_name}.timer_unfired", "info",
                                 invocation=timer.invocation,
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
        return self._engine_quiescent(rows)

    def finish(self) -> None:
        """Heal what is still broken, wait (bounded) until the engine has nothing of this app
        left to run (quiescent: what still waits, waits on a person or a timer past the
        horizon, as on the simulator), then record the thread logs."""
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
            wait_until(quiet, timeout=self.drain_timeout, what=self.work,
                       interval=self.poll_interval)
        except TimeoutError as exc:
            self.history.add(f"{self.engine_name}.not_quiet",
                             data={"error": str(exc), **self._not_quiet()})
        self._tick()
        self._record_failures()
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
                record_committed(self.history, thread_id, entry)
            current = await self.store.current(thread_id)
            if current is not None:
                self.history.add("threadlog.owner", session=thread_id, epoch=current.epoch,
                                 data={"owner": current.owner})

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

    def _held(self, dep: Deployment) -> bool:
        """Whether a fault still holds a host of `dep` (it must come back before `dep` is
        retired)."""
        with self._lock:
            return any(h.host.deployment is dep for h in self._holds)

    def _stop_hosts(self, dep: Deployment) -> None:
        self.stack.stop_workers([h.worker for h in dep.hosts])

    def _end_hold(self, hold: Hold) -> None:
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

    def _hold(self, host: Host, action: Literal["resume", "restart"], duration: float) -> float:
        until = self.clock.now() + duration
        with self._lock:
            self._holds.append(Hold(host, action, until,
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

    def _deployment_of(self, host: str) -> str | None:
        for dep in self._deployments:
            for h in dep.hosts:
                if h.name == host:
                    return dep.id or None
        return None

    # -- deployments and hosts --------------------------------------------------------------

    def _worker_env(self, version: str, host: str) -> dict[str, str]:
        """The environment every worker host reads (`reference_impl.worker_common`)."""
        return {
            "DURABLE_CHAOS_VERSION": version,
            "DURABLE_CHAOS_VARIANT": self.variant,
            "DURABLE_CHAOS_WORLD_URL": f"http://127.0.0.1:{self._world_proxy.listen_port}",
            "DURABLE_CHAOS_OBSERVER_URL": self.world_server.url,
            "DURABLE_CHAOS_PG": (f"host=127.0.0.1 port={self._pg_proxy.listen_port} "
                                 "user=postgres dbname=postgres"),
            "DURABLE_CHAOS_CONFIG": json.dumps({
                "hand_off_after": self.config.hand_off_after,
                "max_wait": self.config.max_wait,
                "max_steps_per_turn": self.config.max_steps_per_turn}),
            "DURABLE_CHAOS_HOST": host,
            "DURABLE_CHAOS_TIMERS_URL": self.world_server.url,
        }

    def _start_hosts(self, dep: Deployment,
                     worker: Callable[[str, dict[str, str]], WorkerProcess]) -> None:
        """Start `ctx.hosts` hosts of `dep` (`depN.hI`), each `worker(name, env)`, in
        parallel, then wait until each is ready."""
        for i in range(1, max(1, self.ctx.hosts) + 1):
            name = f"dep{dep.index}.h{i}"
            dep.hosts.append(Host(name, worker(name, self._worker_env(dep.version, name)), dep))
        for host in dep.hosts:
            host.worker.spawn()
        for host in dep.hosts:
            host.worker.wait_ready()

    def _live(self) -> list[Deployment]:
        return [d for d in self._deployments if not d.drained]

    def _select(self, selector: str) -> Host:
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

    # -- capabilities: gc-pause, crash ------------------------------------------------------

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


@dataclass(frozen=True)
class EngineAdapter:
    """What the reference's adapters on a real engine share: the variant, the `Config` the
    workers run with, the checkers' thresholds, and the preflight of PostgreSQL and
    Toxiproxy; each engine adds its own name, preflight (`_preflight_engine`) and `open`."""

    name: str
    description: str
    engine: str = "real"
    variant: Variant = "reference"
    config: Config = field(default_factory=Config)

    def check_config(self) -> CheckConfig:
        # The simulator's thresholds: time is scenario time on every engine.
        return CheckConfig(hand_off_after=self.config.hand_off_after,
                           max_wait=self.config.max_wait,
                           max_steps_per_turn=self.config.max_steps_per_turn)

    def preflight(self) -> None:
        """Before any run: PostgreSQL and Toxiproxy are installed, and what the engine needs
        (see harness.adapters.base.Preflight)."""
        from harness.components.postgres import find_binaries
        from harness.components.toxiproxy import find_toxiproxy_server

        find_binaries()
        find_toxiproxy_server()
        self._preflight_engine()

    def _preflight_engine(self) -> None:
        """What the engine itself needs before a run (its binaries, its package)."""
        return None
