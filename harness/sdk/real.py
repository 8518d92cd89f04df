"""The same user services on a real restate-server: the SDK's own ASGI app on hypercorn.

`served(app_spec, env=...)` starts a restate-server (`harness.components.restate`), one
hypercorn worker process serving the user's `restate.app(...)` (`module:attribute`, the
object they deploy), registers it, and yields the server; everything is stopped by process
group on exit. It is the first piece of the real half of the kit: a chaos adapter on it
(clock, turns, faults and releases, as `harness.observers` does for other engines) is not
built yet (docs/restate-sdk.md, "Real Restate").
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.components.net import free_port, wait_until
from harness.components.procs import ProcessGroup
from harness.components.restate import RestateServer

__all__ = ["SdkRealRuntime", "served"]


def _listening(port: int) -> bool | None:
    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True


@contextmanager
def served(app_spec: str, *, env: Mapping[str, str] | None = None,
           cwd: str | Path | None = None) -> Iterator[RestateServer]:
    """A restate-server with `app_spec` served and registered (see the module doc)."""
    port = free_port()
    # `--workers 0`: hypercorn serves in this process group's only process, so a stop of
    # the group stops the server (a forked worker would outlive its master).
    worker = ProcessGroup([sys.executable, "-m", "hypercorn", app_spec, "--workers", "0",
                           "--bind", f"127.0.0.1:{port}"], name="sdk-worker",
                          env=dict(env or {}), cwd=cwd)
    try:
        with RestateServer() as restate:
            wait_until(lambda: _listening(port), timeout=60, what=f"worker of {app_spec}")
            restate.admin.register_deployment(f"http://127.0.0.1:{port}")
            yield restate
    finally:
        worker.stop()


def _longest_run(records: list[Any]) -> float:
    """The longest real time (records' `wall`) an invocation ran before it suspended or
    completed."""
    since: dict[str, float] = {}
    longest = 0.0
    for r in records:
        if r.invocation is None or r.wall is None:
            continue
        if r.kind in ("invocation.started", "invocation.resumed"):
            since.setdefault(r.invocation, r.wall)
        elif r.kind in ("invocation.suspended", "invocation.completed"):
            start = since.pop(r.invocation, None)
            if start is not None:
                longest = max(longest, r.wall - start)
    return longest


class SdkRealRuntime:
    """One run of a user's restate-sdk app on a real restate-server, with the simulator
    kit's face (`send`, the turns, the cards, releases and host faults), so one adapter
    runs on both (`engine="restate"`).

    Restate has no time skipping and the user's `ctx.sleep` is Restate's own timer, so time
    is scaled (`harness.scaling`): the runtime counts `scale` scenario seconds per real
    second, and the user's app must shorten its own durations by the same factor (it gets
    `AGENT_TIME_SCALE`-style settings through `env`). Restate's own latency (a step, a
    suspension after the inactivity timeout) is real time too, so `latency` real seconds,
    scaled, are recorded as `clock.latency`: the checkers add it to their tolerance and
    say so in their witnesses.
    """

    world_endpoints: tuple[str, ...] = ("provider", "identity")

    def __init__(self, ctx: Any, app_spec: str, *, turn_of: Any = None, scale: float,
                 env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
                 crash_downtime: float = 5.0, latency: float = 0.5,
                 inactivity_timeout: float = 0.1) -> None:
        from harness.observers import RestateObserver, WorkerHosts
        from harness.observers.hosts import POINTS, turn_of_delivery
        from harness.scaling import TICK, ScaledClock, TimeScale
        from harness.world_server import WorldServer

        self.points = tuple(POINTS)
        self.history = ctx.history
        self.scale = scale
        self.clock = ScaledClock(TimeScale(scale))
        self.time_scale = self.clock.scale  # steps are late by real seconds (harness.run)
        self.app_spec, self.cwd = app_spec, cwd
        self.server = WorldServer(ctx.history, now=self.now).start()
        self.world = self.server.world
        self.env = {**(env or {}), "AGENT_WORLD_URL": self.server.url}
        # An invocation waiting over the bidirectional protocol reads running until this
        # timeout suspends it; scaled, Restate's default 1 s would be 2.4 scenario hours of a
        # turn "running" at 8640x.
        self.restate = RestateServer(inactivity_timeout=inactivity_timeout).start()
        self._turn_of = turn_of
        self._args: dict[str, Any] = {}
        self._turns: dict[str, str] = {}  # turn id -> invocation id
        self._ports: dict[str, int] = {}
        self._latency = latency
        self._startup = 0.0  # the longest real start of a worker (a crash's recovery)
        self._crashed = False
        self.observer = RestateObserver(ctx.history, admin_url=self.restate.admin_url,
                                        world=self.world, turn_of=self._turn)

        def invocation_of(record: Any) -> str | None:
            turn = turn_of_delivery(record)
            return self._turns.get(turn) if turn is not None else None

        self.hosts = WorkerHosts(ctx.history, now=self.now, start=self._worker,
                                 downtime=crash_downtime, observer=self.observer,
                                 invocation_of=invocation_of, tick_every=TICK)
        self.observer.start()
        self.deploy("v1")
        self.clock.start()
        ctx.history.bind_clock(self.now)
        ctx.history.add("clock.latency", data={"seconds": latency * scale})

    def now(self) -> float:
        return self.clock.now()

    def advance(self, until: float) -> None:
        self.clock.sleep_until(until, tick=self.hosts.tick)

    def _turn(self, inv: Any) -> tuple[str, str, str] | None:
        from harness.sdk.runtime import InvocationView

        if self._turn_of is None or inv.target is None:
            return None
        # Restate names an object's invocation `Service/key/handler`.
        parts = str(inv.target).split("/")
        service, handler = parts[0], parts[-1]
        view = InvocationView(inv.id, service, handler, inv.key, self._args.get(inv.id))
        turn: tuple[str, str, str] | None = self._turn_of(view)
        if turn is not None:
            self._turns[turn[1]] = inv.id
        return turn

    def send(self, handler: str, arg: Any = None, *, key: str | None = None,
             delay: float = 0.0) -> str:
        service, _, name = handler.partition("/")
        # Held while the id is not yet known here: a poll in between would ask `turn_of`
        # about the new invocation without its argument, and never ask again.
        with self.observer._lock:
            invocation = self.restate.admin.send(service, name, key, arg,
                                                 delay=delay / self.scale if delay else None)
            self._args[invocation] = arg
        self.observer.wait_polls(2)  # its turn.started before anything it causes
        return str(invocation)

    def _worker(self, dep: str) -> ProcessGroup:
        port = self._ports[dep]
        started = time.perf_counter()
        group = ProcessGroup([sys.executable, "-m", "hypercorn", self.app_spec, "--workers",
                              "0", "--bind", f"127.0.0.1:{port}"], name=f"sdk-worker-{dep}",
                             env=self.env, cwd=self.cwd)
        wait_until(lambda: _listening(port), timeout=60, what=f"worker of {dep}")
        self._startup = max(self._startup, time.perf_counter() - started)
        return group

    def deploy(self, version: str) -> str:
        port = free_port()
        self._ports["new"] = port
        group = self._worker("new")
        dep = self.restate.admin.register_deployment(f"http://127.0.0.1:{port}")
        self._ports[dep] = self._ports.pop("new")
        self.hosts.hosts[f"{dep}/w1"] = (dep, group)
        self.observer.wait_polls(2)
        return str(dep)

    def crash_host(self, host: str) -> str:
        self._crashed = True
        return str(self.hosts.crash(self.hosts.select(host)))

    def pause_host(self, host: str, duration: float) -> str:
        return str(self.hosts.pause(self.hosts.select(host), duration))

    def arm(self, point: str, action: str, duration: float, times: int) -> None:
        self.hosts.arm(point, action, duration, times)

    def finish(self) -> None:
        # Restate may still be applying the last step at the horizon (an answer's email, a
        # real second later): wait until it has nothing left to run (EngineObserver.settle).
        self.observer.settle()
        self.observer.wait_polls(2)
        # The engine's latency, measured (the checkers take the last clock.latency of the
        # run): the longest real stretch an invocation ran without waiting (a step of the
        # engine and the world's answers; seconds on a loaded machine), and after a crash
        # a worker's Python start (about 2 real seconds here) and Restate's retry back-off.
        # At 8640x each is hours of scenario time: the real path judges coarsely.
        latency = max(self._latency, _longest_run(self.history.records))
        if self._crashed or any(r.kind == "host.crashed" for r in self.history.records):
            latency = max(latency, self._startup + 0.5)
        if latency > self._latency:
            self.history.add("clock.latency", data={"seconds": latency * self.scale})

    def close(self) -> None:
        self.observer.stop()
        self.hosts.close()
        self.restate.stop()
        self.server.stop()
