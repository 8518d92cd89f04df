"""turn-outcome: a call sent to the background never expires, so a late answer is applied.

The reference's `PendingToolCall.expire` ends every open wait at `max_wait`, the waits of calls
sent to the background included. Here it skips those: the turn went on with a placeholder, so
nothing looks stuck, but an answer that arrives after the eight days is applied (the email is
sent, the charge made) instead of being refused as expired.
"""

from __future__ import annotations

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._plant import phase_read_as, replace_handler, with_ctx

INVARIANT = "turn-outcome"


# The bug: "the turn already went on" read as "nothing waits any more".
_MISREAD = phase_read_as("background", "done")


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "PendingToolCall", "expire",
                           with_ctx(_MISREAD))


ADAPTER = SimAdapter("planted-background-never-expires",
                     "expire skips calls sent to the background", build)
