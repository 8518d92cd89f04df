"""hold-justified (run numbers): an approved run is numbered one past the card it answers.

The reference numbers a call's runs from 1, and the run a confirmation asks about after a
hold of run N is N + 1: a hold names the intent it holds on by that number. Here the step
that acts on an answer counts the card as a run of its own, so the first approved run writes
its intent as run 2 with no hold before it, and a later hold of run 1 names an intent that
does not exist under that number.
"""

from __future__ import annotations

from typing import Any

from contract.binding import Context
from contract.ports import Ports, ToolSpec
from harness.adapters.sim import SimAdapter
from reference_impl.effects import SessionLog
from reference_impl.executor import Applied, ToolCall, apply_answer
from tests.planted._plant import variant

INVARIANT = "hold-justified"


async def apply_answer_one_past_the_card(
    ctx: Context, ports: Ports, log: SessionLog, call: ToolCall, spec: ToolSpec | None,
    answer: Any, run: int, **kwargs: Any,
) -> Applied:
    # The bug: the run an answer applies to is numbered after the card, not as the card's.
    return await apply_answer(ctx, ports, log, call, spec, answer, run + 1, **kwargs)


build = variant(executor={"apply_answer": apply_answer_one_past_the_card})
ADAPTER = SimAdapter("planted-run-numbered-from-its-card",
                     "an approved run is numbered one past the card it answers", build)
