"""answer-fate: every answer the person gave has a fate the person can see.

The runner answers a card that the card service shows open (`op.answer`, invoke then ok: the
answer was accepted). From then on the answer is either applied, or refused with its reason
(`answer.refused`: already decided, ended, expired, not yours). Applied means the call got a
result the answer decided: an approve ends `answered`, `rejected_access` (the user may not use
the tool) or `held` (a new card asks to confirm); a deny ends `denied`. An answer that is
acknowledged and then neither applied nor refused was silently dropped: a deny after an
approve already won, an approval after the call expired, a second early answer overwriting
the first.

Answers and fates are matched per tool call and per decision, by count: each fate accounts
for one answer of its decision, and the answers left over (the latest ones) were dropped. A
result the runtime reports twice (a retried step) counts once (`event_id`). An answer is
judged once the liveness bound has passed since it was given and since the last fault
ended: a paused host may hold it up for that long.

A refusal tells the person why, and the reason must be true of the call: `already_decided`
only when it had another answer (an answer applied to it at any time, a second answer given,
or a final outcome by then), `expired` only when it expired, `ended` only when a new message
or a cancel ended it, or its turn ended (by then: the refusal's time, or the end of the
faults that were holding things up, plus the tolerance) and no other final outcome of the
call came before the refusal (an approval that won the call over a new message left it
answered, and a later answer to it is already decided, not ended), or the person cancelled
its session while its turn was in progress (a cancelled turn stops at its next step; an
answer after the cancel runs nothing, though the turn may end only at its hand-off). An
answer refused as "already decided" on a call nobody had answered, which then waits out its
days, was dropped with a false reason. A refusal that also names the outcome that ended the
call (`outcome`, optional) must name an outcome, and the call's final one once it has one,
unless the call outlived its turn: the person sent it to the background after the refusal (a
call in the background is no longer its turn's: a cancelled turn's call goes on there, and
its answer still runs it), or it was held (its confirmation card is left to the person).

An answer may come before its card: a client that names the call (`op.answer` `named`)
races the card, and the answer is kept until the call comes (a second one before it is
refused as already decided). It is judged as any answer once the call came (the model asked
for it, or the runtime named it), unless its tool needs no approval and it never asked the
person: an answer naming a call that never came, or one that never waits for an answer, is
not judged (nothing could apply it, and nothing says the call will not come).

A malformed answer (`malformed`, or a decision neither approve nor deny: a hostile or broken
client) is never applied: no result is decided by it, and the call goes on as if it had not
been answered, so the later real answer or the expiry decides. A result of a call that got
one is decided by a well-formed answer of its decision given before it, each answer deciding
one result; a result with none left (an approve's `answered`, `held` or `rejected_access`,
a deny's `denied`) after a malformed answer was decided by it. Refusing a malformed answer,
with an error (the runner's `fail`) or `answer.refused`, is fine, and saying nothing is not
a drop: it needs no fate, and is no "other answer" that makes `already_decided` true.
"""

from __future__ import annotations

from typing import Final, final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import (
    DECISIONS,
    FAULT_KINDS,
    Dedup,
    at,
    attr,
    guarded,
    malformed_request,
)
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.checkers.model import RunModel, TurnModel, model_of
from harness.history import History, Record
from harness.world import DEFAULT_TOOLS

_KINDS: Final = frozenset({"op.answer", "tool.result", "answer.refused", "turn.ended",
                           "op.cancel", "tool.background", "effect.delivered"})
# The decision whose answer each applied outcome accounts for.
_APPLIED: Final = {"answered": "approve", "rejected_access": "approve", "held": "approve",
                   "denied": "deny"}
_NOT_FINAL: Final = frozenset({"background", "held"})
# The final outcomes that make each refusal reason true (`already_decided`: any).
_REASON_OUTCOMES: Final = {"expired": frozenset({"expired"}),
                           "ended": frozenset({"ended_by_message", "cancelled"})}
_NEEDS_APPROVAL: Final = frozenset(n for n, spec in DEFAULT_TOOLS.items() if spec.needs_approval)


