"""turn-outcome: the expiry timer of an answered hand-off still fires.

`PendingToolCall.expire` checks that the timer is the wait's current one (its generation),
that the wait is still open and, as it writes, that the call has no final result in the
thread log yet (`first_wins`). Here it checks only the generation: a wait answered on day 2
still expires on day 8, writing a second result (`expired`) for the same tool call to the
thread log and delivering a second `toolFinished`. The controller ignores the second (no
turn waits on it), so no turn record doubles, but the transcript now holds two results.
"""

from __future__ import annotations

from typing import Any

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl import executor
from tests.planted._plant import CtxProxy, replace_handler, variant, with_ctx

INVARIANT = "turn-outcome"


class _AnsweredLooksOpen(CtxProxy):
    async def get(self, key: str) -> Any:
        raw = await self._ctx.get(key)
        if key == "row" and isinstance(raw, dict) and raw.get("phase") == "done":
            # The bug: the answered wait is not closed for the timer.
            return {**raw, "phase": "waiting"}
        return raw


async def _expiry_writes_anyway(*args: Any, **kwargs: Any) -> str | None:
    # The bug, again: the committed result of the call is not looked at either.
    if len(args) > 4 and args[4] == "expired":  # (ctx, ports, log, call, outcome, ...)
        kwargs["first_wins"] = False
    return await executor.record_result(*args, **kwargs)


_build = variant(pending={"record_result": _expiry_writes_anyway})


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(_build(ports, version), "PendingToolCall", "expire",
                           with_ctx(_AnsweredLooksOpen))


ADAPTER = SimAdapter("planted-expiry-after-answer", "expire ignores that the wait was answered",
                     build)
