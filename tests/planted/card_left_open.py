"""card-closed: an expired call's card is left open.

The reference closes a call's card with the result that ended it, whatever ended it. Here the
card service is told of every end but the expiry: after eight days without an answer the call
ends `expired`, and the person still sees a card that asks them to approve it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from contract.binding import App
from contract.ports import ApprovalUI, Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app

INVARIANT = "card-closed"


class _ForgetsExpiry:
    def __init__(self, ui: ApprovalUI) -> None:
        self.ui = ui

    async def show_card(self, *, session: str, turn: str, tool_call: str, tool: str,
                        args: dict[str, Any]) -> None:
        await self.ui.show_card(session=session, turn=turn, tool_call=tool_call, tool=tool,
                                args=args)

    async def close_card(self, *, tool_call: str, outcome: str) -> None:
        if outcome != "expired":  # the bug: the expiry's close is never sent
            await self.ui.close_card(tool_call=tool_call, outcome=outcome)


def build(ports: Ports, version: str) -> App:
    return build_app(replace(ports, ui=_ForgetsExpiry(ports.ui)), version)


ADAPTER = SimAdapter("planted-card-left-open",
                     "an expired call's card is never closed", build)
