"""Runtimes on the embedded simulator: the reference implementation and the naive variant.

Also the base a user reaches for when wiring another application onto the simulator
(see examples/): pass an app builder `(ports, version) -> App`.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from contract.binding import App, HandlerRef
from contract.faultpoints import POINTS as FAULT_POINTS
from contract.ports import Config, Ports
from contract.thresholds import CheckConfig
from harness.adapters.base import WORLD_ENDPOINTS, RunContext, record_committed
from harness.clock import wall_clock_follows
from harness.errors import SimulationError
from harness.history import History
from harness.sim import Simulator
from harness.sim.engine import FaultAction
from harness.sim.model import Host
from harness.world import World

T = TypeVar("T")
AppBuilder = Callable[[Ports, str], App]

CONTROLLER_MESSAGE = HandlerRef("Controller", "onMessage")
CONTROLLER_BACKGROUND = HandlerRef("Controller", "background")
CONTROLLER_CANCEL = HandlerRef("Controller", "cancel")
PENDING_ANSWER = HandlerRef("PendingToolCall", "answer")


class SimRuntime:
    """One run of an application on the simulator. Has every optional capability."""

    # The app's ports are the world's own (`World.ports`): its model calls and identity
    # checks reach the harness's provider and directory.
    world_endpoints: tuple[str, ...] = WORLD_ENDPOINTS
    # The simulator stops at any point the app's code reaches (contract.faultpoints).
    points: tuple[str, ...] = tuple(FAULT_POINTS)

    def __init__(self, ctx: RunContext, build: AppBuilder, *, idle_timeout: float = 5.0) -> None:
        self.ctx = ctx
        self.sim = Simulator(seed=ctx.seed, history=ctx.history)
        self.history: History = ctx.history
        self.world = World(ctx.history, now=self.sim.clock.now, sleep=self.sim.io,
                           observe=self.sim.observe)
        # The simulator runs the reference's own in-memory store; imported here so that
        # importing the harness never loads the system under test.
        from reference_impl.threadlog import InMemoryThreadLogStore

        self.store = InMemoryThreadLogStore(self.sim.clock.now, idle_timeout)
        self._build = build
        self._ports = self.world.ports(self.store, ctx.config)
        self._versions = 0
        self._armed: dict[str, list[FaultAction]] = {}
        self.sim.on_fault_point = self._fault_point
        self.deploy("v1")

    # -- driving

    def now(self) -> float:
        return self.sim.clock.now()

    def wall_clock(self) -> AbstractContextManager[None]:
        """Handlers read the run's virtual time from the wall clock too."""
        return wall_clock_follows(self.sim.clock)

    def advance(self, until: float) -> None:
        self.sim.run(until=until)

    def send_message(self, session: str, message: dict[str, object]) -> None:
        self.sim.invoke(CONTROLLER_MESSAGE.service, CONTROLLER_MESSAGE.handler, message,
                        key=session)

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        self.sim.invoke(PENDING_ANSWER.service, PENDING_ANSWER.handler,
                        {"decision": decision, "user": user}, key=tool_call)

    def background(self, session: str, tool_call: str) -> None:
        self.sim.invoke(CONTROLLER_BACKGROUND.service, CONTROLLER_BACKGROUND.handler,
                        {"tool_call": tool_call}, key=session)

    def cancel(self, session: str) -> None:
        self.sim.invoke(CONTROLLER_CANCEL.service, CONTROLLER_CANCEL.handler, {},
                        key=session)

    def finish(self) -> None:
        for thread_id in sorted(self._sessions()):
            for entry in _settled(self.store.read(thread_id)):
                record_committed(self.history, thread_id, entry)
            current = _settled(self.store.current(thread_id))
            if current is not None:
                self.history.add("threadlog.owner", session=thread_id, epoch=current.epoch,
                                 data={"owner": current.owner})

    def close(self) -> None:
        self.sim.close()

    def _sessions(self) -> set[str]:
        return {r.session for r in self.history.of_kind("threadlog.assigned") if r.session}

    # -- capabilities

    def deploy(self, version: str) -> str:
        self._versions += 1
        version = version or f"v{self._versions}"
        dep = self.sim.register(self._build(self._ports, version), hosts=self.ctx.hosts)
        return dep.id

    def pause_host(self, host: str, duration: float) -> str:
        target = self.sim.host(host)
        self.sim.pause_host(target.id, duration)
        return target.id

    def crash_host(self, host: str) -> str:
        target = self.sim.host(host)
        self.sim.crash_host(target.id)
        return target.id

    def arm(self, point: str, action: str, duration: float, times: int) -> None:
        fault: FaultAction = ("pause", duration) if action == "pause" else ("crash", None)
        self._armed.setdefault(point, []).extend([fault] * times)

    def clock_jump(self, seconds: float) -> None:
        self.sim.clock.jump(seconds)

    def _fault_point(self, name: str, host: Host) -> FaultAction | None:
        armed = self._armed.get(name)
        if armed:
            return armed.pop(0)
        return None


def _settled(coro: Coroutine[Any, Any, T]) -> T:
    """Run a store coroutine that does not suspend (reads) to its result."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return cast(T, stop.value)
    coro.close()
    raise SimulationError("a thread log read suspended; reads must not reach fault points")


@dataclass(frozen=True)
class SimAdapter:
    """An adapter that runs an app builder on the simulator."""

    name: str
    description: str
    build: AppBuilder
    config: Config = field(default_factory=Config)
    engine: str = "sim"

    def check_config(self) -> CheckConfig:
        return CheckConfig(hand_off_after=self.config.hand_off_after,
                           max_wait=self.config.max_wait,
                           max_steps_per_turn=self.config.max_steps_per_turn)

    def open(self, ctx: RunContext) -> SimRuntime:
        return SimRuntime(ctx, self.build)
