"""A durable-chaos adapter for requests_agent.py, on the public kit (`harness.sdk`) alone, as
a user writes one for their own agent (docs/restate-sdk.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests_agent

from harness.adapters.base import RunContext
from harness.checkers.base import CheckConfig
from harness.sdk import InvocationView, SdkSimRuntime


def turn_of(inv: InvocationView) -> tuple[str, str, str] | None:
    if inv.handler != "on_message" or inv.key is None or inv.arg is None:
        return None
    message_id = str(inv.arg["message_id"])
    return inv.key, f"{inv.key}.{message_id}", message_id


class Runtime(SdkSimRuntime):
    world_endpoints = ("provider",)

    def send_message(self, session: str, message: dict[str, Any]) -> None:
        self.send("Session/on_message", message, key=session)

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        card = self.world.state.cards[tool_call]
        decided = self.__dict__.setdefault("decided", set())
        if tool_call in decided:  # the card takes one answer; a second is refused at once
            self.history.add("answer.refused", session=card.session, turn=card.turn,
                             tool_call=tool_call, data={
                                 "reason": "already_decided", "decision": decision,
                                 "event_id": f"{tool_call}#{len(self.history.records)}"})
            return
        decided.add(tool_call)
        self.send("Session/answer", {"tool_call": tool_call, "decision": decision},
                  key=card.session)


@dataclass(frozen=True)
class RequestsAgentAdapter:
    defects: frozenset[str] = frozenset()
    description: str = "the approval agent on requests"
    engine: str = "sim"

    @property
    def name(self) -> str:
        return "requests-agent" + "".join(f"+{d}" for d in sorted(self.defects))

    def check_config(self) -> CheckConfig:
        return CheckConfig(hand_off_after=300.0, max_wait=8 * 86400.0)

    def open(self, ctx: RunContext) -> Runtime:
        return Runtime(ctx, requests_agent.build(self.defects), turn_of=turn_of)


ADAPTER = RequestsAgentAdapter()
EMAIL_NO_KEY = RequestsAgentAdapter(frozenset({"email-no-key"}))
