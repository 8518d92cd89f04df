"""answer-fate: an answer that is not applied is dropped without a word.

The reference refuses an answer it does not apply (`answer.refused`, with the reason: the
call already had its answer, ended, expired) and tells the person. Here it ignores it, as the
reference did before: the card service accepted the answer and nothing ever says what became
of it (a deny after an approve already won, an approve after a new message ended the call).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._plant import CtxProxy, replace_handler, with_ctx

INVARIANT = "answer-fate"


class _Silent(CtxProxy):
    def run(self, name: str, action: Callable[[], Any]) -> Awaitable[Any]:
        if name.startswith("observe.refused"):
            # The bug: the refusal is never told.
            async def nothing() -> None:
                return None

            return self._ctx.run(name, nothing)
        return self._ctx.run(name, action)


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(build_app(ports, version), "PendingToolCall", "answer",
                           with_ctx(_Silent))


ADAPTER = SimAdapter("planted-answer-dropped", "an answer not applied is dropped silently",
                     build)
