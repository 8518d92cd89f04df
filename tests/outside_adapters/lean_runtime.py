"""A runtime written outside durable-chaos, the way a user writes one: public API only.

Its design has less than the harness can drive, and says so instead of faking it:

- no background mode and no cancellation (it does not implement `background` or `cancel`,
  so it is neither `Backgroundable` nor `Cancellable`);
- its model calls and access checks do not go through the harness's world (no
  `world_endpoints`), so provider faults and access revocations cannot reach it;
- it stops at one fault point only (`points`);
- it promises four invariants (`claims`), not the busy rule, fencing, the access re-check
  or conservative recovery.

`adapter` is that runtime on the reference app. `busy_adapter` and `busy_claimed_adapter` run
an app with a bug in its busy rule (a new message does not see a turn that waits on a
person): the first does not claim the busy rule, the second does, and must still fail.

Load them as `lean_runtime:adapter` from this directory (or with it on PYTHONPATH).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from contract.binding import App, Context, Handler, HandlerFn
from contract.ports import Config, Ports
from harness.adapters.base import RunContext
from harness.adapters.sim import SimRuntime
from harness.checkers.base import CheckConfig
from reference_impl.app import build_app

AppBuilder = Callable[[Ports, str], App]

CLAIMS = ("no-duplicate-effects", "pinning-bound", "turn-outcome", "liveness")


class LeanRuntime:
    """The Runtime protocol, Redeployable, and FaultPoints with one point. Nothing else."""

    points = ("effect.email.after_send",)

    def __init__(self, ctx: RunContext, build: AppBuilder) -> None:
        self._engine = SimRuntime(ctx, build)
        self.world = self._engine.world

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

    def deploy(self, version: str) -> str:
        return self._engine.deploy(version)

    def arm(self, point: str, action: str, duration: float, times: int) -> None:
        self._engine.arm(point, action, duration, times)


class _NoWaitingTurn:
    """The bug: the controller's onMessage reads its state without the waiting turn."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)

    async def get(self, name: str) -> Any:
        value = await self._ctx.get(name)
        return None if name == "waitingTurn" else value


def _busy_bug(ports: Ports, version: str = "v1") -> App:
    app = build_app(ports, version)
    services = []
    for service in app.services:
        if service.name == "Controller":
            handlers = []
            for h in service.handlers:
                if h.name == "onMessage":
                    h = Handler(h.name, _on_proxy(h.fn), h.kind)
                handlers.append(h)
            service = replace(service, handlers=tuple(handlers))
        services.append(service)
    return App(app.version, tuple(services))


def _on_proxy(fn: HandlerFn) -> HandlerFn:
    async def handler(ctx: Context, arg: Any) -> Any:
        return await fn(_NoWaitingTurn(ctx), arg)  # type: ignore[arg-type]

    return handler


@dataclass(frozen=True)
class LeanAdapter:
    name: str = "lean"
    description: str = "a runtime without background, cancel or the world's endpoints"
    build: AppBuilder = build_app
    claims: tuple[str, ...] | None = CLAIMS
    config: Config = field(default_factory=Config)
    engine: str = "sim"

    def check_config(self) -> CheckConfig:
        return CheckConfig(hand_off_after=self.config.hand_off_after,
                           max_wait=self.config.max_wait)

    def open(self, ctx: RunContext) -> LeanRuntime:
        return LeanRuntime(ctx, self.build)


adapter = LeanAdapter()
busy_adapter = LeanAdapter(name="lean-busy-bug", build=_busy_bug)
busy_claimed_adapter = LeanAdapter(name="lean-busy-bug-claimed", build=_busy_bug,
                                   claims=(*CLAIMS, "busy-rule"))
misspelled_adapter = LeanAdapter(name="lean-misspelled", claims=("busy-rul",))
claims_nothing_adapter = LeanAdapter(name="lean-claims-nothing", claims=())
