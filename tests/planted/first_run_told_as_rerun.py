"""access-rechecked (the re-run's report): every run of a tool is reported as a re-run.

The reference reports `tool.rerun` when PendingToolCall re-runs a call after its wait was
handed off (or sent to the background), re-resolving the person's access on the latest
deployment. Here the runtime reports one before every intent that has none, so a call
approved in the call, whose access was checked once by the turn itself, reads as re-checked
after a hand-off that never happened: access-rechecked judges re-runs by these reports.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from contract.binding import App
from contract.ports import Observer, Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app

INVARIANT = "access-rechecked"


class _EveryRunARerun:
    def __init__(self, observer: Observer, version: str) -> None:
        self.observer = observer
        self.version = version
        self.told: set[tuple[str, object]] = set()

    def emit(self, kind: str, *, event_id: str, **fields: Any) -> None:
        run = (str(fields.get("tool_call")), fields.get("run"))
        if kind == "tool.rerun":
            self.told.add(run)
        elif kind == "tool.intent" and run not in self.told:
            self.told.add(run)
            self.observer.emit(  # the bug
                "tool.rerun", event_id=f"tool.rerun:{run[0]}#{run[1]}",
                session=fields.get("session"), turn=fields.get("turn"), tool_call=run[0],
                access="granted", user="", tool=fields.get("tool"), version=self.version,
                in_catalog=True, run=run[1])
        self.observer.emit(kind, event_id=event_id, **fields)


def build(ports: Ports, version: str = "v1") -> App:
    return build_app(replace(ports, observer=_EveryRunARerun(ports.observer, version)), version)


ADAPTER = SimAdapter("planted-first-run-told-as-rerun",
                     "every run of a tool is reported as a re-run after a hand-off", build)
