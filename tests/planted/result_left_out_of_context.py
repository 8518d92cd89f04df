"""context-kept: the conversation the model is given leaves out what the person approved.

The reference builds what the model sees from the committed thread log (`transcript`): the
person's message, each model reply, and each tool call's result. Here the results of calls
the person approved (`answered`) are left out, as a transcript that keeps only what the
agent did on its own would: the model never learns the approved call ran, and asks for it
again at its next step.
"""

from __future__ import annotations

from typing import Any

from contract.threadlog import LogEntry
from harness.adapters.sim import SimAdapter
from reference_impl.turn import transcript
from tests.planted._plant import variant

INVARIANT = "context-kept"


def transcript_without_approved(entries: list[LogEntry]) -> list[dict[str, Any]]:
    # The bug: an approved call's result is not part of what the model is told.
    return [m for m in transcript(entries)
            if not (m.get("role") == "tool" and m.get("outcome") == "answered")]


build = variant(turn={"transcript": transcript_without_approved})
ADAPTER = SimAdapter("planted-result-left-out-of-context",
                     "the model is not told the results of calls the person approved", build)
