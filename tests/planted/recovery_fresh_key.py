"""conservative-recovery: an intent without a known result is re-executed with a fresh key.

When a step of a tool call runs again and finds the call's intent with no result (an earlier
attempt wrote it and stopped, maybe after the effect), the reference holds the turn: the
effect may or may not have happened. Here the executor re-executes the tool instead, under a
new idempotency key, as if the earlier attempt had certainly failed.
"""

from __future__ import annotations

from contract.binding import Context
from contract.ports import Ports, ToolSpec
from harness.adapters.sim import SimAdapter
from reference_impl.effects import SessionLog, run_effect
from reference_impl.executor import ToolCall, ToolRun, run_tool
from tests.planted._plant import rebind, variant

INVARIANT = "conservative-recovery"

_retry_effect = rebind(run_effect, email_message_id=lambda tc: f"email:{tc}:retry",
                       charge_key=lambda tc: f"charge:{tc}:retry")


async def run_tool_without_hold(
    ctx: Context, ports: Ports, log: SessionLog, call: ToolCall, spec: ToolSpec, run: int
) -> ToolRun:
    ran = await run_tool(ctx, ports, log, call, spec, run)
    if not ran.held:
        return ran
    # The bug: "the earlier attempt failed", so run the effect again, under a new key.
    done = await _retry_effect(ctx, ports, tool_call=call.tool_call, tool=call.tool,
                               effect=spec.effect, args=call.args, user=call.user, run=run)
    return ToolRun(held=False, result=done.response)


build = variant(executor={"run_tool": run_tool_without_hold})
ADAPTER = SimAdapter("planted-recovery-fresh-key",
                     "unresolved intent re-executed under a fresh key instead of held", build)
