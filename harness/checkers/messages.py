"""turn-per-message: every message the person sent gets exactly one turn.

The person's side of "no lost or doubled turn". A message the runner delivered (`op.message`
`ok`, with its `message_id`) is answered by one turn that starts from it (`turn.started`
naming the message in `message`); the busy rule decides only when: at once, after the turn
in progress (queued), or after ending a turn that waits on the person (steered). Two ways to
break it:

- lost: no turn started from the message within `liveness_bound` of its sending, measured
  from the later of the sending and the heal of the faults (as liveness measures). A runtime
  that refuses a message (a terminal error where it should have queued it), drops it when
  the session is busy, or keeps it where no turn reads it, leaves the person unanswered, and
  passes every rule about what its turns did. A run that ended before the bound ran out does
  not judge the message; a fault that never healed judges nothing. A message the runtime
  received (`message.received`, or every message of a runtime that does not report it) and
  kept waiting behind a turn that still waits on the person when the run ends is not judged
  either: whether a message may wait behind a person is the busy rule's question;
- doubled: two distinct turns start from one message (a retried dispatch that makes a new
  turn id, a queued copy run beside the original). Turns of any origin count here: a
  background result brought in as a message is answered once too.

A turn started without naming its message cannot be matched to one; a session where any turn
did so is judged by count instead (lost: fewer turns started than messages whose bound ran
out), and not for doubles.
"""

from __future__ import annotations

from typing import final

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
from harness.checkers.model import RunModel, TurnModel, model_of
from harness.history import History, Record, fmt_duration


@final
class TurnPerMessage:
    name: str = "turn-per-message"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["turn-per-message"]
    description: str = (
        "Every message the person sent gets exactly one turn: one starts from it within the "
        "liveness bound (after the faults healed), and no two do."
    )

    # It reads the run's model (harness.checkers.model), built once over the whole history
    # for every checker that reads it: no `reads`, so run_checkers gives it the history.

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        model = model_of(history)
        dedup = Dedup()
        sent: dict[str, list[Record]] = {}  # session -> its messages, as delivered
        received: set[tuple[str, str]] = set()  # the messages the runtime said it received
        reports_received = False
        for r in history.of_kind("op.message", "message.received"):
            if not dedup.fresh(r):
                continue
            if r.kind == "message.received":
                reports_received = True
                if r.data.get("message") is not None and r.session:
                    received.add((r.session, str(r.data["message"])))
            elif r.type == "ok" and r.session and r.data.get("message_id"):
                sent.setdefault(r.session, []).append(r)
        # (session, message) -> the turns started from it (a message id names a message of
        # its session).
        by_message: dict[tuple[str, str], list[TurnModel]] = {}
        unnamed: set[str] = set()  # sessions with a turn that names no message
        turns_of: dict[str, list[TurnModel]] = {}
        for turn in model.turns.values():
            turns_of.setdefault(turn.session, []).append(turn)
            if turn.message is None:
                unnamed.add(turn.session)
            else:
                by_message.setdefault((turn.session, turn.message), []).append(turn)

        violations: list[Violation] = []
        for (_, message), turns in by_message.items():
            if len(turns) > 1:
                first, second = turns[0], turns[1]
                violations.append(Violation(
                    f"message {message} started {len(turns)} turns: {first.id} at "
                    f"{at(first.started.time)} and {second.id} at {at(second.started.time)}; "
                    f"the person's message was answered twice: {first.started.describe()}; "
                    f"{second.started.describe()}",
                    cite((first.started, second.started)),
                ))

        if model.faults.unhealed:
            return verdict(self.name, violations, reached=bool(violations),
                           note="a fault never healed, so lost messages were not judged")
        bound = config.liveness_bound + config.latency
        after = "after the faults healed" if model.had_faults else "after it was sent"
        judged = 0
        for session, messages in sent.items():
            due = [r for r in messages if (d := model.due(r.time, bound)) is not None
                   and d <= model.end]
            if self._waits_on_person_at_end(model, session):
                due = [r for r in due if reports_received
                       and (session, str(r.data["message_id"])) not in received]
            judged += len(due)
            if session in unnamed:
                started = len(turns_of.get(session, []))
                if started < len(due):
                    violations.append(Violation(
                        f"session {session}: {len(due)} message(s) were sent more than "
                        f"{fmt_duration(bound)} before the run ended at {at(model.end)}, but "
                        f"only {started} turn(s) started: a message got no turn",
                        cite(due),
                    ))
                continue
            for r in due:
                message = str(r.data["message_id"])
                if (session, message) in by_message:
                    continue
                violations.append(Violation(
                    f"message {message} to session {session}, sent at {at(r.time)}, never "
                    f"started a turn: none by the run's end at {at(model.end)}, more than "
                    f"{fmt_duration(bound)} {after}{tolerance_note(config)}; the person got "
                    f"no answer: {r.describe()}",
                    cite((r,)),
                ))
        if not judged and not violations:
            return Result(self.name, True, reached=False,
                          note="no message was sent long enough before the run ended")
        return verdict(self.name, violations)

    @staticmethod
    def _waits_on_person_at_end(model: RunModel, session: str) -> bool:
        """Whether a turn of `session` was still waiting on the person when the run ended
        (in progress, and not among what kept the session busy)."""
        state = model.sessions.get(session)
        busy = {turn for turn, _ in state.busy_turns} if state is not None else set()
        return any(t.ended is None and t.id not in busy
                   for t in model.turns.values() if t.session == session)
