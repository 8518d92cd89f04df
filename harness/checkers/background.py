"""background-honored: a person who sends a waiting call to the background gets their turn back.

Sending a call to the background (`op.background`, `ok`: the runner delivered it for an open
card) means "go on without this; tell me when it is done". The runtime honors it by moving
the call to the background (`tool.background`), which hands the turn a placeholder result
(`tool.result`, `tool.finished` or `turn.resumed` with outcome `background`), or it finds the
call already decided or already in the background: a final outcome of the call, an answer
applied that was given before the request or while the request could still be on its way
(within the engine's latency of it, counted in time when no host was down: a request held
up by a paused or crashed host may reach the call after a later answer; the engine may take
either first, and what the answer leads to, a confirmation after a hold, is a new question),
an earlier move, or the
end of the call's turn while it waited on the call (a cancel or a new message ends the wait;
the call's result is written by the next turn, if one comes), makes the request moot. Either
has to show within `liveness_bound` of the request, measured from the later of the request
and the heal of the faults (as liveness measures). A request refused or ignored leaves the
turn waiting on the person, which no other rule objects to: waiting on a person is allowed.

A run that ended before the bound ran out does not judge the request; a fault that never
healed judges nothing.

A `tool.finished` that names whether it carries a placeholder (`placeholder`) tells the
truth: a placeholder is what a call sent to the background hands its turn (outcome
`background`), so a real result (any other outcome) is never one, and the hand-back of a
call sent to the background always is. A runtime that does not report the flag is not judged
on it.

A request sent from another session (`op.background` of session S naming a call of session
T, the runner's `of`: a client that names a call it does not own) is not the person's: it
must change nothing. A call moved to the background with no request of its own session
before the move, and one from another, was moved by a stranger.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import Dedup, at, guarded
from harness.checkers.base import (
    CheckConfig,
    Result,
    Violation,
    cite,
    tolerance_note,
    verdict,
)
from harness.checkers.model import RunModel, ToolCall, TurnModel, model_of
from harness.history import History, Record, fmt_duration

# The records that say a call went to the background (with outcome `background` for those
# that carry an outcome).
_MOVED: Final = frozenset({"tool.background", "tool.result", "tool.finished", "turn.resumed"})
# How a turn that waited on a call ends the wait without the call's result (docs/events.md).
_ENDS_THE_WAIT: Final = frozenset({"cancelled", "steered"})


@final
class BackgroundHonored:
    name: str = "background-honored"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["background-honored"]
    description: str = (
        "A call the person sent to the background goes there (its turn gets a placeholder), "
        "was already decided, or its wait was ended by a cancel or a new message, within the "
        "liveness bound (after the faults healed)."
    )

    # It reads the run's model (harness.checkers.model), built once over the whole history
    # for every checker that reads it: no `reads`, so run_checkers gives it the history.

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        model = model_of(history)
        dedup = Dedup()
        requests: list[Record] = []
        moved: dict[str, list[Record]] = {}  # tool call -> what moved it to the background
        for r in history.of_kind("op.background", *_MOVED):
            if not dedup.fresh(r) or r.tool_call is None:
                continue
            if r.kind == "op.background":
                if r.type == "ok":
                    requests.append(r)
            elif r.kind == "tool.background" or r.data.get("outcome") == "background":
                moved.setdefault(r.tool_call, []).append(r)
        violations: list[Violation] = _placeholder_flags(history, Dedup())
        if not requests:
            if violations:
                return verdict(self.name, violations)
            return Result(self.name, True, reached=False, note="no call was sent to the "
                          "background")
        own: list[Record] = []
        strangers = 0  # foreign requests: each judged by every move of its call to the end
        for r in requests:
            if _foreign(model, r) is None:
                own.append(r)
                continue
            strangers += 1
            violation = _moved_by_stranger(model, r, requests, moved.get(str(r.tool_call), ()))
            if violation is not None:
                violations.append(violation)
        requests = own
        if model.faults.unhealed:
            return Result(self.name, True, reached=False,
                          note="a fault never healed, so background requests were not judged")
        bound = config.liveness_bound + config.latency
        heal = model.healed_at
        judged = strangers
        for r in requests:
            call = r.tool_call
            assert call is not None
            deadline = model.due(r.time, bound)
            if deadline is None or deadline > model.end:
                continue
            judged += 1
            # Moved by then (a call already in the background is where the person wants it:
            # a second request is moot).
            if any(m.time <= deadline for m in moved.get(call, ())):
                continue
            known = model.calls.get(call)
            final = known.final if known is not None else None
            if final is not None and final.time <= deadline:
                continue
            on_its_way = model.due_in_uptime(r.time, config.latency)
            if (known is not None and on_its_way is not None
                    and _answered_first(known, r, deadline, on_its_way)):
                continue
            if known is not None and _wait_ended(model.turns.get(str(known.turn)), call,
                                                 deadline):
                continue
            after = "after the faults healed" if heal > r.time else "after it was sent"
            violations.append(Violation(
                f"the background request for {call} at {at(r.time)} was not honored: no "
                f"tool.background or placeholder result, and no final outcome of the call, "
                f"within {fmt_duration(bound)} {after}{tolerance_note(config)}; the turn "
                f"kept waiting on the person: {r.describe()}",
                cite((r,)),
            ))
        if not judged:
            return Result(self.name, True, reached=False,
                          note="no background request was sent long enough before the end")
        return verdict(self.name, violations)


def _placeholder_flags(history: History, dedup: Dedup) -> list[Violation]:
    """Each `tool.finished` whose `placeholder` flag says the opposite of its outcome."""
    found: list[Violation] = []
    for r in history.of_kind("tool.finished"):
        flag = r.data.get("placeholder")
        if flag is None or not dedup.fresh(r):
            continue
        background = r.data.get("outcome") == "background"
        if bool(flag) != background:
            what = ("calls its result a placeholder, but the outcome is "
                    f"{r.data.get('outcome')}: a real result" if flag else
                    "has outcome background, the placeholder a call sent to the background "
                    "hands its turn, but says it is not a placeholder")
            found.append(Violation(f"the toolFinished of {r.tool_call} {what}: "
                                   f"{r.describe()}", cite((r,))))
    return found


def _foreign(model: RunModel, request: Record) -> str | None:
    """The session that owns the call a request from another session named, else None."""
    call = model.calls.get(str(request.tool_call))
    owner = request.data.get("of") or (call.session if call is not None else None)
    if owner is None or request.session is None or owner == request.session:
        return None
    return str(owner)


def _moved_by_stranger(model: RunModel, request: Record, requests: list[Record],
                       moves: Sequence[Record]) -> Violation | None:
    """A move of the call after a foreign request, with no request of its own session before
    the move: the stranger's request moved it."""
    owner = _foreign(model, request)
    for move in moves:
        if move.index < request.index:
            return None  # in the background before the stranger asked
        if any(r.tool_call == request.tool_call and r.index < move.index
               and _foreign(model, r) is None for r in requests):
            return None  # its own person asked first
        return Violation(
            f"{request.tool_call} of session {owner} went to the background at "
            f"{at(move.time)} at the request of session {request.session}, which does not "
            f"own it (no request of {owner} before it): {request.describe()}; "
            f"{move.describe()}",
            cite((request, move)),
        )
    return None


def _wait_ended(turn: TurnModel | None, call: str, deadline: float) -> bool:
    """Whether the call's turn ended by `deadline` while it waited on the call (a cancel or
    a new message): the wait the request would move is over."""
    if turn is None or turn.ended is None:
        return False
    return (turn.ended.time <= deadline and turn.ended.tool_call == call
            and turn.reason in _ENDS_THE_WAIT)


def _answered_first(call: ToolCall, request: Record, deadline: float,
                    on_its_way: float) -> bool:
    """Whether an answer given before the request, or while the request could still be on
    its way (by `on_its_way`: the engine's latency after it, in up-time: the engine may take
    either first), was applied (not refused by `deadline`): the card the person wanted to
    leave was already decided, and what the answer led to (a confirmation after a hold) is a
    new question."""
    before = sum(1 for a in call.answers if a.type == "invoke" and (
        a.index < request.index or a.time <= on_its_way))
    refused = sum(1 for x in call.refusals if x.time <= deadline)
    return before > refused
