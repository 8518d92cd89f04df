"""turn-outcome: the expiry timer of an answered hand-off still fires.

`PendingToolCall.expire` checks that the timer is the wait's current one (its generation),
that the wait is still open and, as it writes, that the call has no final result in the
thread log yet (`first_wins`). Here it checks only the generation: a wait answered on day 2
still expires on day 8, writing a second result (`expired`) for the same tool call to the
thread log and delivering a second `toolFinished`. The controller ignores the second (no
turn waits on it), so no turn record doubles, but the transcript now holds two results.
"""

from __future__ import annotations

from typing import Any

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl import executor
from tests.planted._plant import phase_read_as, replace_handler, variant, with_ctx

INVARIANT = "turn-outcome"


# The bug: the answered wait is not closed for the timer.
_MISREAD = phase_read_as("done", "waiting")


async def _expiry_writes_anyway(ctx: Any, ports: Any, log: Any, call: Any, outcome: str,
                                result: Any, **kwargs: Any) -> str | None:
    if outcome == "expired":
        # The bug, again: the committed result of the call is not looked at either.
        kwargs["first_wins"] = False
    return await executor.record_result(ctx, ports, log, call, outcome, result, **kwargs)


_build = variant(pending={"record_result": _expiry_writes_anyway})


def build(ports: Ports, version: str = "v1") -> App:
    return replace_handler(_build(ports, version), "PendingToolCall", "expire",
                           with_ctx(_MISREAD))


ADAPTER = SimAdapter("planted-expiry-after-answer", "expire ignores that the wait was answered",
                     build)
