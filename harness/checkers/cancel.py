"""cancel-honored: a turn the person cancelled stops spending at its next step.

A cancel (`op.cancel`, `ok`: the runner delivered it for the session) stops the turn in
progress: a turn that waits on the person ends at once, a running turn ends when it next
looks up between steps. Either way at most the model step already in flight is billed after
the cancel; a second model step of that turn that the world delivered after it means the
turn went on as if nobody had asked it to stop (and went on spending: model calls, tool
calls, effects). Counted per logical step (`logical` of the model's `effect.delivered`,
`{turn}:{step}`), so a retried step is one step.

Steps are counted from the later of the cancel and the heal of the faults: a cancel that
waits on a paused host is applied when the host is back, and the turn may go on meanwhile.
A cancel that found no turn in progress has nothing to stop.

Nor does an approval given after the cancel (later than it: at one instant the two race)
run a tool of that turn (a `tool.intent`, or an
`answered` result, after it, for a call of the turn that had no answer before the cancel): a
turn that waits on the person as state is ended by the cancel, and one still waiting in the
call must not come out of its wait to spend; an approval given before the cancel may still
run its tool, and so may one of a call the person sent to the background (`tool.background`
or a placeholder result before the tool ran): they detached it from the turn to have it done.

And a call of the cancelled turn that asked the person (a card, a hold for a confirmation)
stops asking them: its card is closed once the liveness bound has passed since the cancel (or
since the call's hold, when the hold came after it) and the faults healed. Every answer to a
cancelled turn's call changes nothing, so a card left up asks for an answer in vain, for as
long as the call takes to expire (eight days). Read from the world's card board at the run's
end (`run.end`: each card's outcome and when it closed); a call the board never showed, or a
world that keeps no board, is not judged by this clause, and neither is a call the person
sent to the background (still theirs to approve).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import Dedup, at, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.checkers.model import RunModel, TurnModel, model_of
from harness.history import History, Record


@final
class CancelHonored:
    name: str = "cancel-honored"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["cancel-honored"]
    description: str = (
        "A turn in progress when the person cancelled makes at most the model step already "
        "in flight after the cancel (counted from the heal of the faults), and no approval "
        "given after the cancel runs one of its tools."
    )

    # It reads the run's model (harness.checkers.model), built once over the whole history
    # for every checker that reads it: no `reads`, so run_checkers gives it the history.

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        model = model_of(history)
        dedup = Dedup()
        cancels: list[Record] = []
        steps: dict[str, dict[str, Record]] = {}  # turn -> logical step -> first delivery
        detached: dict[str, Record] = {}  # tool call -> when it went to the background
        for r in history.of_kind("op.cancel", "effect.delivered", "tool.background",
                                 "tool.result"):
            if not dedup.fresh(r):
                continue
            if r.kind in ("tool.background", "tool.result"):
                if r.tool_call and (r.kind == "tool.background"
                                    or r.data.get("outcome") == "background"):
                    detached.setdefault(r.tool_call, r)
                continue
            if r.kind == "op.cancel":
                if r.type == "ok" and r.session:
                    cancels.append(r)
            elif r.data.get("effect") == "model" and r.turn and r.data.get("logical"):
                steps.setdefault(r.turn, {}).setdefault(str(r.data["logical"]), r)
        if not cancels:
            return Result(self.name, True, reached=False, note="no turn was cancelled")
        heal = model.healed_at
        board = _Board.of(history)
        left: set[str] = set()  # calls found still asking the person after a cancel
        violations: list[Violation] = []
        judged = 0
        for cancel in cancels:
            for turn in _in_progress(model.turns.values(), cancel):
                judged += 1
                cutoff = max(cancel.time, heal)
                after = sorted((r for r in steps.get(turn.id, {}).values()
                                if r.index > cancel.index and r.time > cutoff),
                               key=lambda r: r.index)
                violations.extend(_approved_after(model, turn, cancel, detached,
                                                  config.latency))
                violations.extend(_left_waiting(model, turn, cancel, detached,
                                                config.liveness_bound, board, left))
                if len(after) < 2:
                    continue
                since = "the faults healed at " + at(heal) if heal > cancel.time else \
                    "the cancel"
                names = ", ".join(str(r.data["logical"]) for r in after)
                violations.append(Violation(
                    f"turn {turn.id} went on after the person cancelled it at "
                    f"{at(cancel.time)}: the model was billed {len(after)} steps of it after "
                    f"{since} ({names}), more than the one in flight: {cancel.describe()}; "
                    f"{after[1].describe()}",
                    cite((cancel, *after[:2])),
                ))
        if not judged:
            return Result(self.name, True, reached=False,
                          note="no cancel found a turn in progress")
        return verdict(self.name, violations)


def _approved_after(model: RunModel, turn: TurnModel, cancel: Record,
                    detached: dict[str, Record], latency: float) -> list[Violation]:
    """A call of `turn` whose tool ran on an approval given only after the cancel."""
    found: list[Violation] = []
    for call in model.calls.values():
        if call.turn != turn.id:
            continue
        given = [a for a in call.answers if a.type == "invoke"]
        if not given or any(a.index < cancel.index for a in given):
            continue
        # Later than the cancel: at one instant (or within a real engine's measured latency)
        # the two race, and the engine may take the approval first.
        approval = next((a for a in given if a.data.get("decision") == "approve"
                         and a.time - cancel.time > latency), None)
        if approval is None:
            continue
        ran = [r for r in (*call.intents, *call.results) if r.index > approval.index
               and (r.kind == "tool.intent" or r.data.get("outcome") == "answered")]
        moved = detached.get(call.id)
        if ran and moved is not None and moved.index < ran[0].index:
            continue  # sent to the background before it ran: the person's to approve
        if ran:
            found.append(Violation(
                f"the approval of {call.id} given at {at(approval.time)}, after the person "
                f"cancelled turn {turn.id} at {at(cancel.time)}, ran the tool: "
                f"{cancel.describe()}; {approval.describe()}; {ran[0].describe()}",
                cite((cancel, approval, ran[0])),
            ))
    return found


@dataclass(frozen=True, slots=True)
class _Board:
    """The world's card board at the run's end (`run.end`): each card's closing outcome
    (None: open) and, where the world says, when it closed."""

    cards: Mapping[str, str | None]
    closed_at: Mapping[str, float]

    @staticmethod
    def of(history: History) -> _Board | None:
        for r in history.of_kind("run.end"):
            cards, times = r.data.get("cards"), r.data.get("closed_at")
            if isinstance(cards, dict) and cards:
                return _Board({str(k): None if v is None else str(v) for k, v in cards.items()},
                              {str(k): float(v) for k, v in (times or {}).items()
                               if isinstance(v, (int, float))})
        return None


def _left_waiting(model: RunModel, turn: TurnModel, cancel: Record,
                  detached: dict[str, Record], bound: float, board: _Board | None,
                  left: set[str]) -> list[Violation]:
    """A call of `turn` that asked the person and had not ended at the cancel, still asking
    them once the liveness bound had passed since the cancel (or since the call's hold, when
    the hold came after it) and the faults healed: its card still open then (the world's card
    board, which keeps when each card closed; a call with no card there is not judged: its
    result may wait for the next turn, as the design allows). `left` holds the calls already
    found (a call is found once, whatever the number of cancels)."""
    found: list[Violation] = []
    for call in model.calls.values():
        if (call.turn != turn.id or not (call.asks or call.holds) or call.id in detached
                or call.id in left):
            continue
        final = call.final
        if final is not None and final.index < cancel.index:
            continue  # it had ended: nothing of it was left to stop
        start = max([cancel.time, *(h.time for h in call.holds)])
        due = model.due(start, bound)
        if due is None or due > model.end:
            continue
        if board is None or call.id not in board.cards:
            continue  # no card on the world's board: what the person saw is not known
        closed, over = board.cards[call.id], board.closed_at.get(call.id)
        if closed is not None and (over is None or over <= due):
            continue  # closed by then (or the world did not say when)
        what = ("its card was still open at the run's end" if closed is None
                else f"its card closed only at {at(float(over or 0.0))}, {closed}")
        left.add(call.id)
        found.append(Violation(
            f"{call.id} of turn {turn.id} still asked the person when they cancelled the turn "
            f"at {at(cancel.time)}, and {what}: a cancelled turn's call asked for an answer "
            f"that could change nothing: {cancel.describe()}",
            cite(x for x in (cancel, final) if x is not None),
        ))
    return found


def _in_progress(turns: Iterable[TurnModel], cancel: Record) -> list[TurnModel]:
    """The session's turns started before the cancel and not ended by then."""
    found: list[TurnModel] = []
    for turn in turns:
        if turn.session != cancel.session or turn.started.index > cancel.index:
            continue
        if turn.ended is not None and turn.ended.index < cancel.index:
            continue
        found.append(turn)
    return found