@final
class AnswerFate:
    name: str = "answer-fate"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["answer-fate"]
    description: str = (
        "Every answer the card service accepted is applied to its tool call, or refused with "
        "the reason (already decided, ended, expired, not yours) and the refusal recorded; "
        "none is acknowledged and then silently dropped. A malformed answer (neither "
        "approve nor deny) is never applied."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch). When the faults ended it reads from the
    # run's model (harness.checkers.model), built once over the whole history.
    reads: frozenset[str] = _KINDS | FAULT_KINDS | {"run.end"}

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        dedup = Dedup()
        # tool call -> each answer invoked and not yet acknowledged (its `invoke`), in order.
        pending: dict[str, list[Record]] = {}
        # (tool call, decision) -> acknowledged answers / their fates, in order.
        answers: dict[tuple[str, str], list[Record]] = {}
        fates: dict[tuple[str, str], list[Record]] = {}
        finals: dict[str, Record] = {}
        # tool call -> every well-formed answer given (a refusal may come before its `ok`) /
        # every malformed one / every refusal of a well-formed one / every result, in order.
        given_to: dict[str, list[Record]] = {}
        malformed: dict[str, list[Record]] = {}
        named: set[int] = set()  # the `ok` (index) of each accepted answer naming its call
        turn_ends: dict[str, float] = {}  # turn -> when it first ended
        refusals: dict[str, list[Record]] = {}
        results: dict[str, list[Record]] = {}
        cancels: dict[str, list[Record]] = {}  # session -> the cancels delivered to it
        moved: dict[str, list[Record]] = {}  # tool call -> its moves to the background
        asked: set[str] = set()  # the calls the model asked for (the world's billed replies)
        for r in history.records:
            kind = r.kind
            if kind not in _KINDS or not dedup.fresh(r):
                continue
            if kind == "effect.delivered":
                if r.data.get("asked") is not None:
                    asked.add(str(r.data["asked"]))
                continue
            if kind == "tool.background":
                tc = attr(r, "tool_call")
                if tc is not None:
                    moved.setdefault(str(tc), []).append(r)
                continue
            if kind == "op.cancel":
                if r.type == "ok" and r.session:
                    cancels.setdefault(r.session, []).append(r)
                continue
            if kind == "turn.ended":
                turn = attr(r, "turn")
                if turn is not None:
                    turn_ends.setdefault(str(turn), r.time)
                continue
            tc = attr(r, "tool_call")
            if tc is None:
                continue
            if kind == "op.answer":
                if r.type == "invoke":
                    pending.setdefault(tc, []).append(r)
                    if malformed_request(r):
                        malformed.setdefault(tc, []).append(r)
                    else:
                        given_to.setdefault(tc, []).append(r)
                elif pending.get(tc):
                    # ok: accepted; fail (refused by an error) or info: not an answer to
                    # account for, but its invoke is no longer waiting for its outcome.
                    sent = pending[tc].pop(0)
                    if r.type == "fail" and sent in given_to.get(tc, ()):
                        given_to[tc].remove(sent)  # refused by an error: never given
                    if r.type == "ok" and not malformed_request(sent):
                        answers.setdefault((tc, _decision(sent)), []).append(r)
                        if sent.data.get("named") is True:
                            named.add(r.index)
            elif kind == "answer.refused":
                if str(r.data.get("decision", "approve")) not in DECISIONS:
                    continue  # a malformed answer's refusal: fine, and no fate of another
                fates.setdefault((tc, str(r.data.get("decision", "approve"))), []).append(r)
                refusals.setdefault(tc, []).append(r)
            else:
                results.setdefault(tc, []).append(r)
                outcome = str(r.data.get("outcome"))
                decision = _APPLIED.get(outcome)
                if decision is not None:
                    fates.setdefault((tc, decision), []).append(r)
                if outcome not in _NOT_FINAL:
                    finals.setdefault(tc, r)

        model = model_of(history)
        end = model.end
        quiet_since = model.faults.last_end or 0.0
        violations: list[Violation] = []
        judged = unjudged = 0
        for (tc, decision), given in answers.items():
            accounted = len(fates.get((tc, decision), ()))
            for answer in given[accounted:]:
                if end - max(answer.time, quiet_since) < config.liveness_bound or (
                        answer.index in named and not _waits_for_answers(model, asked, tc)):
                    unjudged += 1
                    continue
                final_rec = finals.get(tc)
                ended = (f"; the call ended {final_rec.data.get('outcome')} at "
                         f"{at(final_rec.time)}" if final_rec is not None else "")
                violations.append(Violation(
                    f"the {decision} of {tc} accepted at {at(answer.time)} was silently "
                    f"dropped: neither applied nor refused with a reason{ended}: "
                    f"{answer.describe()}"
                    + (f"; {final_rec.describe()}" if final_rec is not None else ""),
                    cite(x for x in (answer, final_rec) if x is not None),
                ))
            judged += len(given)
        for tc, bad in malformed.items():
            judged += len(bad)
            applied = _appliedmalformed_request(sorted(given_to.get(tc, []) + bad
                                                + results.get(tc, []), key=lambda x: x.index))
            if applied is not None:
                answer, result = applied
                violations.append(Violation(
                    f"the malformed answer {answer.data.get('decision')!r} to {tc} given at "
                    f"{at(answer.time)} was applied: the call ended "
                    f"{result.data.get('outcome')} at {at(result.time)} with no "
                    f"{_APPLIED.get(str(result.data.get('outcome')))} given to decide it: "
                    f"{answer.describe()}; {result.describe()}",
                    cite((answer, result)),
                ))
        for tc, refused in refusals.items():
            for r in refused:
                by = max(r.time, quiet_since) + config.tolerance
                turn = str(attr(r, "turn"))
                turn_end = turn_ends.get(turn)
                stopped = (turn_end is not None and turn_end <= by) or _cancelled(
                    model.turns.get(turn), cancels.get(str(attr(r, "session")), []), r)
                wrong = _outcome_named_wrong(r, results.get(tc, []), moved.get(tc, []))
                if wrong:
                    violations.append(Violation(
                        f"an answer to {tc} was refused at {at(r.time)} as ended by "
                        f"{r.data.get('outcome')!r}, {wrong}: "
                        f"{_what_happened(results.get(tc, []))}: {r.describe()}",
                        cite((r,)),
                    ))
                if not _reason_true(r, given_to.get(tc, []), results.get(tc, []), by,
                                    stopped):
                    violations.append(Violation(
                        f"an answer to {tc} was refused at {at(r.time)} as "
                        f"{r.data.get('reason')}, which the call never was: "
                        f"{_what_happened(results.get(tc, []))}: {r.describe()}",
                        cite((r,)),
                    ))
        return verdict(
            self.name, violations, reached=judged > 0,
            note="" if judged else "no answer was accepted",
            stats={"answers": float(judged), "unjudged": float(unjudged)},
        )


