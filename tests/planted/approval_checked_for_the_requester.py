"""access-rechecked (the approver's access): an approval runs on the requester's access.

The reference checks the access of the person who approved a call (the answer's `user`), not
only of the one who asked: an approval is that person's authority. Here the answer's user is
dropped before PendingToolCall reads it, so the run checks the session's user instead, and a
person who lost access to the tool still gets it run by approving someone else's call.
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


def _without_user(fn: HandlerFn) -> HandlerFn:
    async def handler(ctx: Context, arg: Any) -> Any:
        if isinstance(arg, Mapping):
            arg = {k: v for k, v in arg.items() if k != "user"}  # the bug
        return await fn(ctx, arg)

    return handler


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "PendingToolCall", "answer",
                           _without_user)


ADAPTER = SimAdapter("planted-approval-checked-for-the-requester",
                     "an approval runs on the requester's access, not the approver's", build)
