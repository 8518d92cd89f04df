"""liveness: once the faults heal, nothing stays busy or held for longer than a bound.

The faults end at the last `fault.heal` (its `at`), or else when the last fault did (a timed
pause running out, a host resuming or restarting, the last fault record). From then on:

- every session becomes idle within `liveness_bound`. A session is busy while a turn is in
  progress and not waiting on a person, or while a queued message (`message.queued`) has not
  started its turn although no turn is in progress. A turn waits on a person as state
  (`turn.waiting` until `turn.resumed`) or in-call, with its card open (`tool.awaiting` until
  the answer `op.answer`, the hand-off, a result or a resume). Waiting on a person is not a
  liveness failure, and neither is what queues behind such a wait (a background result waits
  its turn in the FIFO for as long as the person takes); how long a wait may pin a deployment
  is pinning-bound's business;
- no invocation stays queued on its virtual object's key, running or paused (after
  `max attempts` or a journal mismatch) for longer than `liveness_bound`: such an invocation
  holds its key, and everything behind it, forever. A suspended invocation waits on something
  and holds nothing but its deployment; if what it waits on never comes, its session stays
  busy or the invocations queued behind its key are caught here.

A stretch is measured from the later of its start and the heal; one that lasts longer than
the bound is a violation, including one still open when the run ended (a run that ended before
the bound ran out is not judged). When a fault never healed, nothing is judged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import FAULT_KINDS, Dedup, Faults, at, attr, guarded, run_end
from harness.checkers.base import (
    CheckConfig,
    Result,
    Violation,
    cite,
    tolerance_note,
    verdict,
)
from harness.history import History, Record, fmt_duration

_SESSION_KINDS = frozenset(
    {"turn.started", "turn.waiting", "turn.resumed", "turn.ended", "message.queued",
     "tool.awaiting"}
)
# What closes an open card: the turn is no longer waiting on a person in-call.
_CARD_CLOSERS = frozenset(
    {"op.answer", "tool.handoff", "tool.result", "turn.resumed", "tool.background"}
)
_INVOCATION_KINDS = frozenset(
    {"invocation.created", "invocation.started", "invocation.suspended", "invocation.resumed",
     "invocation.repinned", "invocation.paused", "invocation.completed"}
)
_STATES = {"invocation.created": "queued", "invocation.started": "running",
           "invocation.resumed": "running", "invocation.repinned": "running",
           "invocation.suspended": "suspended", "invocation.paused": "paused"}


@dataclass(slots=True)
class _Turn:
    started: Record
    waiting: bool = False  # as state, after turn.waiting
    cards: set[str] = field(default_factory=set)  # open cards: waiting in-call

    @property
    def busy(self) -> bool:
        return not self.waiting and not self.cards


@dataclass(slots=True)
class _Session:
    turns: dict[str, _Turn] = field(default_factory=dict)
    queued: dict[str, Record] = field(default_factory=dict)
    since: Record | None = None


@dataclass(slots=True)
class _Invocation:
    first: Record
    target: str | None
    key: str | None
    state: str = "queued"
    since: Record | None = None  # start of the current active stretch
    reason: str | None = None


@final
class Liveness:
    name: str = "liveness"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["liveness"]
    description: str = (
        "Once faults heal, every session becomes idle and no invocation stays queued, "
        "running or paused beyond the liveness bound: nothing is held forever."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch).
    reads: frozenset[str] = (_SESSION_KINDS | _CARD_CLOSERS | _INVOCATION_KINDS | FAULT_KINDS
                               | {"fault.*", "run.end"})

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        # A real engine's measured latency (see base.measured) is allowed on top.
        bound = config.liveness_bound + config.latency
        dedup = Dedup()
        faults = Faults()
        sessions: dict[str, _Session] = {}
        card_turn: dict[str, tuple[str, str]] = {}
        invocations: dict[str, _Invocation] = {}
        holders: dict[tuple[str, str], str] = {}
        # Closed stretches long enough to matter whatever the heal time turns out to be.
        busy_spans: list[tuple[str, Record, Record]] = []
        # (invocation, its record, span start, span end, its state when the span ended)
        inv_spans: list[tuple[str, _Invocation, Record, Record, str]] = []
        last_fault: float | None = None
        records = history.records
        first_time = records[0].time if records else 0.0

        def update(sid: str, s: _Session, r: Record) -> None:
            busy = (any(t.busy for t in s.turns.values()) if s.turns
                    else bool(s.queued))
            if busy and s.since is None:
                s.since = r
            elif not busy and s.since is not None:
                if r.time - s.since.time > bound:
                    busy_spans.append((sid, s.since, r))
                s.since = None

        def close_card(tc: str | None, r: Record) -> None:
            where = card_turn.pop(tc, None) if tc is not None else None
            if where is None:
                return
            sid, turn_id = where
            s = sessions[sid]
            turn = s.turns.get(turn_id)
            if turn is not None and tc in turn.cards:
                turn.cards.discard(tc)
                update(sid, s, r)

        for r in records:
            kind = r.kind
            if kind in _SESSION_KINDS or kind in _CARD_CLOSERS:
                if not dedup.fresh(r):
                    continue
                if kind in _CARD_CLOSERS:
                    close_card(attr(r, "tool_call"), r)
                    if kind != "turn.resumed":
                        continue
                sid = attr(r, "session")
                if sid is None:
                    continue
                s = sessions.get(sid)
                if s is None:
                    s = sessions[sid] = _Session()
                turn_id = attr(r, "turn")
                turn = s.turns.get(turn_id) if turn_id is not None else None
                if kind == "turn.started":
                    message = r.data.get("message")
                    if message is not None:
                        s.queued.pop(message, None)
                    if turn_id is not None and turn is None:
                        s.turns[turn_id] = _Turn(r)
                elif kind == "message.queued":
                    message = r.data.get("message")
                    if message is not None:
                        s.queued.setdefault(message, r)
                elif turn is not None:
                    if kind == "turn.ended":
                        del s.turns[turn_id]
                        for tc in turn.cards:
                            card_turn.pop(tc, None)
                    elif kind == "turn.waiting":
                        turn.waiting = True
                    elif kind == "turn.resumed":
                        turn.waiting = False
                    elif kind == "tool.awaiting":
                        tc = attr(r, "tool_call")
                        if tc is not None:
                            turn.cards.add(tc)
                            card_turn[tc] = (sid, turn_id)
                update(sid, s, r)
                continue
            if kind not in _INVOCATION_KINDS:
                if kind in FAULT_KINDS:
                    faults.feed(r)
                if kind.startswith("fault.") and kind != "fault.heal":
                    ends = r.time + float(r.data.get("duration") or 0.0)
                    last_fault = ends if last_fault is None else max(last_fault, ends)
                continue
            if r.invocation is None:
                continue
            inv = invocations.get(r.invocation)
            if inv is None:
                target, key = r.data.get("target"), r.data.get("key")
                inv = invocations[r.invocation] = _Invocation(
                    r, None if target is None else str(target),
                    None if key is None else str(key), since=r)
            if kind == "invocation.completed":
                if inv.since is not None and r.time - inv.since.time > bound:
                    inv_spans.append((r.invocation, inv, inv.since, r, inv.state))
                if inv.target is not None and inv.key is not None:
                    slot = (inv.target.split("/", 1)[0], inv.key)
                    if holders.get(slot) == r.invocation:
                        del holders[slot]
                del invocations[r.invocation]
                continue
            state = _STATES.get(kind, inv.state)
            if state == "suspended":
                if inv.since is not None and r.time - inv.since.time > bound:
                    inv_spans.append((r.invocation, inv, inv.since, r, inv.state))
                inv.since = None
            elif inv.since is None:
                inv.since = r
            if state != inv.state:
                inv.state, inv.reason = state, r.data.get("reason")
            if kind == "invocation.started" and inv.target is not None and inv.key is not None:
                holders[(inv.target.split("/", 1)[0], inv.key)] = r.invocation

        end_time = run_end(history)
        if faults.unhealed:
            return Result(self.name, True, reached=False,
                          note="a fault never healed, so liveness was not judged")
        heal = max(x for x in (faults.last_end, last_fault, first_time) if x is not None)
        deadline = heal + bound
        after = f"after the faults healed at {at(heal)}" if (
            faults.last_end is not None or last_fault is not None) else "from the start"
        limit = f"more than {fmt_duration(bound)} {after}{tolerance_note(config)}"
        violations: list[Violation] = []

        def too_long(start: float, stop: float) -> bool:
            return stop - max(start, heal) > bound

        for sid, since, until in busy_spans:
            if too_long(since.time, until.time):
                violations.append(Violation(
                    f"session {sid} stayed busy from {at(since.time)} to {at(until.time)}, "
                    f"{limit}: {since.describe()}; {until.describe()}",
                    cite((since, until)),
                ))
        for sid, s in sessions.items():
            if s.since is None or not too_long(s.since.time, end_time):
                continue
            busy_turns = [(tid, t) for tid, t in s.turns.items() if t.busy]
            queued = list(s.queued.items())
            held = [f"turn {tid} in progress since {at(t.started.time)}"
                    for tid, t in busy_turns]
            held += [f"message {m} queued since {at(rec.time)} without its turn"
                     for m, rec in queued]
            evidence = [s.since, *(t.started for _, t in busy_turns),
                        *(rec for _, rec in queued)]
            violations.append(Violation(
                f"session {sid} was still busy when the run ended at {at(end_time)}, "
                f"{limit}: {'; '.join(held)}: {s.since.describe()}",
                cite(evidence),
            ))

        def name(inv_id: str, inv: _Invocation) -> str:
            return f"{inv_id} {inv.target}" if inv.target else inv_id

        for inv_id, inv, since, until, last in inv_spans:
            if too_long(since.time, until.time):
                # Queued, then started on a host: the witness says both, not only how the
                # span began.
                first = _STATES.get(since.kind, "active")
                stayed = first if last in (first, "suspended") else f"{first}, then {last},"
                violations.append(Violation(
                    f"invocation {name(inv_id, inv)} stayed {stayed}"
                    f" from {at(since.time)} to {at(until.time)} without completing or "
                    f"suspending, {limit}: {since.describe()}; {until.describe()}",
                    cite((since, until)),
                ))
        for inv_id, inv in invocations.items():
            if inv.since is None or not too_long(inv.since.time, end_time):
                continue
            if inv.state == "queued" and inv.target is not None and inv.key is not None:
                holder = holders.get((inv.target.split("/", 1)[0], inv.key))
                state = (f"queued since {at(inv.since.time)} behind {holder}, which holds "
                         f"key {inv.key}" if holder else f"queued since {at(inv.since.time)}")
            elif inv.state == "paused":
                state = f"paused ({inv.reason or 'no reason given'})"
            else:
                state = f"{inv.state} since {at(inv.since.time)}"
            violations.append(Violation(
                f"invocation {name(inv_id, inv)} never completed: {state}; the run ended at "
                f"{at(end_time)}, {limit}: {inv.since.describe()}",
                cite((inv.since,)),
            ))
        reached = end_time >= deadline or bool(violations)
        return verdict(
            self.name, violations, reached=reached,
            note="" if reached else (
                f"the run ended at {at(end_time)}, before the liveness bound ran out at "
                f"{at(deadline)}"),
            stats={"healed_at": heal, "sessions": float(len(sessions))},
        )
