"""no-duplicate-effects: the email message id is minted per attempt, not journaled.

The reference stores the message id in its own journaled step before sending, so every send
of one tool call (a retry, a confirmed re-run after a hold) carries the same id and the outbox
drops the repeats. Here the id is minted inside the send step, by each attempt: a send that
runs again goes out under a fresh id, and the person gets the email twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from weakref import WeakKeyDictionary

from contract.binding import Context
from contract.ports import Mailer, Ports
from harness.adapters.sim import SimAdapter
from reference_impl.effects import Effected, Guard, email_message_id, run_effect
from tests.planted._plant import variant

INVARIANT = "no-duplicate-effects"

# Sends per outbox (one outbox per run): a "fresh id" that is deterministic, so a replay of
# the same seed mints the same ids.
_sends: WeakKeyDictionary[Mailer, int] = WeakKeyDictionary()


class _FreshIdMailer:
    """The send step's view of the outbox: the id it is given is replaced by a fresh one."""

    def __init__(self, mailer: Mailer) -> None:
        self._mailer = mailer

    async def send_email(self, *, message_id: str, to: str, subject: str, body: str,
                         tool_call: str) -> dict[str, Any]:
        n = _sends[self._mailer] = _sends.get(self._mailer, 0) + 1
        return await self._mailer.send_email(
            message_id=f"{email_message_id(tool_call)}~{n}", to=to, subject=subject,
            body=body, tool_call=tool_call)


async def run_effect_fresh_id(
    ctx: Context, ports: Ports, *, tool_call: str, tool: str, effect: str | None,
    args: Mapping[str, Any], user: str, run: int, guard: Guard | None = None,
) -> Effected:
    if effect == "email":
        # The bug: the id the send carries is made by the attempt that sends.
        ports = replace(ports, mailer=_FreshIdMailer(ports.mailer))
    return await run_effect(ctx, ports, tool_call=tool_call, tool=tool, effect=effect,
                            args=args, user=user, run=run, guard=guard)


build = variant(executor={"run_effect": run_effect_fresh_id})
ADAPTER = SimAdapter("planted-duplicate-email", "email message id minted per attempt", build)
