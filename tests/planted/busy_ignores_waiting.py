"""busy-rule: onMessage does not see a turn that waits on a person as state.

The busy rule is `activeTurnInvocationId or waitingTurn`. Here onMessage decides on a state
read without `waitingTurn`, i.e. with `busy = activeTurnInvocationId` alone: a message that
arrives while a turn waits on a person after the hand-off neither queues nor ends that turn
(as a steer) but starts a second turn beside it.
"""

from __future__ import annotations

from typing import Any

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._plant import CtxProxy, replace_handler, with_ctx

INVARIANT = "busy-rule"


class _NoWaitingTurn(CtxProxy):
    async def get(self, name: str) -> Any:
        value = await self._ctx.get(name)
        return None if name == "waitingTurn" else value


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "Controller", "onMessage",
                           with_ctx(_NoWaitingTurn))


ADAPTER = SimAdapter("planted-busy-ignores-waiting", "busy rule ignores waitingTurn in onMessage",
                     build)
