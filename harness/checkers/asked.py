"""approval-asked: a tool that needs approval is never decided without asking the person.

The world's catalog (`harness.world.DEFAULT_TOOLS`, the one every runtime looks tools up in)
says which tools need a person's approval (`send_email`, `charge_card`). A call of such a tool
gets its results only after its card was shown (`tool.awaiting`, or a card service call that
failed after showing it: `service.fault` with `op = "show"` and a fault that did the work, a
card the runtime does not know it showed but the person saw): the person is asked before
anything is decided. A result with no card before it is a decision nobody was asked about: the
tool ran unasked (its effect then escapes `effect-authorized`, which judges the calls that
waited on a person), or the runtime answered for the person (the tool reported unknown, or
rejected, without a card).

A person may also answer before the card shows: a client that names the call (`op.answer`
with `named`) races the card, and a runtime that keeps that answer applies it when the call
comes, with no card to show. The person gave their word unasked, so it counts as asked: an
intent after an approving answer given to the call, a result after any answer given to it. A
malformed answer (a decision neither approve nor deny) is nobody's word, and one the runtime
refused by raising (`fail`) was not taken.
"""

from __future__ import annotations

from typing import Final, final

from contract.records import JUDGED_ON, Reading
from contract.services import fault_named
from harness.checkers._common import DECISIONS, Dedup, at, attr, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.history import History, Record
from harness.world import DEFAULT_TOOLS

_KINDS: Final = frozenset({"tool.awaiting", "service.fault", "tool.intent", "tool.result",
                           "op.answer"})
_NEEDS_APPROVAL: Final = frozenset(n for n, spec in DEFAULT_TOOLS.items() if spec.needs_approval)


@final
class ApprovalAsked:
    name: str = "approval-asked"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["approval-asked"]
    description: str = (
        "A call of a tool that needs approval gets a result only after its card was shown: "
        "nothing is decided, or done, without asking the person."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch).
    reads: frozenset[str] = _KINDS

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        dedup = Dedup()
        shown: set[str] = set()
        tools: dict[str, str] = {}  # tool call -> its tool, from the records that name it
        judged: set[str] = set()
        # tool call -> the decisions the person gave it (an answer refused by an error taken
        # back), for an answer that came before any card.
        given: dict[str, list[str]] = {}
        violations: list[Violation] = []
        for r in history.records:
            if r.kind not in _KINDS or not dedup.fresh(r):
                continue
            tc = attr(r, "tool_call")
            if tc is None:
                continue
            if r.kind == "op.answer":
                _answer_given(r, given.setdefault(tc, []))
                continue
            tool = r.data.get("tool")
            if tool is not None:
                tools.setdefault(tc, str(tool))
            if r.kind == "service.fault":
                if (r.data.get("service") == "cards" and r.data.get("op") == "show"
                        and _did_the_work(r.data.get("fault"))):
                    shown.add(tc)
                continue
            if r.kind == "tool.awaiting":
                shown.add(tc)
                continue
            named = tools.get(tc)
            if named not in _NEEDS_APPROVAL or tc in judged:
                continue
            judged.add(tc)
            decisions = given.get(tc, ())
            if tc in shown or ("approve" in decisions if r.kind == "tool.intent"
                               else any(decisions)):
                continue
            what = "wrote its intent" if r.kind == "tool.intent" else (
                f"ended {r.data.get('outcome')}")
            violations.append(Violation(
                f"{tc} ({named}, which needs approval) {what} at {at(r.time)} before any "
                f"card asked the person: {r.describe()}",
                cite((r,)),
            ))
        return verdict(
            self.name, violations, reached=bool(judged),
            note="" if judged else "no call of a tool that needs approval was decided",
            stats={"judged_calls": float(len(judged))},
        )


def _answer_given(r: Record, decisions: list[str]) -> None:
    """Fold one `op.answer` record into the well-formed decisions given to its call."""
    if r.type == "invoke":
        decision = r.data.get("decision")
        if decision in DECISIONS and r.data.get("malformed") is not True:
            decisions.append(str(decision))
        else:
            decisions.append("")  # a malformed answer: a place for its own fail, no word
    elif r.type == "fail" and decisions:
        decisions.pop()


def _did_the_work(fault: object) -> bool:
    try:
        return fault_named(str(fault)).done
    except KeyError:
        return False
