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
"""

from __future__ import annotations

from typing import Final, final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import FAULT_KINDS, Dedup, at, attr, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.checkers.model import model_of
from harness.history import History, Record

_KINDS: Final = frozenset({"op.answer", "tool.result", "answer.refused"})
# The decision whose answer each applied outcome accounts for.
_APPLIED: Final = {"answered": "approve", "rejected_access": "approve", "held": "approve",
                   "denied": "deny"}
_NOT_FINAL: Final = frozenset({"background", "held"})


@final
class AnswerFate:
    name: str = "answer-fate"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["answer-fate"]
    description: str = (
        "Every answer the card service accepted is applied to its tool call, or refused with "
        "the reason (already decided, ended, expired, not yours) and the refusal recorded; "
        "none is acknowledged and then silently dropped."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch). When the faults ended it reads from the
    # run's model (harness.checkers.model), built once over the whole history.
    reads: frozenset[str] = _KINDS | FAULT_KINDS | {"run.end"}

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        dedup = Dedup()
        # tool call -> the decision of each answer invoked and not yet acknowledged, in order.
        pending: dict[str, list[str]] = {}
        # (tool call, decision) -> acknowledged answers / their fates, in order.
        answers: dict[tuple[str, str], list[Record]] = {}
        fates: dict[tuple[str, str], list[Record]] = {}
        finals: dict[str, Record] = {}
        for r in history.records:
            kind = r.kind
            if kind not in _KINDS or not dedup.fresh(r):
                continue
            tc = attr(r, "tool_call")
            if tc is None:
                continue
            if kind == "op.answer":
                if r.type == "invoke":
                    pending.setdefault(tc, []).append(str(r.data.get("decision", "approve")))
                elif r.type == "ok" and pending.get(tc):
                    answers.setdefault((tc, pending[tc].pop(0)), []).append(r)
            elif kind == "answer.refused":
                fates.setdefault((tc, str(r.data.get("decision", "approve"))), []).append(r)
            else:
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
                if end - max(answer.time, quiet_since) < config.liveness_bound:
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
        return verdict(
            self.name, violations, reached=judged > 0,
            note="" if judged else "no answer was accepted",
            stats={"answers": float(judged), "unjudged": float(unjudged)},
        )
