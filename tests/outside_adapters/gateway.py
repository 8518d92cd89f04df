"""A runtime written outside durable-chaos, behind an API gateway: public API only.

The person's requests reach the runtime through a gateway. `adapter` forwards a background
request with the session that sent it, and the runtime refuses to move a call of another
session. `resolving_adapter` has the gateway bug a user could write (an insecure direct
object reference): it looks the call's own session up from the call's id and sends the
request as that session, so any session that names a call moves it.

The runtime underneath is the reference app on the simulator. Load as `gateway:adapter`
from this directory.
"""

from __future__ import annotations

from dataclasses import dataclass

from contract.binding import App
from contract.ports import Ports
from harness.adapters.base import RunContext
from harness.adapters.sim import SimRuntime
from harness.checkers.base import CheckConfig
from reference_impl.app import build_app


class GatewayRuntime:
    """The Runtime protocol and Backgroundable; the person's requests pass the gateway."""

    def __init__(self, ctx: RunContext, resolve_owner: bool) -> None:
        def build(ports: Ports, version: str) -> App:
            return build_app(ports, version)

        self._engine = SimRuntime(ctx, build)
        self.world = self._engine.world
        self._resolve_owner = resolve_owner

    def now(self) -> float:
        return self._engine.now()

    def advance(self, until: float) -> None:
        self._engine.advance(until)

    def send_message(self, session: str, message: dict[str, object]) -> None:
        self._engine.send_message(session, message)

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        self._engine.answer(tool_call, decision, user)

    def background(self, session: str, tool_call: str) -> None:
        if self._resolve_owner:  # the bug: the call's session, not the one that asked
            session = self.world.state.cards[tool_call].session
        self._engine.background(session, tool_call)

    def finish(self) -> None:
        self._engine.finish()

    def close(self) -> None:
        self._engine.close()


@dataclass(frozen=True)
class GatewayAdapter:
    name: str = "gateway"
    description: str = "the reference app behind a gateway that forwards the asking session"
    resolve_owner: bool = False
    engine: str = "sim"

    def check_config(self) -> CheckConfig:
        return CheckConfig()

    def open(self, ctx: RunContext) -> GatewayRuntime:
        return GatewayRuntime(ctx, self.resolve_owner)


adapter = GatewayAdapter()
resolving_adapter = GatewayAdapter(name="gateway-resolving",
                                   description="its gateway resolves a call's session from "
                                               "the call's id", resolve_owner=True)
