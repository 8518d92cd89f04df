"""turn-outcome (attribution): the next turn files the ended call's result under itself.

When a new message ends a waiting turn, the controller hands the call's result ("ended by new
message") to the next turn, which writes it to the thread log before its own message, as the
tool message of the turn it belongs to. Here the next turn writes it under its own turn id:
the transcript tells the model that the new turn's call ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contract.binding import App, Context, HandlerFn
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._plant import replace_handler

INVARIANT = "turn-outcome"


def _under_this_turn(fn: HandlerFn) -> HandlerFn:
    async def handler(ctx: Context, arg: Any) -> Any:
        if isinstance(arg, Mapping) and arg.get("closed"):
            # The bug: every closed result is filed under the turn that writes it.
            arg = {**arg, "closed": [{**c, "turn": arg["turn"]} for c in arg["closed"]]}
        return await fn(ctx, arg)

    return handler


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "doTurn", "run", _under_this_turn)


ADAPTER = SimAdapter("planted-result-filed-under-next-turn",
                     "a closed result filed under the next turn", build)
