"""effect-authorized: an effect of a call that waited on a person is one the person approved.

A tool call that showed a card (`tool.awaiting`, or a hand-off) acts on the world (an email, a
charge: `effect.delivered` naming the call) only on the strength of an approving answer that is
the call's final outcome. So, for every such delivery:

- an approving answer (`op.answer` with decision approve) for that call came before it; a
  delivery before any approve (a deny, or no answer yet) is a violation;
- no other final outcome of the call (denied, expired, ended by a new message, cancelled,
  access rejected: the first `tool.result` with a final outcome) came before it: the call was
  over, and the effect acted on an answer that had lost; unless the run that sent it was held
  before that outcome (below): its request was on its way when the hold asked, and the
  outcome answered the hold (a deny of the confirmation), not the run;
- nor after it, unless the turn was held between the run that sent it (its `tool.intent`)
  and that outcome (`turn.held`, or a `tool.result` held): an effect that went out while
  the call's recorded outcome says it was denied, ended or expired leaves the person and the
  agent believing it never happened. A hold is the one honest way to an outcome the effect
  did not decide: the runtime did not know whether the effect happened and asked the person.
  The hold is measured from the intent, not from the delivery: a request sent before a
  takeover may land after the new owner held the turn for it (its host was paused with the
  request in flight), and that hold is the one that asked.

And the effect is the one the person approved: what it carried (an email's `to`, a charge's
`amount`, as the world received them) is what the call's card showed (`run.end` `shown`: the
arguments the runtime put on the card). An email the person approved for bob that goes to
someone else, a charge of another amount, is not authorized by that approval: a runtime that
lost the call's arguments on the way (across a hand-off, a re-run, a new owner) acts on its
defaults. A card that showed nothing of it (a runtime that puts no arguments on its cards)
leaves that content unjudged.

Answers are the runner's (`op.answer`): a history without any (a test driving the runtime
itself) is not judged for "before the approve". Model calls are the runtime's own work, not
a tool's effect, and are not judged here. Nor is a tool that needs no approval before its
first card: it ran on its own, and only when conservative recovery held it (its first card
asks to confirm, mode `confirm`) did it start waiting on a person; a delivery of its first
run (sent after its intent, before that card) is its own even when it lands after the card.
"""

from __future__ import annotations

from typing import Final, final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import at, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.checkers.model import ToolCall, model_of
from harness.history import History, Record

# What an effect carries that its card shows (an argument of the call, as the world
# received it): the content the person approved.
CONTENT: Final = {"email": "to", "charge": "amount"}
# Final outcomes that are not an approve acting on the world, and how a witness says them.
_NOT_APPROVED: Final = {
    "denied": "the person denied it",
    "expired": "the call expired",
    "ended_by_message": "a new message ended its turn",
    "cancelled": "the turn was cancelled",
    "rejected_access": "the call was rejected (the user may not use the tool)",
}
_VERB: Final = {"email": "send_email", "charge": "charge_card"}


@final
class EffectAuthorized:
    name: str = "effect-authorized"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["effect-authorized"]
    description: str = (
        "Every effect of a tool call that waited on a person is authorized by an approving "
        "answer that is the call's final outcome: never after a deny, a cancel, an expiry or "
        "an end by a new message, and never before an approve; and it does what the card "
        "the person approved showed (whom an email goes to, what a charge is for)."
    )

    # The record kinds it reads, from the run's model (harness.checkers.model: the tool
    # calls, built once over the whole history): run_checkers gives it only these
    # (harness.checkers.base.dispatch), so the model of its view alone says the same.
    reads: frozenset[str] = frozenset(
        {"tool.awaiting", "tool.handoff", "turn.waiting", "op.answer", "tool.result",
         "turn.held", "tool.intent", "effect.delivered", "run.end"})

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        calls = model_of(history).calls.values()
        # Without the runner's answers (a test driving the runtime itself) nobody can say
        # when the person approved: that rule is then not judged.
        answers_known = any(call.answers for call in calls)
        ends = history.of_kind("run.end")
        end = ends[-1] if ends else None
        shown = end.data.get("shown") if end is not None and end.data else None
        violations: list[Violation] = []
        judged = 0
        # In the order the calls were first named by a record this checker reads: a call
        # first named by another (a refusal, a re-run) is listed where it was before the
        # model listed it.
        for call in sorted(calls, key=_first_read):
            deliveries = _deliveries(call)
            if not call.asks or not deliveries:
                continue
            judged += 1
            violation = (_judge(call, deliveries, answers_known)
                         or _as_shown(call.id, deliveries, shown, end))
            if violation is not None:
                violations.append(violation)
        return verdict(
            self.name, violations, reached=judged > 0,
            note="" if judged else "no effect of a call that waited on a person",
            stats={"judged_calls": float(judged)},
        )


