"""message-logged: a turn answers its message and never writes it to the thread log.

The reference's turn appends its message (the person's, or a background result brought in
as one) to the session's thread log before its first model step: the log is the transcript a
resumed or later turn, and the person, read. Here that step journals nothing: every turn
runs and ends, and the transcript never holds the message it answered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._plant import CtxProxy, replace_handler, with_ctx

INVARIANT = "message-logged"


class _Forgetful(CtxProxy):
    def run(self, name: str, action: Callable[[], Any]) -> Awaitable[Any]:
        if name == "turn.message":
            # The bug: the message is never appended.
            async def nothing() -> None:
                return None

            return self._ctx.run(name, nothing)
        return self._ctx.run(name, action)


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "doTurn", "run",
                           with_ctx(_Forgetful))


ADAPTER = SimAdapter("planted-message-not-logged",
                     "a turn never appends its message to the thread log", build)
