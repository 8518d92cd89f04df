"""durable-chaos adapter for the restate-sdk approval agent, on the simulator.

Uses only the public kit (`harness.sdk.SdkSimRuntime`): it says where a message and an
answer go and which invocations are turns; the kit runs the agent's own service objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.adapters.base import RunContext
from harness.checkers.base import CheckConfig
from harness.sdk import InvocationView, SdkSimRuntime

from . import agent


def turn_of(inv: InvocationView) -> tuple[str, str, str] | None:
    if inv.handler != "on_message" or inv.key is None:
        return None
    message_id = str(inv.arg["message_id"])
    return inv.key, f"{inv.key}.{message_id}", message_id


class AgentRuntime(SdkSimRuntime):
    world_endpoints = ("provider",)

    def send_message(self, session: str, message: dict[str, Any]) -> None:
        self.send("Session/on_message", message, key=session)

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        session = self.world.state.cards[tool_call].session
        self.send("Session/answer", {"tool_call": tool_call, "decision": decision},
                  key=session)


@dataclass(frozen=True)
class AgentAdapter:
    defects: frozenset[str] = frozenset()
    engine: str = "sim"

    @property
    def name(self) -> str:
        return "restate-sdk-agent" + "".join(f"+{d}" for d in sorted(self.defects))

    description: str = "an approval agent written with restate-sdk"

    def check_config(self) -> CheckConfig:
        return CheckConfig(hand_off_after=agent.HAND_OFF.total_seconds(),
                           max_wait=agent.MAX_WAIT.total_seconds())

    def open(self, ctx: RunContext) -> AgentRuntime:
        return AgentRuntime(ctx, agent.build(self.defects), turn_of=turn_of)


ADAPTER = AgentAdapter()
WAIT_IN_CALL = AgentAdapter(frozenset({"wait-in-call"}))
EMAIL_NO_KEY = AgentAdapter(frozenset({"email-no-key"}))
