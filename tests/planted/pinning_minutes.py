"""pinning-bound: `hand_off_after` read as minutes.

The executor waits in-call for `hand_off_after` minutes instead of seconds (5 hours, not 5
minutes) before it hands the wait to PendingToolCall: the turn's invocation stays suspended,
pinned to its deployment, for hours while the card waits on a person.
"""

from __future__ import annotations

from dataclasses import replace

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app

INVARIANT = "pinning-bound"


def build(ports: Ports, version: str = "v1") -> App:
    minutes = replace(ports.config, hand_off_after=ports.config.hand_off_after * 60)
    return build_app(replace(ports, config=minutes), version)


ADAPTER = SimAdapter("planted-pinning-minutes", "hand_off_after read as minutes", build)
