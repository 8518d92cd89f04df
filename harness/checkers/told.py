"""result-told: an approved call that finished after its turn had ended starts a new turn.

A call can outlive its turn: the person sent it to the background (the turn went on without
it), or approved it while a new message ended the turn and the approved run had already
begun (the approval won the call, the message ended only the turn). When such a run
finishes, its effect is done (an email sent, a card charged) and no turn is there to say so:
the agent must learn of it as a new message of the session, and a turn starts from it, as
one does for every message (the design's `toolFinished`). A result kept where no turn reads
it, or dropped because its turn is over, leaves the person never told what was done in their
name, and every other rule passes: the effect was authorized and happened once.

Judged for a call whose final result is `answered` (its run did what it was asked) recorded
after its own turn's end (`turn.ended`), and that had left its turn before that end: its run
had begun (an intent) or the person had sent it to the background (a placeholder result). A
turn that ended while its call still waited on the person (a runtime that ends the turn at
the hand-off and runs the tool alone when the answer comes) is that runtime's own design.
Then a turn of its session must start after the result within the liveness bound, counted
from the result, from the end of a turn of the session in progress then (the result's
message waits its turn, behind a person if that turn waits on one; one still in progress at
the run's end is not judged) and from the heal of the faults. A run that ended otherwise
(denied, expired, cancelled, held: its effect unknown) is not judged here. A runtime that
reports no turns is not judged.
"""

from __future__ import annotations

from typing import final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import at, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.checkers.model import ToolCall, model_of
from harness.history import History


@final
class ResultTold:
    name: str = "result-told"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["result-told"]
    description: str = (
        "An approved call whose run finished after its turn had ended starts a new turn of "
        "its session within the liveness bound: the agent learns, and tells the person, what "
        "was done."
    )

    # It reads the run's model (harness.checkers.model), built once over the whole history
    # for every checker that reads it: no `reads`, so run_checkers gives it the history.

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        model = model_of(history)
        violations: list[Violation] = []
        judged = unjudged = 0
        for call in model.calls.values():
            final = call.final
            own = model.turns.get(str(call.turn)) if call.turn is not None else None
            if (final is None or str(final.data.get("outcome")) != "answered" or own is None
                    or own.ended is None or own.ended.index > final.index):
                continue
            if not _outlived(call, own.ended.index):
                continue  # its turn ended before the call left it: the turn's own design
            # A turn of the session in progress when the result came keeps the session
            # busy: the result's turn waits its turn (behind a person, for as long as they
            # take), so the bound runs from the end of that turn.
            busy = [t for t in model.turns.values() if t.session == own.session
                    and t.started.index < final.index
                    and (t.ended is None or t.ended.index > final.index)]
            if any(t.ended is None for t in busy):
                unjudged += 1
                continue
            start = max([final.time, *(t.ended.time for t in busy if t.ended is not None)])
            due = model.due(start, config.liveness_bound + config.latency)
            later = [t.started for t in model.turns.values() if t.session == own.session
                     and t.started.index > final.index]
            if later and (due is None or later[0].time <= due):
                judged += 1
                continue
            if due is None or due > model.end:
                unjudged += 1
                continue
            judged += 1
            what = (f"no turn of {own.session} started by the run's end at {at(model.end)}"
                    if not later else
                    f"the next turn of {own.session} started only at {at(later[0].time)}")
            violations.append(Violation(
                f"{call.id} ({call.tool or 'tool'}) finished answered at {at(final.time)}, "
                f"after its turn {own.id} ended at {at(own.ended.time)}, and {what}: the "
                f"agent was never told (and never told the person) what was done: "
                f"{final.describe()}",
                cite((own.ended, final)),
            ))
        return verdict(
            self.name, violations, reached=judged > 0,
            note="" if judged else "no approved call finished after its turn had ended",
            stats={"judged": float(judged), "unjudged": float(unjudged)},
        )


def _outlived(call: ToolCall, ended: int) -> bool:
    """Whether the call left its turn before the turn ended: its run had begun (an intent:
    the approval won the call, and a new message or a cancel ended only the turn), or the
    person had sent it to the background. A turn that ended while its call still waited on
    the person (a runtime that ends the turn at the hand-off and runs the tool alone when
    the answer comes) is its runtime's own design, not judged here."""
    if any(r.index < ended for r in call.intents):
        return True
    return any(r.index < ended and str(r.data.get("outcome")) == "background"
               for r in call.results)
