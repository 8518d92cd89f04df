"""card-closed: the person's approval card tells the truth about its call.

A card is what the person sees of a tool call that waits on them. When the call ends, the card
must close, with the outcome that ended it: a card left open asks for an answer that can no
longer change anything (the person approves, and nothing happens), and a card closed with
another outcome tells the person something false (a card that says "answered" for a call that
expired). And while the call still waits on the person, its card stays open: a call sent to
the background or held for a confirmation is still theirs to answer, so a card closed with
`background` or `held` took the question away. A card closed with a final outcome tells the
person the call ended so; the runtime then reports that result too (`tool.result`), at the
latest for the next turn of the session, which reads the transcript (a result the controller
decided, a cancel or a new message, may wait for that turn to be written). A call whose card
closed and whose result had not come once a later turn of its session started (after the
call's last record and its own turn's end) is a call the transcript lost: that turn's model
never learns it ended. Judged once the liveness bound has passed since that turn started and
the faults healed (the board keeps no closing times).

Read from the world's card board at the run's end (`run.end` `cards`: each card the card
service showed, by tool call, with the outcome it was closed with), which the runtime cannot
write, and the runtime's `tool.result` (the call's final outcome: its first result that ends
it). A card still open is judged once the liveness bound has passed since the call ended and
since the faults healed: a paused host may close it late. A runtime that reports its results
from the card board itself (the adapter kit) is judged by its own words here, and passes.
"""

from __future__ import annotations

from typing import Final, final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import FAULT_KINDS, Dedup, at, attr, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.checkers.model import NOT_FINAL, RunModel, model_of
from harness.history import History, Record

_KINDS: Final = frozenset({"tool.result", "run.end"})


@final
class CardClosed:
    name: str = "card-closed"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["card-closed"]
    description: str = (
        "A call's approval card is closed when the call ends, with the outcome that ended it, "
        "and stays open while the call still waits on the person (in the background, or "
        "held for a confirmation)."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch); the model gives the end of the faults.
    reads: frozenset[str] = _KINDS | FAULT_KINDS

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        dedup = Dedup()
        finals: dict[str, Record] = {}  # tool call -> its first result that ends it
        end: Record | None = None
        for r in history.records:
            if r.kind not in _KINDS or not dedup.fresh(r):
                continue
            if r.kind == "run.end":
                end = r
                continue
            tc = attr(r, "tool_call")
            if tc is not None and str(r.data.get("outcome")) not in NOT_FINAL:
                finals.setdefault(str(tc), r)
        board = end.data.get("cards") if end is not None else None
        if end is None or not isinstance(board, dict) or not board:
            return Result(self.name, True, reached=False,
                          note="the world's card service showed no card" if end is not None
                          else "the run did not end")
        model = model_of(history)
        violations: list[Violation] = []
        unjudged = 0
        for tc, closed in sorted(board.items()):
            final_rec = finals.get(tc)
            outcome = None if final_rec is None else str(final_rec.data.get("outcome"))
            if closed is None:
                if final_rec is None:
                    continue  # the call still waits on the person
                due = model.due(final_rec.time, config.liveness_bound)
                if due is None or due > end.time:
                    unjudged += 1
                    continue
                violations.append(Violation(
                    f"the card of {tc} was still open at the run's end ({at(end.time)}), "
                    f"although the call ended {outcome} at {at(final_rec.time)}: the person "
                    f"is asked for an answer that can change nothing: {final_rec.describe()}",
                    cite((final_rec, end)),
                ))
            elif closed in NOT_FINAL:
                violations.append(Violation(
                    f"the card of {tc} was closed {closed}, while the call still waited on "
                    "the person: a call "
                    + ("sent to the background" if closed == "background" else "held")
                    + " is still theirs to answer"
                    + ("" if final_rec is None else
                       f" (it ended {outcome} at {at(final_rec.time)})"),
                    cite(x for x in (final_rec, end) if x is not None),
                ))
            elif final_rec is None:
                later = _next_turn(model, tc)
                if later is None:
                    continue  # no turn read the transcript since: it may come with the next
                due = model.due(later.time, config.liveness_bound)
                if due is None or due > end.time:
                    unjudged += 1
                    continue
                violations.append(Violation(
                    f"the card of {tc} was closed {closed}, but the runtime never reported "
                    f"the call's result (no tool.result by the run's end at {at(end.time)}), "
                    f"though a later turn of its session started at {at(later.time)}: that "
                    f"turn's transcript lost how the call ended: {later.describe()}",
                    cite((later, end)),
                ))
            elif closed != outcome:
                violations.append(Violation(
                    f"the card of {tc} was closed {closed}, but the call ended {outcome} at "
                    f"{at(final_rec.time)}: the card told the person something false: "
                    f"{final_rec.describe()}",
                    cite((final_rec, end)),
                ))
        return verdict(
            self.name, violations, reached=True,
            stats={"cards": float(len(board)), "unjudged": float(unjudged)},
        )


def _next_turn(model: RunModel, tc: str) -> Record | None:
    """The first turn of the call's session started after the call's last record and its
    own turn's end: the first to read the transcript once the call was over."""
    call = model.calls.get(tc)
    if call is None or call.session is None:
        return None
    times = [r.time for group in (call.asks, call.answers, call.refusals, call.intents,
                                  call.reruns, call.results, call.holds) for r in group]
    own = model.turns.get(str(call.turn)) if call.turn is not None else None
    if own is None or own.ended is None:
        return None
    last = max([own.ended.time, *times])
    later = [t.started for t in model.turns.values() if t.session == call.session
             and t.id != own.id and t.started.index > own.ended.index
             and t.started.time >= last]
    return min(later, key=lambda r: r.index) if later else None
