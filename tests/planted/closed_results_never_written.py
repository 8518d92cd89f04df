"""card-closed (the closed card's result): results the controller decided never reach the log.

When a new message or a cancel ends a call while its turn waits, the reference's controller
closes the call's card and hands the result to the next turn, which writes it to the thread
log (and reports it) before its own message. Here the next turn drops those results: the
card tells the person the call ended, and the transcript the next turn's model reads never
says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contract.binding import App, Context, HandlerFn
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from reference_impl.effects import DO_TURN
from tests.planted._plant import replace_handler

INVARIANT = "card-closed"


def _without_closed(run: HandlerFn) -> HandlerFn:
    async def handler(ctx: Context, arg: Any) -> Any:
        if isinstance(arg, Mapping):
            arg = {k: v for k, v in arg.items() if k != "closed"}  # the bug
        return await run(ctx, arg)

    return handler


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), DO_TURN.service, DO_TURN.handler,
                           _without_closed)


ADAPTER = SimAdapter("planted-closed-results-never-written",
                     "the next turn never writes the results the controller decided", build)
