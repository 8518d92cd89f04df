"""The naive variant: the design *before* the hand-off, kept as a second adapter.

Same services and entry points as `build_app`, with one difference: the turn does not accept
a pending result, so the executor waits in-call for up to `max_wait` (8 days). The turn's
invocation stays suspended, pinned to the deployment that started it, for the whole wait; a
redeploy cannot retire that deployment until the person answers or the wait expires. The
busy rule is unchanged, but the turn never *waits as state*: it stays active, so a new
message queues behind the card instead of ending the turn.
"""

from __future__ import annotations

from contract.binding import App
from contract.ports import Ports
from reference_impl.app import public_only
from reference_impl.controller import build_controller_service
from reference_impl.pending import build_pending_service
from reference_impl.turn import build_turn_service

__all__ = ["build_naive_app"]


def build_naive_app(ports: Ports, version: str = "v1") -> App:
    return public_only(App(version, (
        build_controller_service(ports),
        build_turn_service(ports, accepts_pending_result=False),
        build_pending_service(ports, version),
    )))
