"""durable-chaos adapter for the restate-sdk agent, on the public kit (`harness.sdk`): the
simulator by default, a real restate-server with `engine="real"` (or AGENT_ENGINE=real)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.adapters.base import RunContext
from harness.checkers.base import CheckConfig
from harness.sdk import InvocationView, SdkSimRuntime
from harness.sdk.real import SdkRealRuntime

from . import agent

SCALE = 8640.0  # on real Restate: scenario seconds per real second (3 days in 30 s)


def turn_of(inv: InvocationView) -> tuple[str, str, str] | None:
    if inv.handler != "on_message" or inv.key is None or inv.arg is None:
        return None
    message_id = str(inv.arg["message_id"])
    return inv.key, f"{inv.key}.{message_id}", message_id


class Agent:  # where a message and an answer go, on either engine
    world_endpoints = ("provider",)
    world: Any
    send: Any
    history: Any

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


class SimAgent(Agent, SdkSimRuntime): ...


class RealAgent(Agent, SdkRealRuntime): ...


@dataclass(frozen=True)
class AgentAdapter:
    defects: frozenset[str] = frozenset()
    engine: str = os.environ.get("AGENT_ENGINE", "sim")
    description: str = "an approval agent written with restate-sdk"

    @property
    def name(self) -> str:
        return "restate-sdk-agent" + "".join(f"+{d}" for d in sorted(self.defects))

    def check_config(self) -> CheckConfig:
        return CheckConfig(hand_off_after=300.0, max_wait=8 * 86400.0)

    def open(self, ctx: RunContext) -> Agent:
        if self.engine == "sim":
            return SimAgent(ctx, agent.build(self.defects), turn_of=turn_of)
        root = str(Path(__file__).parents[2])
        env = {"AGENT_DEFECTS": ",".join(self.defects), "AGENT_TIME_SCALE": str(SCALE),
               "PYTHONPATH": root}
        return RealAgent(ctx, "examples.restate_sdk_agent.agent:app", turn_of=turn_of,
                         scale=SCALE, env=env, cwd=root)


ADAPTER = AgentAdapter()
# One adapter per planted defect, in agent.DEFECTS' order.
WAIT_IN_CALL, EMAIL_NO_KEY, CARD_BEFORE_PENDING, PENDING_WITHOUT_ARGS = (
    AgentAdapter(frozenset({d})) for d in agent.DEFECTS)
