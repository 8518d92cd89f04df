"""hold-justified: the effect step holds on the intent its own attempt just wrote.

The effect step of the reference holds only on an intent of unknown outcome: its run's
intent, unresolved, and written at another epoch (an earlier attempt wrote it and stopped).
Here the guard forgets the epoch: every run finds the intent it wrote a moment ago, holds,
and asks the person to confirm an effect that was never tried; each confirmation runs again
and holds again, so an approved email is never sent.
"""

from __future__ import annotations

from typing import Any

from contract.binding import Context
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.effects import Effected, run_effect
from tests.planted._plant import variant

INVARIANT = "hold-justified"


async def run_effect_without_epoch(ctx: Context, ports: Ports, *, guard: Any = None,
                                   **kwargs: Any) -> Effected:
    async def unresolved() -> bool:
        # The bug: "our intent has no result" without "and an earlier attempt wrote it".
        return True

    return await run_effect(ctx, ports, guard=None if guard is None else unresolved, **kwargs)


build = variant(executor={"run_effect": run_effect_without_epoch})
ADAPTER = SimAdapter("planted-hold-on-own-intent",
                     "the effect step holds on the intent its own attempt wrote", build)
