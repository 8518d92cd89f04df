"""pinning-bound (the hand-off's wait): the in-call wait is reported in minutes.

The reference's `tool.handoff` says how long the call waited in-call, in seconds, as every
duration of the contract. Here it is reported in minutes: a call that waited the whole five
minutes of `hand_off_after` reads as having waited five seconds, and an operator reading it
looks for a wait that never happened.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._observed import Misreporting

INVARIANT = "pinning-bound"


def _minutes(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    if kind == "tool.handoff" and isinstance(fields.get("waited"), int | float):
        fields["waited"] = fields["waited"] / 60  # the bug
    return fields


def build(ports: Ports, version: str = "v1") -> App:
    return build_app(replace(ports, observer=Misreporting(ports.observer, _minutes)), version)


ADAPTER = SimAdapter("planted-waited-in-minutes",
                     "a hand-off reports its in-call wait in minutes", build)
