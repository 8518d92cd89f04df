"""turn-outcome: the expiry timer of an answered hand-off still fires.

`PendingToolCall.expire` checks that the timer is the wait's current one (its generation),
that the wait is still open and that the call has no final result in the thread log yet. Here
it checks only the generation: a wait answered on day 2 still expires on day 8, writing a
second result (`expired`) for the same tool call to the thread log and delivering a second
`toolFinished`. The controller ignores the second (no turn
waits on it), so no turn record doubles, but the transcript now holds two results.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._plant import CtxProxy, replace_handler, with_ctx

INVARIANT = "turn-outcome"


class _AnsweredLooksOpen(CtxProxy):
    async def get(self, key: str) -> Any:
        raw = await self._ctx.get(key)
        if key == "row" and isinstance(raw, dict) and raw.get("phase") == "done":
            # The bug: the answered wait is not closed for the timer.
            return {**raw, "phase": "waiting"}
        return raw

    def run(self, name: str, action: Callable[[], Any]) -> Awaitable[Any]:
        if name.startswith("final:"):
            # The bug, again: the committed result of the call is not looked at either.
            async def nothing_yet() -> None:
                return None

            return self._ctx.run(name, nothing_yet)
        return self._ctx.run(name, action)


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "PendingToolCall", "expire",
                           with_ctx(_AnsweredLooksOpen))


ADAPTER = SimAdapter("planted-expiry-after-answer", "expire ignores that the wait was answered",
                     build)
