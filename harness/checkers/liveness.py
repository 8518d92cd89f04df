"""liveness: once the faults heal, everything settles within a bound.

The faults end at the last `fault.heal` (its `at`), or else when the last fault did (a timed
pause running out, a host resuming or restarting, the last fault record). From then on:

- every session becomes idle within `liveness_bound`: a session is busy while a turn is in
  progress and not waiting on a person as state, or while a queued message has not started
  its turn;
- every invocation completes within `liveness_bound` (an invocation held forever holds its
  virtual object's key forever).

A stretch of busyness or of an unfinished invocation is measured from the later of its start
and the heal; one that lasts longer than the bound is a violation, including one still open
when the run ended (a run that ended before the bound ran out is not judged). When a fault
never healed, nothing is judged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import final

from harness.checkers._common import FAULT_KINDS, Dedup, Faults, at, attr, guarded, run_end
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.history import History, Record, fmt_duration

_SESSION_KINDS = frozenset(
    {"turn.started", "turn.waiting", "turn.resumed", "turn.ended", "message.queued"}
)
_INVOCATION_KINDS = frozenset(
    {"invocation.created", "invocation.started", "invocation.suspended", "invocation.resumed",
     "invocation.repinned", "invocation.paused", "invocation.completed"}
)
_STATES = {"invocation.started": "running", "invocation.resumed": "running",
           "invocation.repinned": "running", "invocation.suspended": "suspended",
           "invocation.paused": "paused"}


@dataclass(slots=True)
class _Session:
    # turn id -> (turn.started record, waiting as state?)
    turns: dict[str, tuple[Record, bool]] = field(default_factory=dict)
    queued: dict[str, Record] = field(default_factory=dict)
    running: int = 0
    since: Record | None = None


@dataclass(slots=True)
class _Invocation:
    first: Record
    target: str | None
    key: str | None
    state: str = "queued"
    state_since: float = 0.0
    reason: str | None = None


@final
class Liveness:
    name: str = "liveness"
    description: str = (
        "Once faults heal, every session becomes idle and every invocation completes within "
        "the liveness bound: nothing is held forever."
    )

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        bound = config.liveness_bound
        dedup = Dedup()
        faults = Faults()
        sessions: dict[str, _Session] = {}
        invocations: dict[str, _Invocation] = {}
        holders: dict[tuple[str, str], str] = {}
        # Finished stretches long enough to matter whatever the heal time turns out to be.
        busy_spans: list[tuple[str, Record, Record]] = []
        inv_spans: list[tuple[str, Record, Record]] = []
        last_fault: float | None = None
        records = history.records
        first_time = records[0].time if records else 0.0

        def update(sid: str, s: _Session, r: Record) -> None:
            busy = s.running > 0 or bool(s.queued)
            if busy and s.since is None:
                s.since = r
            elif not busy and s.since is not None:
                if r.time - s.since.time > bound:
                    busy_spans.append((sid, s.since, r))
                s.since = None

        for r in records:
            kind = r.kind
            if kind in _SESSION_KINDS:
                if not dedup.fresh(r):
                    continue
                sid = attr(r, "session")
                if sid is None:
                    continue
                s = sessions.get(sid)
                if s is None:
                    s = sessions[sid] = _Session()
                turn = attr(r, "turn")
                if kind == "turn.started":
                    message = r.data.get("message")
                    if message is not None:
                        s.queued.pop(message, None)
                    if turn is not None and turn not in s.turns:
                        s.turns[turn] = (r, False)
                        s.running += 1
                elif kind == "message.queued":
                    message = r.data.get("message")
                    if message is not None:
                        s.queued.setdefault(message, r)
                elif turn is not None and turn in s.turns:
                    started, waiting = s.turns[turn]
                    if kind == "turn.ended":
                        del s.turns[turn]
                        s.running -= 0 if waiting else 1
                    elif kind == "turn.waiting" and not waiting:
                        s.turns[turn] = (started, True)
                        s.running -= 1
                    elif kind == "turn.resumed" and waiting:
                        s.turns[turn] = (started, False)
                        s.running += 1
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
                target = r.data.get("target")
                key = r.data.get("key")
                inv = invocations[r.invocation] = _Invocation(
                    r, None if target is None else str(target),
                    None if key is None else str(key), state_since=r.time)
            if kind == "invocation.completed":
                if r.time - inv.first.time > bound:
                    inv_spans.append((r.invocation, inv.first, r))
                if inv.target is not None and inv.key is not None:
                    slot = (inv.target.split("/", 1)[0], inv.key)
                    if holders.get(slot) == r.invocation:
                        del holders[slot]
                del invocations[r.invocation]
                continue
            state = _STATES.get(kind)
            if state is not None and state != inv.state:
                inv.state, inv.state_since = state, r.time
                inv.reason = r.data.get("reason")
            if kind == "invocation.started" and inv.target is not None and inv.key is not None:
                holders[(inv.target.split("/", 1)[0], inv.key)] = r.invocation

        end_time = run_end(history)
        if faults.unhealed:
            return Result(self.name, True, reached=False,
                          note="a fault never healed, so liveness was not judged")
        heal = max(x for x in (faults.last_end, last_fault, first_time, 0.0) if x is not None)
        deadline = heal + bound
        after = f"after the faults healed at {at(heal)}" if (
            faults.last_end is not None or last_fault is not None) else "from the start"
        violations: list[Violation] = []

        def too_long(start: float, stop: float) -> bool:
            return stop - max(start, heal) > bound

        for sid, since, until in busy_spans:
            if too_long(since.time, until.time):
                violations.append(Violation(
                    f"session {sid} stayed busy from {at(since.time)} to {at(until.time)}, "
                    f"more than {fmt_duration(bound)} {after}: {since.describe()}; "
                    f"{until.describe()}",
                    cite((since, until)),
                ))
        for sid, s in sessions.items():
            if s.since is None or not too_long(s.since.time, end_time):
                continue
            held = [f"turn {turn} in progress since {at(rec.time)}"
                    for turn, (rec, waiting) in s.turns.items() if not waiting]
            held += [f"message {m} queued since {at(rec.time)} without its turn"
                     for m, rec in s.queued.items()]
            evidence = [s.since] + [rec for rec, waiting in s.turns.values() if not waiting]
            evidence += list(s.queued.values())
            violations.append(Violation(
                f"session {sid} was still busy when the run ended at {at(end_time)}, more "
                f"than {fmt_duration(bound)} {after}: {'; '.join(held)}: "
                f"{s.since.describe()}",
                cite(evidence),
            ))
        for inv_id, start, done in inv_spans:
            if too_long(start.time, done.time):
                violations.append(Violation(
                    f"invocation {inv_id} {done.data.get('target', '')} took from "
                    f"{at(start.time)} to {at(done.time)} to complete, more than "
                    f"{fmt_duration(bound)} {after}: {start.describe()}; {done.describe()}",
                    cite((start, done)),
                ))
        for inv_id, inv in invocations.items():
            if not too_long(inv.first.time, end_time):
                continue
            name = f"{inv_id} {inv.target}" if inv.target else inv_id
            if inv.state == "queued" and inv.target is not None and inv.key is not None:
                holder = holders.get((inv.target.split("/", 1)[0], inv.key))
                state = (f"queued since {at(inv.state_since)} behind {holder}, which holds "
                         f"key {inv.key}" if holder else f"queued since {at(inv.state_since)}")
            elif inv.state == "paused":
                state = f"paused since {at(inv.state_since)} ({inv.reason or 'no reason'})"
            else:
                state = f"{inv.state} since {at(inv.state_since)}"
            violations.append(Violation(
                f"invocation {name} never completed: {state}, created at "
                f"{at(inv.first.time)}; the run ended at {at(end_time)}, more than "
                f"{fmt_duration(bound)} {after}: {inv.first.describe()}",
                cite((inv.first,)),
            ))
        reached = end_time >= deadline or bool(violations)
        return verdict(
            self.name, violations, reached=reached,
            note="" if reached else (
                f"the run ended at {at(end_time)}, before the liveness bound ran out at "
                f"{at(deadline)}"),
            stats={"healed_at": heal, "sessions": float(len(sessions))},
        )
