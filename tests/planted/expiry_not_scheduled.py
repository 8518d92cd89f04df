"""turn-outcome: the hand-off forgets to schedule the expiry.

`PendingToolCall.startToolWait` saves the waiting row but never sends itself the delayed
`expire`: a turn whose person never answers waits forever instead of ending "expired" at
`max_wait`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from contract.binding import App, HandlerRef
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from reference_impl.effects import PENDING_EXPIRE
from tests.planted._plant import CtxProxy, replace_handler, with_ctx

INVARIANT = "turn-outcome"


class _NoExpiry(CtxProxy):
    def object_send(self, target: HandlerRef, key: str, arg: Any,
                    send_delay: timedelta | None = None) -> None:
        if target == PENDING_EXPIRE:
            return
        self._ctx.object_send(target, key, arg, send_delay=send_delay)


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "PendingToolCall", "startToolWait",
                           with_ctx(_NoExpiry))


ADAPTER = SimAdapter("planted-expiry-not-scheduled", "startToolWait schedules no expiry", build)
