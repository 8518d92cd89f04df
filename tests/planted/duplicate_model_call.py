"""no-duplicate-effects: the model call's idempotency key changes with every attempt.

The reference calls the model with the key `model:{turn}:{step}`, so when the provider bills
a completion and then fails (a 500 after billing), the engine's retry of the step carries the
same key and is not billed again. Here the key also names the attempt's thread-log epoch,
which every attempt takes anew: the retry is a new completion, billed twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from contract import faultpoints
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.effects import SessionLog, model_key
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
            # The bug: the attempt's epoch makes every retry a new request.
            idempotency_key=f"{model_key(turn, step)}@{log.epoch}",
        )
        await faultpoints.reach("effect.model.after_call")
        await log.append_once(f"model:{turn}:{step}", "model",
                              {"turn": turn, "step": step, "response": response})
        return dict(response)

    return call_model


build = variant(turn={"_model_step": _model_step})
ADAPTER = SimAdapter("planted-duplicate-model-call", "model idempotency key per attempt",
                     build)
