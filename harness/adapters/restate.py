"""The reference implementation (and its naive variant) on a real Restate server.

`open(ctx)` starts, all on 127.0.0.1: PostgreSQL (the thread log), restate-server (unless the
user points at their own with `DURABLE_CHAOS_RESTATE_INGRESS_URL` / `..._ADMIN_URL`),
Toxiproxy (between the workers and PostgreSQL, and between the workers and the world), the
world server (fake model provider, outbox, ledger, cards, observer) and one worker process
group per deployment, registered with `POST /deployments`.

Time is real and scaled: scenario time maps onto real seconds piecewise-linearly so that
`hand_off_after` (5 min) lands on the scaled `hand_off_after` (5 s) and `max_wait` (8 days)
on the scaled `max_wait` (25 s); `check_config()` gives the checkers the same thresholds.
History times are real seconds since the run started.

The operator retires a superseded deployment (stops its worker) once Restate's own
`sys_invocation` shows nothing pinned to it; each change in that count is recorded as
`restate.pinned` {deployment, count}, so `pinning-bound` judges what Restate measured.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from harness.adapters.base import RunContext
from harness.checkers.base import CheckConfig
from harness.components.net import free_port, wait_until
from harness.components.postgres import PostgresServer
from harness.components.restate import RestateServer
from harness.components.toxiproxy import ToxiproxyServer
from harness.components.workers import WorkerProcess
from harness.errors import UsageError
from harness.history import History
from harness.world import World
from harness.world_server import WorldServer
from reference_impl.ports import Config
from reference_impl.threadlog_pg import PostgresThreadLogStore

__all__ = ["NaiveRestateAdapter", "ReferenceRestateAdapter", "RestateRuntime", "scale_time"]

INGRESS_ENV = "DURABLE_CHAOS_RESTATE_INGRESS_URL"
ADMIN_ENV = "DURABLE_CHAOS_RESTATE_ADMIN_URL"
_REPO_ROOT = Path(__file__).resolve().parents[2]

SCALED = Config(hand_off_after=5.0, max_wait=25.0)
UNSCALED = Config()
Variant = Literal["reference", "naive"]


def scale_time(t: float, scaled: Config = SCALED, unscaled: Config = UNSCALED) -> float:
    """Scenario seconds -> real seconds: 0 -> 0, hand_off_after -> scaled hand_off_after,
    max_wait -> scaled max_wait, linear in between and beyond."""
    h0, h1 = unscaled.hand_off_after, scaled.hand_off_after
    m0, m1 = unscaled.max_wait, scaled.max_wait
    if t <= h0:
        return t * h1 / h0
    return h1 + (t - h0) * (m1 - h1) / (m0 - h0)


@dataclass
class _Deployment:
    version: str
    host: str
    worker: WorkerProcess
    id: str = ""
    superseded: bool = False
    drained: bool = False
    last_count: int | None = None


@dataclass
class RestateRuntime:
    """One run on the real stack. Capabilities: gc-pause, crash, deploy, arm, toxics."""

    ctx: RunContext
    variant: Variant
    config: Config
    restate_ingress_url: str | None = None
    restate_admin_url: str | None = None
    model_latency: float = 0.05
    poll_interval: float = 0.1
    drain_timeout: float = 30.0
    history: History = field(init=False)
    world: World = field(init=False)

    def __post_init__(self) -> None:
        self.history = self.ctx.history
        self._t0 = time.monotonic()
        self.history.bind_clock(self.now)
        self._random = random.Random(self.ctx.seed)
        self._deployments: list[_Deployment] = []
        self._resume_at: list[tuple[float, _Deployment]] = []
        self._armed: dict[str, list[str]] = {}
        self._arm_durations: dict[str, list[float]] = {}
        self._closed = False
        self._invocations: dict[str, str] = {}
        self.pg = PostgresServer()
        self.toxiproxy = ToxiproxyServer()
        ingress = self.restate_ingress_url or os.environ.get(INGRESS_ENV)
        admin = self.restate_admin_url or os.environ.get(ADMIN_ENV)
        self.restate = (RestateServer.external(ingress, admin) if ingress and admin
                        else RestateServer())
        self.world_server = WorldServer(self.history, now=self.now,
                                        model_latency=self.model_latency,
                                        deployment_of=self._deployment_of,
                                        on_fault_point=self._fault_point)
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
        self._pg_proxy_port = free_port()
        toxi.create_proxy("pg", self._pg_proxy_port, f"127.0.0.1:{self.pg.port}")
        self._world_proxy_port = free_port()
        toxi.create_proxy("world", self._world_proxy_port, f"127.0.0.1:{self.world_server.port}")
        self.store = PostgresThreadLogStore(self.pg.conninfo)
        asyncio.run(self.store.ensure_schema())
        self.history.add("restate.started", data={
            "seconds": round(time.monotonic() - started, 3),
            "external": self.restate.process is None,
            "ingress": self.restate.ingress_url, "admin": self.restate.admin_url})
        self.deploy("v1")
        self._t0 = time.monotonic()
        self.history.bind_clock(self.now)

    def now(self) -> float:
        return time.monotonic() - self._t0

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        external = getattr(self.restate, "_external", False)
        for dep in self._deployments:
            if dep.worker.alive:
                try:
                    dep.worker.resume()
                except Exception:
                    pass
            dep.worker.stop()
            if external and dep.id:
                try:
                    self.restate.admin.delete_deployment(dep.id)
                except Exception:
                    pass
        self.world_server.stop()
        self.restate.stop()
        self.toxiproxy.stop()
        self.pg.stop()

    # -- driving --------------------------------------------------------------------------

    def advance(self, until: float) -> None:
        target = scale_time(until, self.config)
        while True:
            self._tick()
            remaining = target - self.now()
            if remaining <= 0:
                return
            time.sleep(min(self.poll_interval, remaining))

    def send_message(self, session: str, message: dict[str, object]) -> None:
        self.restate.admin.send("Controller", "onMessage", session, message)

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        self.restate.admin.send("PendingToolCall", "answer", tool_call,
                                {"decision": decision, "user": user})

    def background(self, session: str, tool_call: str) -> None:
        self.restate.admin.send("Controller", "background", session, {"tool_call": tool_call})

    def cancel(self, session: str) -> None:
        self.restate.admin.send("Controller", "cancel", session, {})

    def finish(self) -> None:
        """Wait (bounded) until Restate has nothing left to run, then record the thread logs."""
        admin = self.restate.admin

        def quiet() -> bool | None:
            self._tick()
            rows = admin.query("SELECT count(*) AS n FROM sys_invocation "
                               "WHERE status <> 'completed'")
            return True if int(rows[0].get("n", 0)) == 0 else None

        try:
            wait_until(quiet, timeout=self.drain_timeout, what="Restate invocations",
                       interval=self.poll_interval)
        except TimeoutError as exc:
            left = admin.invocations("status <> 'completed'")
            self.history.add("restate.not_quiet", data={"error": str(exc), "left": left[:20]})
        self._tick()
        asyncio.run(self._record_logs())

    async def _record_logs(self) -> None:
        sessions = {r.session for r in self.history.of_kind("threadlog.assigned") if r.session}
        for thread_id in sorted(sessions):
            for entry in await self.store.read(thread_id):
                self.history.add("threadlog.committed", session=thread_id, epoch=entry.epoch,
                                 data={"seq": entry.seq, "owner": entry.owner,
                                       "kind": entry.kind})
            current = await self.store.current(thread_id)
            if current is not None:
                self.history.add("threadlog.owner", session=thread_id, epoch=current.epoch,
                                 data={"owner": current.owner})

    # -- the operator ---------------------------------------------------------------------

    def _tick(self) -> None:
        now = self.now()
        for item in list(self._resume_at):
            due, dep = item
            if due <= now:
                self._resume_at.remove(item)
                if dep.worker.alive:
                    dep.worker.resume()
                    self.history.add("host.resumed", host=dep.host, deployment=dep.id)
        self._observe_invocations()
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
            if count == 0 and not any(d is dep for _, d in self._resume_at):
                dep.drained = True
                self.history.add("deployment.drained", deployment=dep.id,
                                 data={"version": dep.version, "source": "sys_invocation"})
                dep.worker.stop()

    def _observe_invocations(self) -> None:
        """Invocation lifecycle as Restate's `sys_invocation` shows it (source of truth for
        pinning): started (pinned to a deployment), suspended, resumed, completed."""
        rows = self.restate.admin.query(
            "SELECT id, target, status, pinned_deployment_id FROM sys_invocation "
            "WHERE status <> 'completed' AND pinned_deployment_id IS NOT NULL")
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

    def _deployment_of(self, host: str) -> str | None:
        for dep in self._deployments:
            if dep.host == host:
                return dep.id or None
        return None

    # -- capabilities ---------------------------------------------------------------------

    def deploy(self, version: str) -> str:
        version = version or f"v{len(self._deployments) + 1}"
        host = f"{version}-w{len(self._deployments) + 1}"
        env = {
            "DURABLE_CHAOS_VERSION": version,
            "DURABLE_CHAOS_VARIANT": self.variant,
            "DURABLE_CHAOS_WORLD_URL": f"http://127.0.0.1:{self._world_proxy_port}",
            "DURABLE_CHAOS_OBSERVER_URL": self.world_server.url,
            "DURABLE_CHAOS_PG": (f"host=127.0.0.1 port={self._pg_proxy_port} user=postgres "
                                 "dbname=postgres"),
            "DURABLE_CHAOS_CONFIG": json.dumps({
                "hand_off_after": self.config.hand_off_after, "max_wait": self.config.max_wait,
                "max_steps_per_turn": self.config.max_steps_per_turn}),
            "DURABLE_CHAOS_HOST": host,
        }
        worker = WorkerProcess("reference_impl.worker:app", env=env, name=f"worker-{host}",
                               pythonpath=[_REPO_ROOT], cwd=_REPO_ROOT)
        dep = _Deployment(version, host, worker)
        self._deployments.append(dep)
        worker.start()
        dep.id = self.restate.admin.register_deployment(worker.url)
        self.history.add("deployment.registered", deployment=dep.id, host=host,
                         data={"version": version, "hosts": [host], "endpoint": worker.url})
        for old in self._deployments[:-1]:
            if not old.superseded:
                old.superseded = True
                self.history.add("deployment.superseded", deployment=old.id,
                                 data={"version": old.version, "by": dep.id})
        self._tick()
        return dep.id

    def _select(self, selector: str) -> _Deployment:
        live = [d for d in self._deployments if not d.drained]
        for dep in self._deployments:
            if selector in (dep.host, dep.id):
                return dep
        if selector == "owner":
            for record in reversed(self.history.records):
                if record.kind == "threadlog.assigned" and record.host:
                    for dep in live:
                        if dep.host == record.host:
                            return dep
            return live[-1]
        if selector == "any":
            return self._random.choice(live)
        if selector.startswith("latest"):
            return live[-1]
        raise UsageError(f"unknown host {selector!r}: use 'owner', 'any', 'latest/1' or one "
                         f"of {[d.host for d in self._deployments]}")

    def pause_host(self, host: str, duration: float) -> str:
        dep = self._select(host)
        dep.worker.pause()
        self._resume_at.append((self.now() + scale_time(duration, self.config), dep))
        return dep.host

    def crash_host(self, host: str) -> str:
        dep = self._select(host)
        dep.worker.restart(kill=True)
        self.history.add("host.restarted", host=dep.host, deployment=dep.id)
        return dep.host

    def arm(self, point: str, action: str, duration: float, times: int) -> None:
        self._armed.setdefault(point, []).extend([action] * times)
        self._arm_durations.setdefault(point, []).extend([duration] * times)

    def _fault_point(self, point: str, host: str, pid: int) -> str | None:
        # Called from the world server's thread while a worker waits for the answer.
        armed = self._armed.get(point)
        if not armed:
            return None
        action = armed.pop(0)
        duration = self._arm_durations[point].pop(0)
        if action == "pause":
            for dep in self._deployments:
                if dep.host == host:
                    self._resume_at.append((self.now() + scale_time(duration, self.config), dep))
        return action

    # network faults (not yet scheduled by the runner: call directly)
    def toxic(self, proxy: Literal["pg", "world"], kind: str, **attributes: int) -> str:
        toxi = self.toxiproxy.client
        if kind == "down":
            toxi.down(proxy)
            return "down"
        return toxi.add_toxic(proxy, kind, dict(attributes))

    def heal(self, proxy: Literal["pg", "world"]) -> None:
        toxi = self.toxiproxy.client
        toxi.up(proxy)
        toxi.remove_toxics(proxy)

    def process_groups(self) -> list[int]:
        """Process group ids this runtime started (for leak checks)."""
        groups = [d.worker.process.pgid for d in self._deployments if d.worker._group]
        for comp in (self.restate.process, self.toxiproxy.process):
            if comp is not None:
                groups.append(comp.pgid)
        return groups


@dataclass(frozen=True)
class ReferenceRestateAdapter:
    """The reference implementation on a real Restate server (scaled time)."""

    name: str = "reference-restate"
    description: str = ("the reference implementation on a real Restate server, with "
                        "PostgreSQL and Toxiproxy (scaled time)")
    engine: str = "real"
    variant: Variant = "reference"
    config: Config = SCALED
    restate_ingress_url: str | None = None
    restate_admin_url: str | None = None

    def check_config(self) -> CheckConfig:
        return CheckConfig(hand_off_after=self.config.hand_off_after,
                           max_wait=self.config.max_wait, tolerance=1.5,
                           liveness_bound=self.config.max_wait)

    def open(self, ctx: RunContext) -> RestateRuntime:
        return RestateRuntime(ctx, self.variant, self.config,
                              restate_ingress_url=self.restate_ingress_url,
                              restate_admin_url=self.restate_admin_url)


@dataclass(frozen=True)
class NaiveRestateAdapter(ReferenceRestateAdapter):
    """The naive 'before' design (in-call wait up to max_wait) on a real Restate server."""

    name: str = "naive-restate"
    description: str = ("the naive 'before' design (in-call wait, no hand-off) on a real "
                        "Restate server (scaled time)")
    variant: Variant = "naive"
