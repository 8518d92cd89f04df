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

from typing import final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import at, guarded
from harness.checkers.base import (
    CheckConfig,
    Result,
    Violation,
    cite,
    tolerance_note,
    verdict,
)
from harness.checkers.model import STATES, model_of
from harness.history import History, fmt_duration


@final
class Liveness:
    name: str = "liveness"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["liveness"]
    description: str = (
        "Once faults heal, every session becomes idle and no invocation stays queued, "
        "running or paused beyond the liveness bound: nothing is held forever."
    )

    # It reads the run's model (harness.checkers.model), built once over the whole history
    # for every checker that reads it: no `reads`, so run_checkers gives it the history.

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        model = model_of(history)
        # A real engine's measured latency (see base.measured) is allowed on top.
        bound = config.liveness_bound + config.latency
        end_time = model.end
        if model.faults.unhealed:
            return Result(self.name, True, reached=False,
                          note="a fault never healed, so liveness was not judged")
        heal = model.healed_at
        deadline = heal + bound
        after = f"after the faults healed at {at(heal)}" if model.had_faults else \
            "from the start"
        limit = f"more than {fmt_duration(bound)} {after}{tolerance_note(config)}"
        violations: list[Violation] = []

        def too_long(start: float, stop: float) -> bool:
            due = model.due(start, bound)
            return due is not None and stop > due

        busy = sorted(((b, s) for s in model.sessions.values() for b in s.busy
                       if b.until is not None), key=lambda pair: pair[0].seq)
        for stretch, session in busy:
            since, until = stretch.since, stretch.until
            assert until is not None
            if too_long(since.time, until.time):
                violations.append(Violation(
                    f"session {session.id} stayed busy from {at(since.time)} to "
                    f"{at(until.time)}, {limit}: {since.describe()}; {until.describe()}",
                    cite((since, until)),
                ))
        for session in model.sessions.values():
            still = session.busy[-1] if session.busy and session.busy[-1].until is None \
                else None
            if still is None or not too_long(still.since.time, end_time):
                continue
            held = [f"turn {tid} in progress since {at(started.time)}"
                    for tid, started in session.busy_turns]
            held += [f"message {m} queued since {at(rec.time)} without its turn"
                     for m, rec in session.queued]
            evidence = [still.since, *(started for _, started in session.busy_turns),
                        *(rec for _, rec in session.queued)]
            violations.append(Violation(
                f"session {session.id} was still busy when the run ended at {at(end_time)}, "
                f"{limit}: {'; '.join(held)}: {still.since.describe()}",
                cite(evidence),
            ))

        ended = sorted(((a, inv) for inv in model.invocations for a in inv.active
                        if a.until is not None), key=lambda pair: pair[0].seq)
        for active, inv in ended:
            since, until = active.since, active.until
            assert until is not None
            if too_long(since.time, until.time):
                # Queued, then started on a host: the witness says both, not only how the
                # span began.
                first = STATES.get(since.kind, "active")
                last = active.state
                stayed = first if last in (first, "suspended") else f"{first}, then {last},"
                violations.append(Violation(
                    f"invocation {inv.name} stayed {stayed}"
                    f" from {at(since.time)} to {at(until.time)} without completing or "
                    f"suspending, {limit}: {since.describe()}; {until.describe()}",
                    cite((since, until)),
                ))
        for inv in model.invocations:
            still_active = inv.active[-1] if inv.active and inv.active[-1].until is None \
                else None
            if inv.completed or still_active is None or \
                    not too_long(still_active.since.time, end_time):
                continue
            since = still_active.since
            if inv.state == "queued" and inv.target is not None and inv.key is not None:
                state = (f"queued since {at(since.time)} behind {inv.holder}, which holds "
                         f"key {inv.key}" if inv.holder else f"queued since {at(since.time)}")
            elif inv.state == "paused":
                state = f"paused ({inv.reason or 'no reason given'})"
            else:
                state = f"{inv.state} since {at(since.time)}"
            violations.append(Violation(
                f"invocation {inv.name} never completed: {state}; the run ended at "
                f"{at(end_time)}, {limit}: {since.describe()}",
                cite((since,)),
            ))
        reached = end_time >= deadline or bool(violations)
        return verdict(
            self.name, violations, reached=reached,
            note="" if reached else (
                f"the run ended at {at(end_time)}, before the liveness bound ran out at "
                f"{at(deadline)}"),
            stats={"healed_at": heal, "sessions": float(len(model.sessions))},
        )
