"""approval-asked: a tool that needs approval runs without asking the person.

The reference asks the person before a tool whose catalog entry says it needs approval
(`send_email`, `charge_card`): the card, then the answer, then the run. Here the executor
reads the catalog's flag for the email tool as "no approval needed" (a renamed field, a
default), so the email goes out at once and no card is ever shown.
"""

from __future__ import annotations

from contract.binding import Context
from contract.ports import Ports, ToolSpec
from harness.adapters.sim import SimAdapter
from reference_impl.executor import ToolCall, lookup_tool
from tests.planted._plant import variant

INVARIANT = "approval-asked"


async def lookup_without_approval(ctx: Context, ports: Ports, call: ToolCall,
                                  run: int) -> ToolSpec | None:
    spec = await lookup_tool(ctx, ports, call, run)
    if spec is None or spec.effect != "email":
        return spec
    # The bug: the approval flag is lost for the email tool.
    return ToolSpec(spec.name, False, spec.effect)


build = variant(executor={"lookup_tool": lookup_without_approval})
ADAPTER = SimAdapter("planted-approval-not-asked",
                     "an email tool that needs approval runs without a card", build)
