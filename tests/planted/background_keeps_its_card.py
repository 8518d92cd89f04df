"""card-closed: a wait in the background keeps its card when its turn's end comes.

The Controller decides a call's end when its turn ends (a cancel, a new message) and tells
PendingToolCall (`endWait`), which ends the wait and closes the card; the next turn writes
the result. A call the person sent to the background after the cancel, before the turn said
it waits, ends with its turn. Here `endWait` reads a wait in the background as already done
and ignores it, as the reference did until 2026-12-03: the next turn writes the call's
cancelled result, and the card stays up, refusing every answer, until the call expires.
"""

from __future__ import annotations

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._plant import phase_read_as, replace_handler, with_ctx

INVARIANT = "card-closed"

_MISREAD = phase_read_as("background", "done")


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "PendingToolCall", "endWait",
                           with_ctx(_MISREAD))


ADAPTER = SimAdapter("planted-background-keeps-its-card",
                     "endWait ignores a wait in the background: its card stays up", build)
