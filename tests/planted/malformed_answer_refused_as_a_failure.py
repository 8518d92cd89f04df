"""malformed-refused: a malformed answer is refused as the runtime's own failure.

The reference refuses an answer that is neither approve nor deny with `400 Bad Request`: the
client sent it wrong. Here the refusal is a bare terminal error, whose status is the
engine's default, `500`: the client is told the runtime failed, and a client that retries
server errors sends the same answer again, forever. Nothing else changes: the answer is
refused, never applied, so every other rule passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contract.binding import TerminalError
from harness.adapters.sim import SimAdapter
from tests.planted._plant import variant

INVARIANT = "malformed-refused"


def parse_answer(arg: Any) -> dict[str, Any]:
    if not isinstance(arg, Mapping) or arg.get("decision") not in ("approve", "deny"):
        # The bug: no status, so the engine's default (500).
        raise TerminalError(f"bad answer {arg!r}")
    return {"decision": str(arg["decision"]), "user": str(arg.get("user") or "")}


build = variant(executor={"parse_answer": parse_answer})
ADAPTER = SimAdapter("planted-malformed-answer-refused-as-a-failure",
                     "a malformed answer is refused with 500, as a failure of the runtime",
                     build)
