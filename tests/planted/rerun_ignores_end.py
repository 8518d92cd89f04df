"""effect-authorized: the re-run after the hand-off acts on an answer whose call had ended.

A new message (or a cancel) ends a waiting turn in the controller while PendingToolCall
re-runs the tool for the person's approve; the thread log decides which came first. The
reference re-run reads the call's committed outcome before it writes its intent (and again
before its result), and does nothing once the call ended. Here the re-run's thread log never
shows it a final result: its intent goes in after the call ended by the new message, the
email goes out, and its result is written beside the first.
"""

from __future__ import annotations

from harness.adapters.sim import SimAdapter
from reference_impl.effects import SessionLog
from tests.planted._plant import variant

INVARIANT = "effect-authorized"


class _BlindLog(SessionLog):
    async def final_result(self, tool_call: str) -> str | None:
        # The bug: the re-run never looks at how the call ended.
        return None


build = variant(pending={"SessionLog": _BlindLog})
ADAPTER = SimAdapter("planted-rerun-ignores-end", "re-run ignores that the call already ended",
                     build)
