"""An approval agent on Temporal, written the naive way.

One workflow per user message (a "turn"): ask the model; when it calls a tool that needs a
person's approval, show a card and wait *in the workflow* for the answer, up to `max_wait`
(8 days in production); then run the tool (send the email) as an activity. Workers use
worker versioning with the PINNED behavior, so a waiting workflow keeps its worker version
alive for as long as it waits.

The model, the outbox and the approval cards are HTTP endpoints at WORLD_URL (in a chaos run,
the harness's world; in production, your LLM gateway, mail service and chat UI).
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

TASK_QUEUE = "approval-agent"
NEEDS_APPROVAL = {"send_email", "charge_card"}


@dataclass
class Message:
    session: str
    turn: str
    message_id: str
    text: str
    user: str
    plan: list[Any] = field(default_factory=list)
    max_wait: float = 8 * 86400.0  # real seconds


def _post(path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(os.environ["WORLD_URL"] + path, json.dumps(body).encode(),
                                     {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"{}")


@activity.defn
async def ask_model(session: str, turn: str, step: int, messages: list[Any]) -> dict[str, Any]:
    return dict(await asyncio.to_thread(_post, "/model/complete", {
        "session": session, "turn": turn, "step": step, "messages": messages,
        "idempotency_key": f"{turn}:{step}"}))


@activity.defn
async def show_card(session: str, turn: str, tool_call: str, tool: str) -> None:
    await asyncio.to_thread(_post, "/cards/show", {"session": session, "turn": turn,
                                                   "tool_call": tool_call, "tool": tool,
                                                   "args": {}})


@activity.defn
async def close_card(tool_call: str, outcome: str) -> None:
    await asyncio.to_thread(_post, "/cards/close", {"tool_call": tool_call, "outcome": outcome})


@activity.defn
async def send_email(tool_call: str, to: str) -> str:
    # A fresh message id per attempt: the mail service cannot tell a retry from a new email.
    sent = await asyncio.to_thread(_post, "/email", {
        "message_id": uuid.uuid4().hex, "to": to, "subject": "as you asked",
        "body": "approved by you", "tool_call": tool_call})
    return str(sent["message_id"])


ACTIVITIES = [ask_model, show_card, close_card, send_email]
_QUICK = {"start_to_close_timeout": timedelta(seconds=3),
          "retry_policy": RetryPolicy(initial_interval=timedelta(milliseconds=300),
                                      maximum_interval=timedelta(seconds=1))}


@workflow.defn
class ApprovalAgent:
    def __init__(self) -> None:
        self.decision: str | None = None

    @workflow.signal
    def answer(self, decision: str) -> None:
        self.decision = decision

    @workflow.run
    async def run(self, msg: Message) -> str:
        messages: list[Any] = [{"role": "user", "text": msg.text, "plan": msg.plan}]
        for step in range(8):
            reply = await workflow.execute_activity(
                ask_model, args=[msg.session, msg.turn, step, messages], **_QUICK)
            call = reply.get("tool_call")
            if call is None:
                return str(reply.get("text"))
            result = await self.run_tool(msg, call)
            messages.append({"role": "tool", "tool_call": call["id"], "result": result})
        return "too many steps"

    async def run_tool(self, msg: Message, call: dict[str, Any]) -> str:
        name, tool_call = call["name"], call["id"]
        if name in NEEDS_APPROVAL:
            # Cleared before the card shows, not after: the person may answer the moment the
            # card is up, and the signal can reach the workflow before show_card's result does.
            self.decision = None
            await workflow.execute_activity(show_card, args=[msg.session, msg.turn, tool_call,
                                                             name], **_QUICK)
            try:
                await workflow.wait_condition(lambda: self.decision is not None,
                                              timeout=timedelta(seconds=msg.max_wait))
            except TimeoutError:
                await workflow.execute_activity(close_card, args=[tool_call, "expired"],
                                                **_QUICK)
                return "expired"
            outcome = "answered" if self.decision == "approve" else "denied"
            await workflow.execute_activity(close_card, args=[tool_call, outcome], **_QUICK)
            if outcome == "denied":
                return "denied"
        if name in ("send_email", "notify"):
            return await workflow.execute_activity(send_email, args=[tool_call, msg.user],
                                                   **_QUICK)
        return "done"
