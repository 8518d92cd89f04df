"""The reference implementation (and its naive variant) on a real Restate server.

A `harness.adapters.engine.EngineRuntime` (the stack, the operator, virtual time, faults),
with what is Restate's own. restate-server is started by the harness unless the user points
at their own with `DURABLE_CHAOS_RESTATE_INGRESS_URL` / `..._ADMIN_URL`; each deployment's
hosts are registered with `POST /deployments`.

Hosts of one deployment serve one endpoint: they accept from one listening socket the harness
owns (`SharedListener`), as replicas behind a load balancer would. Restate multiplexes
invocations over HTTP/2 connections to the endpoint; a paused host keeps its connections
open, so the harness's restate-server pings them every second and drops a connection after a
second without an answer (`http2-keep-alive-*`): Restate's retry of the attempt then opens a
new connection, which a live host accepts. That is the takeover of a thread by another host
(epoch + 1) while the old owner is frozen. A user's own Restate server keeps its own
keep-alive settings: there a paused host is only abandoned after its ping timeout (20 s by
default) or the invoker's abort timeout.

Time is virtual (see `harness.adapters.engine`): a sleep (`ctx.sleep`) is an awakeable the
harness resolves through the ingress once its clock passes the deadline, a delayed send is a
one-way call it makes then. The engine is quiescent when no invocation of the app is
running, ready or backing off in `sys_invocation` and every invocation the harness started
or woke has been seen to react.

The operator retires a superseded deployment (stops its workers) once Restate's own
`sys_invocation` shows nothing pinned to it; each change in that count is recorded as
`restate.pinned` {deployment, count}, so `pinning-bound` judges what Restate measured.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.adapters.base import RunContext
from harness.adapters.engine import (
    REPO_ROOT,
    Deployment,
    EngineAdapter,
    EngineRuntime,
    Variant,
)
from harness.capabilities import NetworkFaults
from harness.components.net import wait_until
from harness.components.procs import ProcessGroup
from harness.components.restate import RestateServer
from harness.components.workers import SharedListener
from harness.errors import UsageError
from harness.world_server import Timer

__all__ = [
    "ADMIN_ENV",
    "INGRESS_ENV",
    "NaiveRestateAdapter",
    "NetworkFaults",
    "ReferenceRestateAdapter",
    "RestateRuntime",
    "use_restate",
]

INGRESS_ENV = "DURABLE_CHAOS_RESTATE_INGRESS_URL"
ADMIN_ENV = "DURABLE_CHAOS_RESTATE_ADMIN_URL"

# Statuses of `sys_invocation` in which an invocation makes progress by itself in real time.
_ACTIVE = frozenset({"ready", "running", "backing-off", "invoked"})


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


@dataclass
class RestateRuntime(EngineRuntime):
    """One run on the real stack with restate-server. Capabilities: background, cancel,
    gc-pause, crash, deploy, arm (every point of contract.faultpoints), network."""

    engine_name: ClassVar[str] = "restate"
    work: ClassVar[str] = "Restate invocations"
    real_time_modules: ClassVar[tuple[str, ...]] = ("harness.adapters.restate",)

    restate_ingress_url: str | None = None
    restate_admin_url: str | None = None
    keep_alive: float = 1.0
    # How long (real seconds) a harness action may go unseen in sys_invocation.
    expect_timeout: float = 2.0

    def _init_engine(self) -> None:
        # Invocations the harness started or woke, not yet seen to react: id -> real deadline
        # after which the harness stops waiting for a sign (and the row it last saw, if any).
        self._expect: dict[str, tuple[float, str | None]] = {}
        self._invocations: dict[str, str] = {}
        self._services: tuple[str, ...] = ()
        ingress = self.restate_ingress_url or os.environ.get(INGRESS_ENV)
        admin = self.restate_admin_url or os.environ.get(ADMIN_ENV)
        if bool(ingress) != bool(admin):
            raise UsageError(f"give both the Restate ingress and admin URLs ({INGRESS_ENV} "
                             f"and {ADMIN_ENV}), or neither to let the harness start its own")
        self.external = bool(ingress and admin)
        self.restate = (RestateServer.external(str(ingress), str(admin)) if self.external
                        else self.stack.restate(http2_keep_alive_interval=self.keep_alive,
                                                http2_keep_alive_timeout=self.keep_alive))

    # -- lifecycle ------------------------------------------------------------------------

    def _start_engine(self) -> None:
        self.restate.start()

    def _open_engine(self, started: float) -> None:
        self.history.add("restate.started", data={
            "seconds": round(time.monotonic() - started, 3), "external": self.external,
            "ingress": self.restate.ingress_url, "admin": self.restate.admin_url,
            "logs": str(self.log_dir)})
        self.deploy("v1")
        if self.external:
            self._clean_restate("before the run")

    def _stop_workers(self) -> None:
        if self.external and self._services:
            with contextlib.suppress(Exception):
                self._clean_restate("after the run")
        super()._stop_workers()
        for dep in self._deployments:
            if dep.listener is not None:
                dep.listener.close()
            if self.external and dep.id:
                with contextlib.suppress(Exception):
                    self.restate.admin.delete_deployment(dep.id)

    def _stop_engine(self) -> None:
        self.restate.stop()

    def _components(self) -> tuple[ProcessGroup | None, ...]:
        return (self.restate.process, self.toxiproxy.process, self.pg.process)

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

    def _sent(self, invocation_id: str) -> None:
        self._last_action = time.monotonic()
        with self._lock:
            self._expect[invocation_id] = (self._last_action + self.expect_timeout, None)

    def _invoke(self, service: str, handler: str, key: str, arg: Any) -> None:
        self._sent(self.restate.admin.send(service, handler, key, arg))

    # -- the clock --------------------------------------------------------------------------

    def _fire(self, timer: Timer) -> None:
        admin = self.restate.admin
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

    def _engine_quiescent(self, rows: list[dict[str, Any]]) -> bool:
        real = time.monotonic()
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

    def _stalled_on(self) -> list[dict[str, Any]]:
        return [r for r in self._rows.values() if str(r.get("status")) in _ACTIVE]

    def _not_quiet(self) -> dict[str, Any]:
        left = self.restate.admin.invocations(f"status <> 'completed' AND {self._ours()}")
        return {"left": left[:20]}

    def _ours(self) -> str:
        if not self._services:
            return "true"
        return "target_service_name IN (" + ", ".join(f"'{s}'" for s in self._services) + ")"

    # -- the operator ---------------------------------------------------------------------

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
            if count == 0 and not self._held(dep):
                dep.drained = True
                self.history.add("deployment.drained", deployment=dep.id,
                                 data={"version": dep.version, "source": "sys_invocation"})
                self._stop_hosts(dep)
                if dep.listener is not None:
                    dep.listener.close()

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

    # -- capabilities: deploy ---------------------------------------------------------------

    def deploy(self, version: str) -> str:
        index = len(self._deployments) + 1
        version = version or f"v{index}"
        listener = SharedListener()
        dep = Deployment(version, index, listener=listener)
        self._deployments.append(dep)
        self._start_hosts(dep, lambda name, env: self.stack.worker(
            "reference_impl.worker:app", env=env, name=f"worker-{name}",
            pythonpath=[REPO_ROOT], cwd=REPO_ROOT, listener=listener, log_dir=self.log_dir))
        dep.id = self.restate.admin.register_deployment(listener.url)
        if not self._services:
            rows = self.restate.admin.query(
                f"SELECT name FROM sys_service WHERE deployment_id = '{dep.id}'")
            self._services = tuple(sorted(str(r["name"]) for r in rows))
        self.history.add("deployment.registered", deployment=dep.id, host=dep.hosts[0].name,
                         data={"version": version, "hosts": [h.name for h in dep.hosts],
                               "endpoint": listener.url})
        for old in self._deployments[:-1]:
            if not old.superseded:
                old.superseded = True
                self.history.add("deployment.superseded", deployment=old.id,
                                 data={"version": old.version, "by": dep.id})
        self._tick()
        return dep.id


@dataclass(frozen=True)
class ReferenceRestateAdapter(EngineAdapter):
    """The reference implementation on a real Restate server (virtual time)."""

    name: str = "reference-restate"
    description: str = ("the reference implementation on a real Restate server, with "
                        "PostgreSQL and Toxiproxy (virtual time)")
    restate_ingress_url: str | None = None
    restate_admin_url: str | None = None

    def _preflight_engine(self) -> None:
        """restate-server is installed, or a Restate the user named answers."""
        from harness.components.restate import find_restate_server

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
