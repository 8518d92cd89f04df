"""effect-done: an approved email is reported sent and never leaves the outbox.

The reference picks the effect by its name (`email`, `charge`) and runs anything else as a
pure tool, whose result is the echo of the call. Here the executor misreads the catalog's
effect of `send_email` and `notify` (as a renamed effect would be), so they take the pure
branch: the call ends answered or completed, and no email is ever sent.
"""

from __future__ import annotations

from typing import Any

from contract.binding import Context
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.effects import Effected, run_effect
from tests.planted._plant import variant

INVARIANT = "effect-done"


async def run_effect_misread(ctx: Context, ports: Ports, *, effect: str | None,
                             **kwargs: Any) -> Effected:
    # The bug: the email effect is not recognised, so it is run as a pure tool.
    return await run_effect(ctx, ports, effect=None if effect == "email" else effect, **kwargs)


build = variant(executor={"run_effect": run_effect_misread})
ADAPTER = SimAdapter("planted-email-never-sent",
                     "an email tool runs as a pure tool: reported sent, never sent", build)
