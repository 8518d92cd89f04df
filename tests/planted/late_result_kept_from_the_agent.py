"""result-told: an approved run that finishes after its turn ended is never told to the agent.

A new message can end a turn whose approved run had already begun (the approval won the call,
the message ended only the turn). When that run finishes, the reference's Controller brings
its result to the agent as a new message of the session (`toolFinished`), as it does for a
call sent to the background, and a turn starts from it. Here the Controller brings only
background results: a late result of an ended turn is dropped, as a runtime that routes
results by the call's mode alone would. The email was sent, once, with the person's
approval; nobody is ever told.
"""

from __future__ import annotations

from typing import Any

from contract.binding import App, Context, HandlerFn
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from reference_impl.controller import _load
from tests.planted._plant import replace_handler

INVARIANT = "result-told"


def _background_only(fn: HandlerFn) -> HandlerFn:
    async def tool_finished(ctx: Context, arg: Any) -> Any:
        state = await _load(ctx)
        waiting = state.waiting_turn
        resumes = waiting is not None and waiting.tool_call == arg.get("tool_call")
        if not arg.get("background") and not resumes and state.active_turn != arg.get("turn"):
            return {"status": "ignored"}  # the bug: the turn is over, so is the result
        return await fn(ctx, arg)

    return tool_finished


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "Controller", "toolFinished",
                           _background_only)


ADAPTER = SimAdapter("planted-late-result-kept-from-the-agent",
                     "a run that finished after its turn ended is never told to the agent",
                     build)
