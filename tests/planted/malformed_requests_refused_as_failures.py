"""malformed-refused: malformed requests are refused as the runtime's own failure.

The reference refuses a message that names no id, and an answer that is neither approve nor
deny, with `400 Bad Request`: the client sent it wrong. Here their validation raises a bare
terminal error, whose status is the engine's default, `500`: the client is told the runtime
failed, and a client that retries server errors sends the same request again, forever.
Nothing else changes: the request is refused, never applied, so every other rule passes.
"""

from __future__ import annotations

from typing import Any

from contract.binding import TerminalError
from harness.adapters.sim import SimAdapter
from reference_impl.controller import _message_item
from reference_impl.executor import parse_answer
from tests.planted._plant import variant

INVARIANT = "malformed-refused"


def _unsaid(validate: Any) -> Any:
    def validated(arg: Any) -> dict[str, Any]:
        try:
            return dict(validate(arg))
        except TerminalError as err:
            raise TerminalError(err.message) from None  # the bug: no status, so 500
    return validated


build = variant(executor={"parse_answer": _unsaid(parse_answer)},
                controller={"_message_item": _unsaid(_message_item)})
ADAPTER = SimAdapter("planted-malformed-requests-refused-as-failures",
                     "a malformed message or answer is refused with 500, as a failure of the "
                     "runtime", build)
