"""busy-rule (the queue's reports): only background results are reported queued.

The reference reports every message that found its session busy (`message.queued`), and the
FIFO order is judged on these reports. Here a person's message that queues is not reported,
only a background result that queues is, as a runtime that reports from one of its two
admission paths would: the person's place in the queue escapes the FIFO check.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._observed import Misreporting

INVARIANT = "busy-rule"


def _results_only(kind: str, fields: dict[str, Any]) -> dict[str, Any] | None:
    if kind == "message.queued" and fields.get("origin") == "message":
        return None  # the bug
    return fields


def build(ports: Ports, version: str = "v1") -> App:
    return build_app(replace(ports, observer=Misreporting(ports.observer, _results_only)),
                     version)


ADAPTER = SimAdapter("planted-queued-results-only",
                     "a person's queued message is not reported queued", build)
