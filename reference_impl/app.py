"""The reference application: Controller, doTurn, PendingToolCall on one deployment.

`build_app(ports, version)` is the only entry point an engine needs: it returns plain data
(`App`), which the simulator and the Restate worker each register their own way. Every
deployment of the same app is built from the same code; `version` labels it (and is what a
re-run after hand-off reports as the deployment it ran on).
"""

from __future__ import annotations

from contract.binding import App
from contract.ports import Ports
from reference_impl.controller import build_controller_service
from reference_impl.pending import build_pending_service
from reference_impl.turn import build_turn_service

__all__ = ["build_app"]


def build_app(ports: Ports, version: str = "v1") -> App:
    """The design after the change: in-call wait up to `hand_off_after`, then the wait is
    state in PendingToolCall and nothing is pinned."""
    return App(version, (
        build_controller_service(ports),
        build_turn_service(ports, accepts_pending_result=True),
        build_pending_service(ports, version),
    ))
