"""effect-authorized: a call handed off loses its arguments, and acts on the runtime's defaults.

The executor shows the card with the call's arguments (an email to bob@example.com, a charge
of 100), waits in-call, then hands the wait off to PendingToolCall. Here PendingToolCall
keeps the call without its arguments (a serialisation that drops a field): an answer within
the in-call wait still runs the call the executor holds, but an approval after the hand-off
re-runs the stored call, which emails the user who asked and charges 0. The person approved
one email and got another; every other rule holds (one effect, authorized by an approve that
won the call, its result told).
"""

from __future__ import annotations

from typing import Any

from contract.binding import App, Context, HandlerFn
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._plant import replace_handler

INVARIANT = "effect-authorized"


def _without_args(fn: HandlerFn) -> HandlerFn:
    async def register(ctx: Context, arg: Any) -> Any:
        call = {**arg["call"], "args": {}}  # the bug: the call is stored without its arguments
        return await fn(ctx, {**arg, "call": call})

    return register


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "PendingToolCall", "register",
                           _without_args)


ADAPTER = SimAdapter("planted-args-lost-in-the-hand-off",
                     "a call handed off to PendingToolCall loses its arguments",
                     build)
