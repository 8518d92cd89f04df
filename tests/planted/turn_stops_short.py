"""turn-answered: the turn's loop stops short of its bound, without the model's answer.

The reference asks the model until it answers in text, or until the turn has spent
`max_steps_per_turn` model steps (8, as its adapter states). Here the loop counts against a
bound of 2: a message that plans two tools or more ends `completed` after its second tool
call, and the person never gets the model's answer.
"""

from __future__ import annotations

from dataclasses import replace

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app

INVARIANT = "turn-answered"


def build(ports: Ports, version: str) -> App:
    # The bug: the bound the loop checks is not the one the runtime is configured with.
    return build_app(replace(ports, config=replace(ports.config, max_steps_per_turn=2)), version)


ADAPTER = SimAdapter("planted-turn-stops-short",
                     "the turn's loop stops at 2 model steps, short of its bound of 8", build)