def _first_read(call: ToolCall) -> int:
    return min(part[0].index for part in (call.asks, call.answers, call.holds, call.intents,
                                          call.results, call.deliveries) if part)


def _deliveries(call: ToolCall) -> list[Record]:
    """The call's effects: a model call is the runtime's own work, not the tool's effect."""
    return [d for d in call.deliveries if d.data.get("effect") != "model"]


def _judge(call: ToolCall, deliveries: list[Record], answers_known: bool) -> Violation | None:
    """The first unauthorized delivery of the call, as a violation; None if all are."""
    tc = call.id
    final_rec = call.final
    outcome = call.outcome
    approved = call.approved
    gated_from = call.gated_from
    for d in deliveries:
        # Judged by the run that sent it (see `_sent_by`): a run of a tool that needs no
        # approval, started before its confirmation card, may land after the card (its host
        # was paused with the request on its way) and still needed nobody's answer.
        sent = _sent_by(call, d)
        if sent < gated_from:
            continue
        what = f"{_VERB.get(str(d.data.get('effect')), str(d.data.get('effect')))} of {tc}"
        if (final_rec is not None and outcome in _NOT_APPROVED and final_rec.index < d.index
                and not _held_between(call, sent, final_rec.index)):
            return Violation(
                f"{what} was delivered at {at(d.time)} after {_NOT_APPROVED[outcome]} "
                f"(its final outcome {outcome} at {at(final_rec.time)}): "
                f"{final_rec.describe()}; {d.describe()}",
                cite((final_rec, d)),
            )
        if answers_known and (approved is None or approved.index > d.index):
            later = (f"; the approve came later, at {at(approved.time)}"
                     if approved is not None else "")
            return Violation(
                f"{what} was delivered at {at(d.time)} before the person approved it"
                f"{later}: {d.describe()}",
                cite(x for x in (d, approved) if x is not None),
            )
    last = deliveries[-1]
    sent = _sent_by(call, last)
    if (final_rec is not None and outcome in _NOT_APPROVED
            and not _held_between(call, sent, final_rec.index)):
        return Violation(
            f"{_VERB.get(str(last.data.get('effect')), 'effect')} of {tc} was delivered at "
            f"{at(last.time)}, but the call's final outcome is {outcome} at "
            f"{at(final_rec.time)} ({_NOT_APPROVED[outcome]}), with no hold between to ask "
            f"the person: the effect went out on an answer that did not win the call: "
            f"{last.describe()}; {final_rec.describe()}",
            cite((last, final_rec)),
        )
    return None


def _as_shown(tc: str, deliveries: list[Record], shown: object,
              end: Record | None) -> Violation | None:
    """The first delivery of the call whose content is not what its card showed (`shown`:
    `run.end`'s, every card's, by tool call)."""
    card = shown.get(tc) if isinstance(shown, dict) else None
    if not isinstance(card, dict) or end is None:
        return None
    for d in deliveries:
        effect = str(d.data.get("effect"))
        field = CONTENT.get(effect)
        if field is None or field not in card or field not in d.data:
            continue
        if d.data[field] != card[field]:
            return Violation(
                f"{_VERB.get(effect, effect)} of {tc} was delivered at {at(d.time)} with "
                f"{field} = {d.data[field]!r}, but the card the person approved showed "
                f"{field} = {card[field]!r}: the approval was for another {effect}: "
                f"{d.describe()}",
                cite((d, end)),
            )
    return None


def _sent_by(call: ToolCall, delivery: Record) -> int:
    """Where the run that sent `delivery` began: its last intent before the delivery (the
    delivery itself when the runtime writes no intents)."""
    intent = call.intent_before(delivery.index)
    return delivery.index if intent is None else intent.index


def _held_between(call: ToolCall, sent: int, final: int) -> bool:
    """Whether the turn was held after the run that sent an effect began and before the call's
    final outcome: the hold asked the person about that run's effect, so an outcome given to
    the hold (a deny of the confirmation, its expiry) does not say the effect never happened,
    even when the request, in flight on a paused host, lands after it."""
    return any(sent < h.index < final for h in call.holds)