def _decision(answer: Record) -> str:
    return str(answer.data.get("decision", "approve"))


def _waits_for_answers(model: RunModel, asked: set[str], tc: str) -> bool:
    """Whether the call an answer named (`named`) came and waits for a person's answer: it
    asked them (a card, a hand-off), or it came (the model asked for it, or the runtime
    named it) and its tool is not known to need no approval. A call that never came, or one
    of a tool that needs none and never asked, has nothing to apply the answer to."""
    call = model.calls.get(tc)
    if call is None:
        return tc in asked
    if call.asks:
        return True
    came = tc in asked or bool(call.intents or call.results or call.refusals or call.reruns
                               or call.holds or call.deliveries)
    return came and (call.tool is None or call.tool in _NEEDS_APPROVAL)


def _appliedmalformed_request(records: list[Record]) -> tuple[Record, Record] | None:
    """The first (malformed answer, result) where the result was decided by the answer, in
    the record order of one call's answers and results: a result whose decision has no
    well-formed answer left to account for it, after a malformed answer."""
    unused = dict.fromkeys(DECISIONS, 0)
    last_malformed: Record | None = None
    for r in records:
        if r.kind == "op.answer":
            if malformed_request(r):
                last_malformed = r
            else:
                unused[_decision(r)] += 1
            continue
        decision = _APPLIED.get(str(r.data.get("outcome")))
        if decision is None:
            continue
        if unused[decision] > 0:
            unused[decision] -= 1
        elif last_malformed is not None:
            return last_malformed, r
    return None


def _reason_true(refusal: Record, given: list[Record], results: list[Record],
                 by: float, turn_ended: bool) -> bool:
    """Whether the refusal's reason is true of its call (see the module docstring): its
    final outcomes by `by`, an answer applied to it at any time, the answers given, whether
    its turn had ended by `by`."""
    reason = str(refusal.data.get("reason"))
    finals = {str(r.data.get("outcome")) for r in results if r.time <= by
              and str(r.data.get("outcome")) not in _NOT_FINAL}
    if reason == "already_decided":
        applied = any(str(r.data.get("outcome")) in _APPLIED for r in results)
        again = sum(1 for a in given if a.index < refusal.index) >= 2
        return applied or again or bool(finals)
    if reason == "ended" and turn_ended:
        # A held call ends with its turn, result or not; a call decided another way before
        # the refusal (its approval ran: answered) was not ended, though its turn was.
        before = {str(r.data.get("outcome")) for r in results if r.index < refusal.index
                  and str(r.data.get("outcome")) not in _NOT_FINAL}
        return not before - _REASON_OUTCOMES["ended"]
    wanted = _REASON_OUTCOMES.get(reason)
    return wanted is None or bool(finals & wanted)  # not_yours: not judged here


def _outcome_named_wrong(refusal: Record, results: list[Record], moved: list[Record]) -> str:
    """What is wrong with the outcome a refusal names as the one that ended its call (the
    optional `outcome`), or "": it must be an outcome, and the call's final one once the
    call has one (a call whose result was never written is not judged). Two ways a call
    outlives the turn that ended: the person sent it to the background after the refusal (a
    call in the background is no longer its turn's), or it was held (its confirmation card
    is left to the person, whatever ends the turn)."""
    if "outcome" not in refusal.data:
        return ""
    named = refusal.data["outcome"]
    if not isinstance(named, str) or not named:
        return "which names no outcome"
    if any(m.index > refusal.index for m in moved) or any(
            str(r.data.get("outcome")) == "held"
            or (str(r.data.get("outcome")) == "background" and r.index > refusal.index)
            for r in results):
        return ""
    finals = {str(r.data.get("outcome")) for r in results
              if str(r.data.get("outcome")) not in _NOT_FINAL}
    if finals and named not in finals:
        return f"but the call ended {', '.join(sorted(finals))}"
    return ""


def _cancelled(turn: TurnModel | None, cancels: list[Record], refusal: Record) -> bool:
    """Whether a cancel of the session came before the refusal while `turn` was in progress."""
    if turn is None:
        return False
    return any(turn.started.index < c.index < refusal.index
               and (turn.ended is None or turn.ended.index > c.index) for c in cancels)


def _what_happened(results: list[Record]) -> str:
    outcomes = [f"{r.data.get('outcome')} at {at(r.time)}" for r in results]
    return "it " + (", then ".join(outcomes) if outcomes else "had no result")

