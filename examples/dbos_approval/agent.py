"""An approval agent on DBOS, written the naive way.

One workflow per user message (a "turn"), taken from the `turns` queue: ask the model; when
it calls a tool that needs a person's approval, show a card and wait *in the workflow*
(`DBOS.recv`) for the answer, up to `max_wait` (8 days in production); then send the email as
a step. A process runs one application version; DBOS recovers a workflow only in a process
of the version that started it, so a waiting workflow keeps its version's process needed.

The model, the outbox and the approval cards are HTTP endpoints at WORLD_URL (in a chaos run,
the harness's world). The system database is SQLite (DBOS_SYSTEM_DATABASE_URL), as for a small
service on one machine; a `postgresql://` URL works the same way.

Run a server: `APP_VERSION=v1 python -m examples.dbos_approval.agent`. A turn asks the model
at most `MAX_STEPS` times. `AGENT_DEFECTS=stops-short` plants a defect: the loop stops after
2 model steps, and a turn that asked for more tools ends without the model's answer.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.request
import uuid
from typing import Any

from dbos import DBOS

NEEDS_APPROVAL = {"send_email", "charge_card"}
MAX_STEPS = 8  # model steps per turn (settings.TIMING states it for the chaos run)
STEPS = 2 if "stops-short" in os.environ.get("AGENT_DEFECTS", "").split(",") else MAX_STEPS


def _post(path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(os.environ["WORLD_URL"] + path, json.dumps(body).encode(),
                                     {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"{}")


@DBOS.step()
def ask_model(session: str, turn: str, step: int, messages: list[Any]) -> dict[str, Any]:
    return dict(_post("/model/complete", {"session": session, "turn": turn, "step": step,
                                          "messages": messages,
                                          "idempotency_key": f"{turn}:{step}"}))


@DBOS.step()
def show_card(session: str, turn: str, tool_call: str, tool: str) -> None:
    _post("/cards/show", {"session": session, "turn": turn, "tool_call": tool_call,
                          "tool": tool, "args": {}})


@DBOS.step()
def close_card(tool_call: str, outcome: str) -> None:
    _post("/cards/close", {"tool_call": tool_call, "outcome": outcome})


@DBOS.step()
def send_email(tool_call: str, to: str) -> str:
    # A fresh message id per attempt: the mail service cannot tell a retry from a new email.
    sent = _post("/email", {"message_id": uuid.uuid4().hex, "to": to, "subject": "as you asked",
                            "body": "approved by you", "tool_call": tool_call})
    return str(sent["message_id"])


@DBOS.workflow()
def approval_turn(session: str, turn: str, text: str, user: str, plan: list[Any],
                  max_wait: float) -> str:
    messages: list[Any] = [{"role": "user", "text": text, "plan": plan}]
    for step in range(STEPS):
        reply = ask_model(session, turn, step, messages)
        call = reply.get("tool_call")
        if call is None:
            return str(reply.get("text"))
        result = run_tool(session, turn, user, call, max_wait)
        messages.append({"role": "tool", "tool_call": call["id"], "result": result})
    return "too many steps"


def run_tool(session: str, turn: str, user: str, call: dict[str, Any], max_wait: float) -> str:
    name, tool_call = call["name"], call["id"]
    if name in NEEDS_APPROVAL:
        show_card(session, turn, tool_call, name)
        decision = DBOS.recv("answer", timeout_seconds=max_wait)
        if decision is None:
            close_card(tool_call, "expired")
            return "expired"
        outcome = "answered" if decision == "approve" else "denied"
        close_card(tool_call, outcome)
        if outcome == "denied":
            return "denied"
    if name in ("send_email", "notify"):
        return send_email(tool_call, user)
    return "done"


def main() -> None:
    DBOS(config={"name": "approval-agent", "application_version": os.environ["APP_VERSION"],
                 "system_database_url": os.environ["DBOS_SYSTEM_DATABASE_URL"]})
    DBOS.launch()
    DBOS.register_queue("turns", polling_interval_sec=0.1)  # the adapter enqueues turns here
    threading.Event().wait()  # serve until killed


if __name__ == "__main__":
    main()
