"""card-closed: the next turn writes a call's final result and leaves its card up.

The Controller decides a call's end (a cancel, a new message) and the next turn writes it to
the thread log; PendingToolCall closes the card on the Controller's endWait. A call moved to
the background after the cancel, before the turn said it waits, makes PendingToolCall ignore
that endWait. The reference's next turn closes the card with the result it writes (the
call's final one); here it leaves that to PendingToolCall, as the reference did until
2026-12-03: the card stays up, refusing every answer, until the call expires days later.
"""

from __future__ import annotations

from typing import Any

from contract.binding import Context
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.effects import SessionLog
from reference_impl.executor import CLOSED_BY_CONTROLLER, ToolCall, record_result
from tests.planted._plant import variant

INVARIANT = "card-closed"


async def record_result_card_kept(ctx: Context, ports: Ports, log: SessionLog, call: ToolCall,
                                  outcome: str, result: Any, *, close_card: bool,
                                  first_wins: bool = False, **kwargs: Any) -> str | None:
    # The bug: a first-wins write of a result the controller decides (a new message, a
    # cancel: the next turn writes those) leaves the card to PendingToolCall. (The
    # replacement reaches every module that writes results; PendingToolCall's own write of a
    # cancelled held call loses its close too, and scenario 67 sees that.)
    keep = first_wins and outcome in CLOSED_BY_CONTROLLER
    return await record_result(ctx, ports, log, call, outcome, result,
                               close_card=close_card and not keep, first_wins=first_wins,
                               **kwargs)


build = variant(turn={"record_result": record_result_card_kept})
ADAPTER = SimAdapter("planted-card-kept-by-the-next-turn",
                     "the next turn writes a call's final result and leaves its card up", build)
