"""no-duplicate-effects: the model is called without an idempotency key.

The reference calls the model with the key `model:{turn}:{step}`. Here the call carries no key
at all: when the provider bills a completion and then fails (a 500 after billing), the engine's
retry of the step is a new request to the provider, billed again. (A world that treated the
missing key as one shared key would deduplicate the retry and hide the duplicate.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from contract import faultpoints
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.effects import SessionLog
from reference_impl.turn import transcript
from tests.planted._plant import variant

INVARIANT = "no-duplicate-effects"


def _model_step(
    ports: Ports, log: SessionLog, session: str, turn: str, step: int
) -> Callable[[], Awaitable[dict[str, Any]]]:
    async def call_model() -> dict[str, Any]:
        messages = transcript(await log.entries())
        response = await ports.model.complete(
            session=session, turn=turn, step=step, messages=messages,
            idempotency_key=None,  # type: ignore[arg-type]  # the bug: no key
        )
        await faultpoints.reach("effect.model.after_call")
        await log.append_once(f"model:{turn}:{step}", "model",
                              {"turn": turn, "step": step, "response": response})
        return dict(response)

    return call_model


build = variant(turn={"_model_step": _model_step})
ADAPTER = SimAdapter("planted-keyless-model-call", "model called without an idempotency key",
                     build)
