"""The reference application: Controller, doTurn, PendingToolCall on one deployment.

`build_app(ports, version)` is the only entry point an engine needs: it returns plain data
(`App`), which the simulator and the Restate worker each register their own way. Every
deployment of the same app is built from the same code; `version` labels it (and is what a
re-run after hand-off reports as the deployment it ran on).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from contract.binding import App, HandlerRef
from contract.ports import Ports
from reference_impl.controller import build_controller_service
from reference_impl.effects import CONTROLLER, PENDING, PENDING_EXPIRE
from reference_impl.pending import build_pending_service
from reference_impl.turn import build_turn_service

__all__ = ["PUBLIC", "build_app", "public_only"]

# What a client may call: a message, an answer, a background request, a cancel, the status
# reads. Every other handler is private to the services (`Handler.private`: the engine's
# ingress refuses it): the turn (the controller starts every turn, after the busy rule, with
# its token), what the turns and the waits report (a client that could would forge a turn's
# end or a tool's result), and PendingToolCall's executor-side handlers. `expire` stays
# public: it is PendingToolCall's delayed send to itself, which on Restate the harness's clock
# fires through the ingress. A handler added later is private until it is listed here.
PUBLIC: Final = frozenset({
    *(HandlerRef(CONTROLLER, name) for name in ("onMessage", "background", "cancel", "status")),
    *(HandlerRef(PENDING, name) for name in ("answer", "status")), PENDING_EXPIRE,
})


def public_only(app: App) -> App:
    """`app` with every handler not in `PUBLIC` private to its services."""
    return replace(app, services=tuple(
        replace(service, handlers=tuple(
            replace(h, private=HandlerRef(service.name, h.name) not in PUBLIC)
            for h in service.handlers))
        for service in app.services))


def build_app(ports: Ports, version: str = "v1") -> App:
    """The design after the change: in-call wait up to `hand_off_after`, then the wait is
    state in PendingToolCall and nothing is pinned."""
    return public_only(App(version, (
        build_controller_service(ports),
        build_turn_service(ports, accepts_pending_result=True),
        build_pending_service(ports, version),
    )))
