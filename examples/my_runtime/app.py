"""Your application: the services your runtime deploys.

Here it is assembled from the reference implementation's services, the way the naive
("before") design does it: the turn does not accept a pending result, so a tool call that
needs a person's approval waits *in the call*, for up to 8 days, and its invocation stays
pinned to the deployment that started it. `hand_off=True` is the fix: past five minutes the
wait becomes state in PendingToolCall and nothing stays pinned.

In your own project this module holds your own handlers, written against
`contract.binding.Context`.
"""

from __future__ import annotations

from contract.binding import App
from contract.ports import Ports
from reference_impl.controller import build_controller_service
from reference_impl.pending import build_pending_service
from reference_impl.turn import build_turn_service


def build_app(ports: Ports, version: str = "v1", *, hand_off: bool = False) -> App:
    return App(version, (
        build_controller_service(ports),
        build_turn_service(ports, accepts_pending_result=hand_off),
        build_pending_service(ports, version),
    ))
