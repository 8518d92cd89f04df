"""An adapter written from outside the harness: how durable-chaos drives "my runtime".

`MyRuntimeAdapter` satisfies `harness.adapters.base.Adapter` (name, description, engine,
check_config, open). `MyRuntime` satisfies `Runtime` and, on purpose, only some of the
optional fault capabilities: it can be redeployed and crashed and has fault points, but it
cannot be GC-paused on demand or have its clock jumped. Schedules that ask for those faults
skip them, and the report says which were skipped.

The runtime underneath is the embedded simulator (`harness.adapters.sim.SimRuntime`); a
runtime on real processes implements the same methods by talking to its own engine and
writing the same events into `ctx.history`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contract.binding import App
from contract.faultpoints import POINTS
from contract.ports import Config, Ports
from harness.adapters.base import RunContext
from harness.adapters.sim import SimRuntime
from harness.checkers.base import CheckConfig
from harness.world import World
from my_runtime.app import build_app


class MyRuntime:
    """One run of my application. Capabilities: Backgroundable, Cancellable, Redeployable,
    Crashable, FaultPoints (with the points it supports)."""

    # The app's ports are the harness world's own: its model calls and access checks reach
    # the world's provider and identity, so provider faults and revocations reach it too.
    world_endpoints = ("provider", "identity")
    # Its code names its fault points with contract.faultpoints, so it stops at all.
    points = tuple(POINTS)

    def __init__(self, ctx: RunContext, hand_off: bool) -> None:
        def build(ports: Ports, version: str) -> App:
            return build_app(ports, version, hand_off=hand_off)

        self._engine = SimRuntime(ctx, build)
        self.world: World = self._engine.world

    # -- the Runtime protocol: time, and what a person does

    def now(self) -> float:
        return self._engine.now()

    def advance(self, until: float) -> None:
        self._engine.advance(until)

    def send_message(self, session: str, message: dict[str, object]) -> None:
        self._engine.send_message(session, message)

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        self._engine.answer(tool_call, decision, user)

    def finish(self) -> None:
        self._engine.finish()

    def close(self) -> None:
        self._engine.close()

    # -- optional capabilities (each one a small protocol of harness.adapters.base)

    def background(self, session: str, tool_call: str) -> None:  # Backgroundable
        self._engine.background(session, tool_call)

    def cancel(self, session: str) -> None:  # Cancellable
        self._engine.cancel(session)

    def deploy(self, version: str) -> str:  # Redeployable
        return self._engine.deploy(version)

    def crash_host(self, host: str) -> str:  # Crashable
        return self._engine.crash_host(host)

    def arm(self, point: str, action: str, duration: float, times: int) -> None:  # FaultPoints
        self._engine.arm(point, action, duration, times)


@dataclass(frozen=True)
class MyRuntimeAdapter:
    hand_off: bool = False
    config: Config = field(default_factory=Config)
    engine: str = "sim"

    @property
    def name(self) -> str:
        return "my-runtime" + ("-handoff" if self.hand_off else "")

    @property
    def description(self) -> str:
        wait = "hands the wait off after 5 minutes" if self.hand_off else "waits in-call"
        return f"my runtime on the simulator ({wait}); no GC pauses, no clock jumps"

    def check_config(self) -> CheckConfig:
        return CheckConfig(hand_off_after=self.config.hand_off_after,
                           max_wait=self.config.max_wait)

    def open(self, ctx: RunContext) -> MyRuntime:
        return MyRuntime(ctx, self.hand_off)
