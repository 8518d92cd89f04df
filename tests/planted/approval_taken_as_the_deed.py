"""effect-done: an approved tool is reported done, and its run never acts.

The reference's run of a tool with an effect writes its intent, then sends the email or the
charge. Here the run of a tool that needs approval takes the approval itself as the deed: it
reports the call answered with no intent written and nothing sent. Nothing else tells: no
intent names an effect to look for, which is why effect-done also reads the tool the records
name (a mutant of the intent step's guard did the same, and every checker passed it).
"""

from __future__ import annotations

from contract.binding import Context
from contract.ports import Ports, ToolSpec
from harness.adapters.sim import SimAdapter
from reference_impl.effects import SessionLog
from reference_impl.executor import ToolCall, ToolRun, run_tool
from tests.planted._plant import variant

INVARIANT = "effect-done"


async def run_tool_in_name_only(ctx: Context, ports: Ports, log: SessionLog, call: ToolCall,
                                spec: ToolSpec, run: int) -> ToolRun:
    if spec.needs_approval:
        # The bug: approved is taken for done.
        return ToolRun(held=False, result={"ok": True, "tool": call.tool})
    return await run_tool(ctx, ports, log, call, spec, run)


build = variant(executor={"run_tool": run_tool_in_name_only})
ADAPTER = SimAdapter("planted-approval-taken-as-the-deed",
                     "an approved tool is reported done and never runs", build)
