"""access-rechecked (the turn's person): a turn acts for the session's first writer.

The reference's turn reads its person from the thread log's entry of the message it
processes: the one who asked. Here the controller files every message of a session under the
first person who wrote in it, so when Bob writes after Alice, his turn checks Alice's access,
and a tool Bob lost access to runs for him. The runtime's own reports name Alice too: only
the runner's word (`op.message` names who sent each message) tells the checker who asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contract.binding import App, Context, HandlerFn
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._plant import replace_handler

INVARIANT = "access-rechecked"


def _first_writer(fn: HandlerFn) -> HandlerFn:
    async def handler(ctx: Context, arg: Any) -> Any:
        if isinstance(arg, Mapping) and "user" in arg:
            first = await ctx.get("firstWriter")
            if first is None:
                ctx.set("firstWriter", arg["user"])
            else:
                arg = {**arg, "user": first}  # the bug
        return await fn(ctx, arg)

    return handler


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "Controller", "onMessage", _first_writer)


ADAPTER = SimAdapter("planted-turn-acts-for-the-first-writer",
                     "a turn acts for the session's first writer, not for who asked", build)
