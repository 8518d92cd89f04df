"""busy-rule: one turn at a time per session, queued messages in order.

A turn is in progress from `turn.started` until `turn.ended`, including while it waits on a
person as state (`turn.waiting`): with the hand-off no invocation runs then, which is exactly
why the controller must treat `activeTurnInvocationId or waitingTurn` as busy. A new message
for a waiting turn must end it (`turn.ended`, like a steer) before the next turn starts.

Messages that found the session busy (`message.queued`) start their turns in the order they
were queued (FIFO). A message that started a turn without being queued is not in the FIFO.
A person's new message (an `op.message`) is never queued behind a turn that waits on a person
as state: it ends that turn instead (background results do wait their turn in the FIFO).
The turn reports `turn.waiting` before its controller hears of it, so a message may be queued
"behind" a wait the controller did not know of yet; that is fine if the controller then ends
or resumes the turn within `tolerance` of the queueing, and a violation if the message stays
queued behind the wait. The same holds for a person's message queued while the turn ran: once
the turn waits on a person as state, the message waits behind a person too, so the turn must
end (or resume) within `tolerance` of its `turn.waiting`. Both count only time in which no
host was down and no call held (`RunModel.due_in_uptime`): a paused or crashed controller acts
when it is back, so the fault that held it up excuses it, for as long as it lasted and no
longer (a fault elsewhere, days later, excuses nothing); when a fault never healed they are
not judged.

A runtime that reports queueing (`message.queued`) in a run reports every message it
queued: a message received while a turn of its session was running (started, not waiting on
a person as state, not ended), which started its own turn only after, waited in the FIFO,
and the FIFO order is judged on these reports. A queued message left out of them escapes
that judgment. A runtime that reports no queueing is not judged on it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import FAULT_KINDS, Dedup, at, attr, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.checkers.model import RunModel, model_of
from harness.history import History, Record

_KINDS = frozenset(
    {"turn.started", "turn.ended", "turn.waiting", "turn.resumed", "message.queued",
     "message.received", "op.message"}
)


@dataclass(slots=True)
class _Session:
    # turn id -> its turn.started record, in start order.
    turns: dict[str, Record] = field(default_factory=dict)
    # turn id -> its turn.waiting record while it waits as state.
    waiting: dict[str, Record] = field(default_factory=dict)
    fifo: deque[tuple[str, Record]] = field(default_factory=deque)
    queued: set[str] = field(default_factory=set)
    # message id -> its message.received, for messages received while a turn ran.
    busy: dict[str, Record] = field(default_factory=dict)


@final
class BusyRule:
    name: str = "busy-rule"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["busy-rule"]
    description: str = (
        "Each session runs at most one turn at a time (a turn waiting on a person still "
        "counts) and starts queued messages in the order they were queued."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch).
    # It also reads the run's model (when the faults healed): so the fault records too.
    reads: frozenset[str] = _KINDS | FAULT_KINDS

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        model = model_of(history)
        sessions: dict[str, _Session] = {}
        dedup = Dedup()
        violations: list[Violation] = []
        contended = False
        turns = queued = 0
        max_queue = 0
        from_person: set[str] = set()
        # (session, waiting turn, its turn.waiting, the message.queued, the later of the two:
        # when the message began to wait behind a person) not yet excused.
        behind: list[tuple[str, str, Record, Record, Record]] = []
        reported: set[str] = set()  # every message ever reported queued
        unreported: list[tuple[Record, Record]] = []  # (received while busy, its turn.started)
        for r in history.records:
            kind = r.kind
            if kind not in _KINDS or not dedup.fresh(r):
                continue
            if kind == "op.message":
                message_id = r.data.get("message_id")
                if message_id is not None:
                    from_person.add(str(message_id))
                continue
            sid = attr(r, "session")
            if sid is None:
                continue
            s = sessions.get(sid)
            if s is None:
                s = sessions[sid] = _Session()
            turn = attr(r, "turn")
            if kind == "turn.started":
                if turn is None or turn in s.turns:
                    continue
                turns += 1
                if s.turns:
                    contended = True
                    other, since = next(iter(s.turns.items()))
                    wait = s.waiting.get(other)
                    state = (f"waiting on tool call {attr(wait, 'tool_call')} since "
                             f"{at(wait.time)}" if wait is not None else "running")
                    violations.append(Violation(
                        f"session {sid}: turn {turn} started at {at(r.time)} while turn {other} "
                        f"(started at {at(since.time)}) was still in progress ({state}): "
                        f"{since.describe()}; {r.describe()}",
                        cite(x for x in (since, wait, r) if x is not None),
                    ))
                s.turns[turn] = r
                message = r.data.get("message")
                received = s.busy.pop(str(message), None) if message is not None else None
                if received is not None and message not in reported:
                    unreported.append((received, r))
                if message is not None and message in s.queued:
                    while s.fifo and s.fifo[0][0] not in s.queued:
                        s.fifo.popleft()
                    head, head_rec = s.fifo[0]
                    if head != message:
                        violations.append(Violation(
                            f"session {sid}: message {message} started turn {turn} at "
                            f"{at(r.time)} before message {head}, which was queued earlier at "
                            f"{at(head_rec.time)}: {head_rec.describe()}; {r.describe()}",
                            cite((head_rec, r)),
                        ))
                    s.queued.discard(message)
            elif kind == "turn.ended":
                if turn is not None:
                    s.turns.pop(turn, None)
                    s.waiting.pop(turn, None)
                    behind = _excuse(behind, sid, turn, r, model, config.tolerance)
            elif kind == "turn.waiting":
                if turn is not None and turn in s.turns:
                    s.waiting[turn] = r
                    if len(s.waiting) == len(s.turns):
                        # The person's messages queued while it ran now wait behind a person.
                        behind.extend((sid, turn, r, q, r) for m, q in s.fifo
                                      if m in s.queued and m in from_person)
            elif kind == "turn.resumed":
                if turn is not None:
                    s.waiting.pop(turn, None)
                    behind = _excuse(behind, sid, turn, r, model, config.tolerance)
            elif kind == "message.queued":
                message = r.data.get("message")
                contended = True
                if message is None or message in s.queued:
                    continue
                queued += 1
                s.queued.add(message)
                reported.add(message)
                s.fifo.append((message, r))
                max_queue = max(max_queue, len(s.queued))
                if message in from_person and s.turns and len(s.waiting) == len(s.turns):
                    waiting_turn, wait = next(iter(s.waiting.items()))
                    behind.append((sid, waiting_turn, wait, r, r))
            elif kind == "message.received" and s.turns:
                contended = True
                message = r.data.get("message")
                if message is not None and len(s.waiting) < len(s.turns):
                    s.busy.setdefault(str(message), r)
        for sid, waiting_turn, wait, r, since in behind:
            due = model.due_in_uptime(since.time, config.tolerance)
            if due is None or due > model.end:
                continue  # a fault never healed, or the run ended before it was due
            if r.time <= wait.time and r.index < wait.index:
                sentence = (f"session {sid}: the new message {r.data.get('message')}, queued at "
                            f"{at(r.time)} while turn {waiting_turn} ran, stayed queued behind "
                            f"it once it waited on tool call {attr(wait, 'tool_call')} as "
                            f"state from {at(wait.time)}, instead of ending it like a steer: "
                            f"{r.describe()}; {wait.describe()}")
            else:
                sentence = (f"session {sid}: the new message {r.data.get('message')} was queued "
                            f"at {at(r.time)} behind turn {waiting_turn}, which waits on tool "
                            f"call {attr(wait, 'tool_call')} as state since {at(wait.time)}, "
                            f"instead of ending it like a steer: {wait.describe()}; "
                            f"{r.describe()}")
            violations.append(Violation(sentence, cite((wait, r))))
        if queued:
            violations.extend(Violation(
                f"session {attr(received, 'session')}: message {received.data.get('message')} "
                f"arrived at {at(received.time)} while a turn ran and started turn "
                f"{attr(started, 'turn')} only at {at(started.time)}, but was never reported "
                f"queued, while this run reports its other queued messages: its place in the "
                f"FIFO cannot be judged: {received.describe()}; {started.describe()}",
                cite((received, started)),
            ) for received, started in unreported)
        return verdict(
            self.name, violations, reached=contended or bool(violations),
            note="" if contended else "no message arrived while its session was busy",
            stats={"turns": float(turns), "queued": float(queued),
                   "max_queue": float(max_queue)},
        )


def _excuse(behind: list[tuple[str, str, Record, Record, Record]], sid: str, turn: str,
            r: Record, model: RunModel,
            tolerance: float) -> list[tuple[str, str, Record, Record, Record]]:
    """Drop the messages queued behind `turn`'s wait if the turn moved on (`r`) in time:
    within `tolerance` of uptime after the wait (always, under a fault that never healed)."""
    def in_time(since: Record) -> bool:
        due = model.due_in_uptime(since.time, tolerance)
        return due is None or r.time <= due

    return [b for b in behind if not (b[0] == sid and b[1] == turn and in_time(b[4]))]
