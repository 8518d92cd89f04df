"""cancel-honored: an approval given after a cancel still runs the tool.

A turn waits in the call for the person's approval (its first 5 minutes) when the person
cancels it: the turn stops at its next step, but its card is still up, and PendingToolCall
applies an approval given meanwhile without asking whether the turn was cancelled: the
email goes out after the person said stop (the reference until 2026-12-02; once the wait is
handed off, the cancel ends the turn and the same approval is refused).
"""

from __future__ import annotations

from typing import Any

from contract.binding import App, HandlerRef
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._plant import CtxProxy, replace_handler, with_ctx

INVARIANT = "cancel-honored"


async def _not_cancelled() -> bool:
    return False


class _CancelUnseen(CtxProxy):
    def object_call(self, ref: HandlerRef, key: str, arg: Any) -> Any:
        # The bug: the answer never asks whether the call's turn was cancelled.
        if ref.handler == "isCancelled":
            return _not_cancelled()
        return self._ctx.object_call(ref, key, arg)


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "PendingToolCall", "answer",
                           with_ctx(_CancelUnseen))


ADAPTER = SimAdapter("planted-approval-after-cancel",
                     "an approval after a cancel runs the tool while the turn waits in-call",
                     build)
