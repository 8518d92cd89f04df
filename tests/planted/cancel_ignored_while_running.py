"""cancel-honored: a cancel reaches only a turn that waits on the person.

The Controller's `cancel` ends a turn that waits as state, but for a turn still running it
answers "nothing to cancel" instead of setting the flag the turn reads between steps: the
turn goes on with every step it planned (model calls, tool calls, effects), as if the person
had never asked it to stop.
"""

from __future__ import annotations

from typing import Any

from contract.binding import App, Context, HandlerFn
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._plant import replace_handler

INVARIANT = "cancel-honored"


def _only_waiting(fn: HandlerFn) -> HandlerFn:
    async def cancel(ctx: Context, arg: Any) -> Any:
        # The bug: a running turn is not the cancel's business.
        if await ctx.get("activeTurnInvocationId"):
            return {"cancelled": None}
        return await fn(ctx, arg)

    return cancel


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "Controller", "cancel", _only_waiting)


ADAPTER = SimAdapter("planted-cancel-ignored-while-running",
                     "cancel ignores a turn that is still running", build)
