"""outcome-justified: a call is rejected for access nobody revoked.

The reference checks the user's access right before a tool runs; `check_access` refuses a tool
the catalog does not know (`known`, true unless the lookup found nothing). Here every check
made in-call (not by a re-run after a hand-off) is told the tool is unknown, so a tool without
approval, and an approval answered in-call, end `rejected_access` in a world where everyone
may use everything.
"""

from __future__ import annotations

from contract.binding import Context
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.executor import ToolCall, check_access
from tests.planted._plant import variant

INVARIANT = "outcome-justified"


async def check_access_unknown(ctx: Context, ports: Ports, call: ToolCall, user: str,
                               run: int, *, rerun_version: str | None,
                               known: bool = True) -> bool:
    # The bug: a check made in-call (no re-run version) reads "not in the catalog".
    return await check_access(ctx, ports, call, user, run, rerun_version=rerun_version,
                              known=known and rerun_version is not None)


build = variant(executor={"check_access": check_access_unknown})
ADAPTER = SimAdapter("planted-permitted-call-rejected",
                     "a tool without approval is rejected for access nobody revoked", build)
