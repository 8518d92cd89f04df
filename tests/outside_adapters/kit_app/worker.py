"""One worker of the toy engine and its app, in one process (`python -m kit_app.worker`).

The engine keeps its state in files under KIT_APP_STATE: `inbox/TURN.json` (a turn to run),
`turns/TURN.json` (its status and the version it runs on: a turn is pinned to the version
that first ran it, and a restarted worker of that version runs it again from the start),
`versions/V` (registered versions; the newest takes new turns), `answers/TURN` (the person's
decision). The app keeps its own effects: it logs its approval cards and emails to
`effects.jsonl` (it never calls the harness's world) and asks the harness at its fault point
`effect.email.after_send` (after the email, before the engine records the turn done).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

STATE = Path(os.environ["KIT_APP_STATE"])
VERSION = os.environ["APP_VERSION"]


def write(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj))
    tmp.replace(path)


def log_effect(line: dict[str, Any]) -> None:
    with open(STATE / "effects.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")


def fault_point(point: str) -> None:
    body = json.dumps({"point": point, "pid": os.getpid()}).encode()
    request = urllib.request.Request(os.environ["DURABLE_CHAOS_WORLD_URL"] + "/faultpoint",
                                     body, {"content-type": "application/json"})
    urllib.request.urlopen(request, timeout=60).read()


def newest() -> str:
    versions = sorted(STATE.glob("versions/*"), key=lambda p: float(p.read_text()))
    return versions[-1].name if versions else VERSION


def run_turn(req: dict[str, Any]) -> None:
    turn, call = req["turn"], f"{req['turn']}.t1"
    status = STATE / "turns" / f"{turn}.json"
    write(status, {"status": "running", "version": VERSION})
    log_effect({"card": "show", "session": req["session"], "turn": turn, "tool_call": call,
                "tool": "send_email"})
    answer, deadline = STATE / "answers" / turn, time.monotonic() + req["max_wait"]
    while not answer.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    if not answer.exists():  # the card stays open: the adapter closes it from the result
        write(status, {"status": "completed", "version": VERSION, "result": "expired"})
        return
    log_effect({"card": "close", "tool_call": call, "outcome": "answered"})
    # A fresh key per attempt: the planted defect a crash after the email brings out.
    log_effect({"effect": "email", "key": uuid.uuid4().hex, "tool_call": call, "turn": turn})
    fault_point("effect.email.after_send")
    write(status, {"status": "completed", "version": VERSION, "result": "sent"})


def main() -> None:
    (STATE / "versions").mkdir(exist_ok=True)
    if not (STATE / "versions" / VERSION).exists():
        (STATE / "versions" / VERSION).write_text(repr(time.time()))
    while True:
        for path in sorted((STATE / "inbox").glob("*.json")):
            req = json.loads(path.read_text())
            status = STATE / "turns" / f"{req['turn']}.json"
            if status.exists():
                state = json.loads(status.read_text())
                mine = state["version"] == VERSION and state["status"] != "completed"
            else:
                mine = newest() == VERSION
            if mine:
                run_turn(req)
        time.sleep(0.02)


if __name__ == "__main__":
    main()
