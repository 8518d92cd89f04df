"""A runtime written outside durable-chaos that states its agent's step bound: public API only.

The agent asks the model at most 8 times a turn (its design's bound), and the adapter says so
in its `CheckConfig` (`max_steps_per_turn`), so `turn-answered` judges the bound. `adapter`
keeps it; `stops_short_adapter` has the bug a user could write: the loop counts against a
bound of 2, so a message that asks for three tools ends "completed" with no answer.

Its model calls go through the world's provider (`world_endpoints`): the world bills each
model step, which is what the rule reads. Load as `step_bound:adapter` from this directory.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from contract.binding import App
from contract.ports import Ports
from harness.adapters.base import RunContext
from harness.adapters.sim import SimRuntime
from harness.checkers.base import CheckConfig
from reference_impl.app import build_app

BOUND = 8  # the agent's documented bound on model steps per turn


class StepBoundRuntime:
    """The Runtime protocol only; the model provider is the world's."""

    world_endpoints = ("provider",)

    def __init__(self, ctx: RunContext, steps: int) -> None:
        def build(ports: Ports, version: str) -> App:
            return build_app(replace(ports, config=replace(ports.config,
                                                           max_steps_per_turn=steps)), version)

        self._engine = SimRuntime(ctx, build)
        self.world = self._engine.world

    def now(self) -> float:
        return self._engine.now()

    def advance(self, until: float) -> None:
        self._engine.advance(until)

    def send_message(self, session: str, message: dict[str, object]) -> None:
        self._engine.send_message(session, message)

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        self._engine.answer(tool_call, decision, user)

    def finish(self) -> None:
        self._engine.finish()

    def close(self) -> None:
        self._engine.close()


@dataclass(frozen=True)
class StepBoundAdapter:
    name: str = "step-bound"
    description: str = "an agent that states its bound of 8 model steps per turn"
    steps: int = BOUND  # the bound its loop really checks
    engine: str = "sim"

    def check_config(self) -> CheckConfig:
        return CheckConfig(max_steps_per_turn=BOUND)

    def open(self, ctx: RunContext) -> StepBoundRuntime:
        return StepBoundRuntime(ctx, self.steps)


adapter = StepBoundAdapter()
stops_short_adapter = StepBoundAdapter(name="step-bound-stops-short",
                                       description="its loop stops after 2 model steps",
                                       steps=2)
