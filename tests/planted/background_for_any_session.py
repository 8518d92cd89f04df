"""background-honored (a stranger's request): a call moves at any session's request.

The Controller forwards a background request to the call's PendingToolCall with the session
that sent it, and PendingToolCall ignores a request from a session that does not own the
call. Here the session is dropped on the way, so a client that names another session's call
(a guessed or leaked id) sends that person's call to the background.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contract.binding import App, Context, HandlerFn
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._plant import replace_handler

INVARIANT = "background-honored"


def _without_session(fn: HandlerFn) -> HandlerFn:
    async def handler(ctx: Context, arg: Any) -> Any:
        if isinstance(arg, Mapping):
            arg = {k: v for k, v in arg.items() if k != "session"}  # the bug
        return await fn(ctx, arg)

    return handler


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "PendingToolCall", "background",
                           _without_session)


ADAPTER = SimAdapter("planted-background-for-any-session",
                     "a call moves to the background at any session's request", build)
