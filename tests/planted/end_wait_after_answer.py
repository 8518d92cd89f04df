"""answer-fate (the refusal's reason): a new message ends a call already answered.

A new message ends the waiting turn and asks PendingToolCall to end its call (`endWait`);
the reference ignores that request when the call is no longer waiting (an approval that got
there first ran, and the call is answered). Here `endWait` takes an answered call for a
waiting one and marks it ended, so a later answer to it is refused as ended, a fate the call
never had: it was already decided.
"""

from __future__ import annotations

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._plant import phase_read_as, replace_handler, with_ctx

INVARIANT = "answer-fate"


# The bug: an answered call read as one still waiting, which the message then ends.
_MISREAD = phase_read_as("done", "waiting")


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "PendingToolCall", "endWait",
                           with_ctx(_MISREAD))


ADAPTER = SimAdapter("planted-end-wait-after-answer",
                     "a new message ends a call that an approval already decided", build)
