"""turn-per-message: a message that finds the session busy is refused instead of queued.

A runtime that lets one turn run at a time can queue what comes meanwhile, or answer "busy,
try again". Here onMessage refuses (a terminal 409) a message that arrives while a turn is in
progress; the person's client, like the harness, does not resend it, so that message never
gets a turn. Nothing else breaks: every turn that did start behaves, and the session is idle.
"""

from __future__ import annotations

from typing import Any

from contract.binding import App, Context, HandlerFn, TerminalError
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._plant import replace_handler

INVARIANT = "turn-per-message"


def _refuse_when_busy(fn: HandlerFn) -> HandlerFn:
    async def on_message(ctx: Context, arg: Any) -> Any:
        # The bug: busy means "refuse", not "queue".
        if await ctx.get("activeTurnInvocationId"):
            raise TerminalError("the session is busy: try again later", 409)
        return await fn(ctx, arg)

    return on_message


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "Controller", "onMessage",
                           _refuse_when_busy)


ADAPTER = SimAdapter("planted-busy-refuses-message",
                     "onMessage refuses a message while a turn is in progress", build)
