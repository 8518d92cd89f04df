"""effect-authorized: an effect of a call that waited on a person is one the person approved.

A tool call that showed a card (`tool.awaiting`, or a hand-off) acts on the world (an email, a
charge: `effect.delivered` naming the call) only on the strength of an approving answer that is
the call's final outcome. So, for every such delivery:

- an approving answer (`op.answer` with decision approve) for that call came before it; a
  delivery before any approve (a deny, or no answer yet) is a violation;
- no other final outcome of the call (denied, expired, ended by a new message, cancelled,
  access rejected: the first `tool.result` with a final outcome) came before it: the call was
  over, and the effect acted on an answer that had lost;
- nor after it, unless the turn was held between the run that sent it (its `tool.intent`)
  and that outcome (`turn.held`, or a `tool.result` held): an effect that went out while
  the call's recorded outcome says it was denied, ended or expired leaves the person and the
  agent believing it never happened. A hold is the one honest way to an outcome the effect
  did not decide: the runtime did not know whether the effect happened and asked the person.
  The hold is measured from the intent, not from the delivery: a request sent before a
  takeover may land after the new owner held the turn for it (its host was paused with the
  request in flight), and that hold is the one that asked.

Answers are the runner's (`op.answer`): a history without any (a test driving the runtime
itself) is not judged for "before the approve". Model calls are the runtime's own work, not
a tool's effect, and are not judged here. Nor is a tool that needs no approval before its
first card: it ran on its own, and only when conservative recovery held it (its first card
asks to confirm, mode `confirm`) did it start waiting on a person.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import Dedup, at, attr, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.history import History, Record

_KINDS: Final = frozenset(
    {"tool.awaiting", "tool.handoff", "turn.waiting", "op.answer", "tool.result", "turn.held",
     "tool.intent", "effect.delivered"})
# Final outcomes that are not an approve acting on the world, and how a witness says them.
_NOT_APPROVED: Final = {
    "denied": "the person denied it",
    "expired": "the call expired",
    "ended_by_message": "a new message ended its turn",
    "cancelled": "the turn was cancelled",
    "rejected_access": "the call was rejected (the user may not use the tool)",
}
_NOT_FINAL: Final = frozenset({"background", "held"})
_VERB: Final = {"email": "send_email", "charge": "charge_card"}


@dataclass(slots=True)
class _Call:
    asked: bool = False
    # Deliveries before this record index are not judged: a tool that needs no approval ran
    # and was held, and only its confirmation card (mode "confirm") asked the person.
    gated_from: int = -1
    approved: Record | None = None
    final: Record | None = None
    holds: list[int] = field(default_factory=list)
    intents: list[int] = field(default_factory=list)
    deliveries: list[Record] = field(default_factory=list)


@final
class EffectAuthorized:
    name: str = "effect-authorized"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["effect-authorized"]
    description: str = (
        "Every effect of a tool call that waited on a person is authorized by an approving "
        "answer that is the call's final outcome: never after a deny, a cancel, an expiry or "
        "an end by a new message, and never before an approve."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch).
    reads: frozenset[str] = _KINDS

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        calls: dict[str, _Call] = {}
        # Without the runner's answers (a test driving the runtime itself) nobody can say
        # when the person approved: that rule is then not judged.
        answers_known = False
        dedup = Dedup()
        for r in history.records:
            kind = r.kind
            if kind not in _KINDS or not dedup.fresh(r):
                continue
            tc = attr(r, "tool_call")
            if tc is None:
                continue
            call = calls.get(tc)
            if call is None:
                call = calls[tc] = _Call()
            if kind in ("tool.awaiting", "tool.handoff", "turn.waiting"):
                if not call.asked and r.data.get("mode") == "confirm":
                    call.gated_from = r.index
                call.asked = True
            elif kind == "op.answer":
                answers_known = True
                if (r.type == "invoke" and r.data.get("decision") == "approve"
                        and call.approved is None):
                    call.approved = r
            elif kind == "turn.held":
                call.holds.append(r.index)
            elif kind == "tool.intent":
                call.intents.append(r.index)
            elif kind == "tool.result":
                outcome = str(r.data.get("outcome"))
                if outcome == "held":
                    call.holds.append(r.index)
                elif outcome not in _NOT_FINAL and call.final is None:
                    call.final = r
            elif r.data.get("effect") != "model":
                call.deliveries.append(r)

        violations: list[Violation] = []
        judged = 0
        for tc, call in calls.items():
            if not call.asked or not call.deliveries:
                continue
            judged += 1
            violation = _judge(tc, call, answers_known)
            if violation is not None:
                violations.append(violation)
        return verdict(
            self.name, violations, reached=judged > 0,
            note="" if judged else "no effect of a call that waited on a person",
            stats={"judged_calls": float(judged)},
        )


def _judge(tc: str, call: _Call, answers_known: bool) -> Violation | None:
    """The first unauthorized delivery of the call, as a violation; None if all are."""
    final_rec = call.final
    outcome = str(final_rec.data.get("outcome")) if final_rec is not None else None
    for d in call.deliveries:
        if d.index < call.gated_from:
            continue
        what = f"{_VERB.get(str(d.data.get('effect')), str(d.data.get('effect')))} of {tc}"
        if final_rec is not None and outcome in _NOT_APPROVED and final_rec.index < d.index:
            return Violation(
                f"{what} was delivered at {at(d.time)} after {_NOT_APPROVED[outcome]} "
                f"(its final outcome {outcome} at {at(final_rec.time)}): "
                f"{final_rec.describe()}; {d.describe()}",
                cite((final_rec, d)),
            )
        if answers_known and (call.approved is None or call.approved.index > d.index):
            later = (f"; the approve came later, at {at(call.approved.time)}"
                     if call.approved is not None else "")
            return Violation(
                f"{what} was delivered at {at(d.time)} before the person approved it"
                f"{later}: {d.describe()}",
                cite(x for x in (d, call.approved) if x is not None),
            )
    last = call.deliveries[-1]
    # The run that sent it: its last intent before the delivery (the delivery itself when the
    # runtime writes no intents).
    sent = max((i for i in call.intents if i < last.index), default=last.index)
    if final_rec is not None and outcome in _NOT_APPROVED and not any(
            sent < h < final_rec.index for h in call.holds):
        return Violation(
            f"{_VERB.get(str(last.data.get('effect')), 'effect')} of {tc} was delivered at "
            f"{at(last.time)}, but the call's final outcome is {outcome} at "
            f"{at(final_rec.time)} ({_NOT_APPROVED[outcome]}), with no hold between to ask "
            f"the person: the effect went out on an answer that did not win the call: "
            f"{last.describe()}; {final_rec.describe()}",
            cite((last, final_rec)),
        )
    return None
