"""effect-done: a call reported done did its effect in the world.

The other effect rules bound effects from above (at most once, only when authorized). This one
bounds them from below: when the runtime reports a tool call `answered` (the person approved
and it ran) or `completed` (it ran without approval), and the call is a tool with an effect
(its run wrote an intent, `tool.intent`, which only such tools do, or a record of the call
names a tool the world's catalog, `harness.world.DEFAULT_TOOLS`, gives an effect: a run that
skipped its intent and its effect alike still reported a tool that acts), the world must have
delivered that effect for the call (`effect.delivered` with its tool_call), in this attempt or
an earlier one. A call that reports an email sent that never left the outbox, or a charge that
the ledger never saw, is what a person trusts and is wrong about.

Judged on the world's records, which the runtime cannot write, at the end of the run: a
delivery may come before the result (the usual order) or after it (a delivery the world records
late).
"""

from __future__ import annotations

from typing import Final, final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import Dedup, at, attr, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.history import History, Record
from harness.world import DEFAULT_TOOLS

_KINDS: Final = frozenset({"tool.intent", "tool.result", "tool.awaiting", "effect.delivered"})
# The catalog's tools that act on the world (email, charge): a call of one reported done
# did its effect.
_ACTS: Final = frozenset(name for name, spec in DEFAULT_TOOLS.items() if spec.effect)
# The outcomes that say the tool ran.
_RAN: Final = frozenset({"answered", "completed"})


@final
class EffectDone:
    name: str = "effect-done"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["effect-done"]
    description: str = (
        "A tool call with an effect that the runtime reports answered or completed had its "
        "effect delivered to the world."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch).
    reads: frozenset[str] = _KINDS

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        dedup = Dedup()
        intents: dict[str, Record] = {}
        tools: dict[str, str] = {}  # tool call -> its tool, from the records that name it
        delivered: set[str] = set()
        ran: dict[str, Record] = {}
        for r in history.records:
            if r.kind not in _KINDS or not dedup.fresh(r):
                continue
            tc = attr(r, "tool_call")
            if tc is None:
                continue
            tool = r.data.get("tool")
            if tool is not None and r.kind != "effect.delivered":
                tools.setdefault(tc, str(tool))
            if r.kind == "tool.intent":
                intents.setdefault(tc, r)
            elif r.kind == "effect.delivered":
                delivered.add(str(tc))
            elif r.kind == "tool.result" and str(r.data.get("outcome")) in _RAN:
                ran.setdefault(tc, r)
        violations: list[Violation] = []
        judged = 0
        for tc, result in ran.items():
            intent = intents.get(tc)
            tool = tools.get(tc)
            if intent is None and tool not in _ACTS:
                continue
            judged += 1
            if tc in delivered:
                continue
            if intent is None:
                violations.append(Violation(
                    f"{tc} ({tool}, a tool that acts on the world) was reported "
                    f"{result.data.get('outcome')} at {at(result.time)}, and the world never "
                    f"received its effect (its run wrote no intent either): "
                    f"{result.describe()}",
                    cite((result,)),
                ))
                continue
            violations.append(Violation(
                f"{tc} ({intent.data.get('tool', 'tool')}) was reported "
                f"{result.data.get('outcome')} at {at(result.time)}, and the world never "
                f"received its effect: {intent.describe()}, then {result.describe()}",
                cite((intent, result)),
            ))
        return verdict(
            self.name, violations, reached=judged > 0,
            note="" if judged else "no call with an effect was reported done",
            stats={"judged_calls": float(judged)},
        )
