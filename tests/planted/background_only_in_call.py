"""background-honored: only a call still waiting in-call can be sent to the background.

PendingToolCall's `background` moves a call that waits in-call (phase `live`) and ignores
one whose turn already handed its wait off (phase `waiting`): the runtime answers
"ignored", and the person who said "go on without this" finds the turn still waiting on them
for as long as they take to answer, up to the 8 days of `max_wait`. Nothing else breaks.
"""

from __future__ import annotations

from typing import Any

from contract.binding import App, Context, HandlerFn
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._plant import replace_handler

INVARIANT = "background-honored"


def _only_in_call(fn: HandlerFn) -> HandlerFn:
    async def background(ctx: Context, arg: Any) -> Any:
        row = await ctx.get("row")
        # The bug: a call whose wait was handed off is not sent to the background.
        if isinstance(row, dict) and row.get("phase") == "waiting":
            return {"status": "ignored"}
        return await fn(ctx, arg)

    return background


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "PendingToolCall", "background",
                           _only_in_call)


ADAPTER = SimAdapter("planted-background-only-in-call",
                     "background ignores a call whose wait was handed off", build)
