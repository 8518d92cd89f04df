"""conservative-recovery: an intent without a known result is held, not re-executed.

A tool intent (`tool.intent`) is in flight until its `tool.result`, except while the call
waits for a person (`tool.awaiting`, `tool.handoff`, `turn.waiting` until `op.answer`,
`tool.rerun` or `turn.resumed`): then nothing is executing. Ownership moves when the session's
thread is assigned a higher epoch than at the intent (`threadlog.assigned`) or when the
intent's invocation starts a replay attempt (`attempt.started` with a non-empty journal).

For an intent in flight when ownership moved:

- every later `effect.attempted` for that tool call uses the call's first idempotency key (a
  different key re-executes the tool without its key);
- before the turn is held (`turn.held`, or `tool.result` with outcome `held`), nobody but the
  intent's own executor starts the effect: an attempt under a key not already attempted
  before the move is a violation when it comes from another executor. Re-sending a request
  already in flight under its key is a safe no-op; so is the original executor finishing what
  it started while another handler took the thread (the fence stops its next write, not its
  request), even as a stale attempt (`data["stale"]`). A provider error does not prove that
  an effect did not happen. Who attempted is read, best first, from the effect's invocation
  (another invocation, or a new attempt of the intent's invocation started after the intent,
  is another executor), else from the intent's host (the record's host, or the owner of the
  intent's epoch from `threadlog.assigned`): crashed since the intent, or paused at that
  moment, means another executor (a crash ends a pause, and a pause of a crashed host stops
  nothing: the restarted host runs, `harness.checkers.model`). Knowing neither, the attempt
  is not judged;
- the turn is held, unless the result becomes known (`tool.result`) or the turn ends by
  cancellation or a steer; judged only once `tolerance` has passed after the move.

A later intent for the same tool call (a confirmed re-run after a hold) starts afresh.

An intent that names its idempotency key (`key`) names the key its effect is attempted
under: recovery reads the key from the intent in the thread log, so an intent that recorded
another one (an email's message id on a charge) would have a recovery re-execute the tool
under a key the provider never saw. Every `effect.attempted` of the call while the intent is
its latest must carry it. A runtime that names keys in its intents names one in every intent
whose effect is attempted under a key: a recovery that reads keys from the log must find the
key of every effect there, not of some (an intent without it, in a run whose other intents
have theirs, would be recovered under a key of its own making).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import Dedup, at, attr, guarded, run_end
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.checkers.model import HOST_KINDS, Assignment, model_of
from harness.history import History, Record, fmt_duration

# The hosts' crashes and pauses, and who owned each epoch, are the run model's
# (harness.checkers.model).
_KINDS = frozenset(
    {"tool.intent", "tool.result", "tool.awaiting", "tool.handoff", "turn.waiting",
     "op.answer", "tool.rerun", "turn.resumed", "turn.held", "turn.ended",
     "threadlog.assigned", "attempt.started", "effect.attempted"}
)
_WAITS = frozenset({"tool.awaiting", "tool.handoff", "turn.waiting"})
_ANSWERS = frozenset({"op.answer", "tool.rerun", "turn.resumed"})
_ACCEPTED_ENDS = frozenset({"cancelled", "steered", "held"})


@dataclass(slots=True)
class _Intent:
    record: Record
    session: str | None
    turn: str | None
    invocation: str | None
    epoch: int | None
    host: str | None
    first_key: str | None = None
    keys_before: frozenset[str] = frozenset()
    move: Record | None = None
    held: Record | None = None
    settled: Record | None = None  # a result or an accepted end after the move
    resolved: bool = False
    wrong_key: bool = False  # an attempt under another key than the recorded one, reported


@final
class ConservativeRecovery:
    name: str = "conservative-recovery"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["conservative-recovery"]
    description: str = (
        "When ownership moves while a tool intent has no known result, the tool is not "
        "executed again without its idempotency key and the turn is held for confirmation."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch). The hosts and the epochs' owners it reads
    # from the run's model (harness.checkers.model), built once over the whole history.
    reads: frozenset[str] = _KINDS | HOST_KINDS | {"run.end"}

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        model = model_of(history)
        dedup = Dedup()
        intents: dict[str, _Intent] = {}
        keys: dict[str, set[str]] = {}
        named = False  # whether any intent of the run names its key
        keyless: list[tuple[Record, Record]] = []  # (intent naming no key, attempt under one)
        epochs: dict[str, int] = {}
        waiting: set[str] = set()
        by_session: dict[str, set[str]] = {}
        by_invocation: dict[str, set[str]] = {}
        by_turn: dict[tuple[str, str], list[str]] = {}
        moved: list[_Intent] = []
        violations: list[Violation] = []
        attempts: dict[str, Record] = {}
        unjudged = 0

        def executor_gone(intent: _Intent, r: Record) -> str | None:
            """Why `r` cannot come from the intent's own executor ("" if it may; None: unknown)."""
            if r.data.get("stale"):
                return ""
            inv = attr(r, "invocation")
            if inv is not None and intent.invocation is not None:
                if inv != intent.invocation:
                    return (f"invocation {inv}, not {intent.invocation} that wrote the "
                            "intent")
                attempt = attempts.get(inv)
                if attempt is not None and attempt.index > intent.record.index:
                    return f"a new attempt of {inv}, started at {at(attempt.time)}"
                return ""
            host = intent.host
            now = r.time
            if host is None:
                return None
            known = model.hosts.get(host)
            if known is None:
                return ""
            crash = known.crash_before(r.index)
            if crash is not None and crash.time >= intent.record.time:
                return f"its host {host} crashed at {at(crash.time)}"
            if known.paused_until(r.index) > now:
                return f"its host {host} was paused"
            return ""

        def move(tcs: set[str] | None, r: Record, newer_than: int | None = None) -> None:
            if not tcs:
                return
            for tc in list(tcs):
                intent = intents[tc]
                if intent.resolved or intent.move is not None or tc in waiting:
                    continue
                if newer_than is not None and (intent.epoch is None
                                               or intent.epoch >= newer_than):
                    continue
                intent.move = r
                intent.keys_before = frozenset(keys.get(tc, ()))
                moved.append(intent)

        def turn_intents(session: str | None, turn: str | None) -> list[_Intent]:
            if session is None or turn is None:
                return []
            return [intents[tc] for tc in by_turn.get((session, turn), ())]

        for r in history.records:
            kind = r.kind
            if kind not in _KINDS or not dedup.fresh(r):
                continue
            tc = attr(r, "tool_call")
            session = attr(r, "session")
            if kind == "tool.intent":
                if tc is None:
                    continue
                earlier = intents.get(tc)
                if earlier is not None and not earlier.resolved:
                    continue
                epoch = attr(r, "epoch")
                epoch = int(epoch) if epoch is not None else (
                    epochs.get(session) if session is not None else None)
                inv = attr(r, "invocation")
                turn = attr(r, "turn")
                host = r.host or (_owner(model.epochs.get(session, ()), epoch, r.index)
                                  if session is not None and epoch is not None else None)
                intents[tc] = _Intent(r, session, turn, inv, epoch, host)
                named = named or attr(r, "key") is not None
                if session is not None:
                    # Only unresolved intents stay here, so a move looks at few of them.
                    by_session.setdefault(session, set()).add(tc)
                    if turn is not None:
                        calls = by_turn.setdefault((session, turn), [])
                        if tc not in calls:
                            calls.append(tc)
                if inv is not None:
                    by_invocation.setdefault(inv, set()).add(tc)
            elif kind == "effect.attempted":
                key = attr(r, "key")
                if tc is None or key is None:
                    continue
                keys.setdefault(tc, set()).add(key)
                intent = intents.get(tc)
                if intent is None:
                    continue
                recorded = attr(intent.record, "key")
                if recorded is None and not intent.wrong_key:
                    intent.wrong_key = True
                    keyless.append((intent.record, r))
                if recorded is not None and key != recorded and not intent.wrong_key:
                    intent.wrong_key = True
                    violations.append(Violation(
                        f"tool call {tc} was attempted under idempotency key {key}, not the "
                        f"key its intent recorded ({recorded}): a recovery that reads the "
                        f"intent would run it again under a key the provider never saw: "
                        f"{intent.record.describe()}; {r.describe()}",
                        cite((intent.record, r)),
                    ))
                if intent.first_key is None:
                    intent.first_key = key
                if intent.move is None:
                    continue
                if key != intent.first_key:
                    violations.append(Violation(
                        f"tool call {tc} was executed again with a new idempotency key {key} "
                        f"(its key was {intent.first_key}) after ownership moved at "
                        f"{at(intent.move.time)} with its intent unresolved: "
                        f"{intent.record.describe()}; {intent.move.describe()}; {r.describe()}",
                        cite((intent.record, intent.move, r)),
                    ))
                elif intent.held is None and key not in intent.keys_before:
                    why = executor_gone(intent, r)
                    if why is None:
                        unjudged += 1
                    elif why:
                        violations.append(Violation(
                            f"tool call {tc} was executed at {at(r.time)} by another executor "
                            f"({why}) after ownership moved at {at(intent.move.time)} with its "
                            f"intent unresolved, before the turn was held for confirmation: "
                            f"{intent.record.describe()}; {intent.move.describe()}; "
                            f"{r.describe()}",
                            cite((intent.record, intent.move, r)),
                        ))
            elif kind == "threadlog.assigned":
                epoch = attr(r, "epoch")
                if session is None or epoch is None:
                    continue
                epoch = int(epoch)
                previous = epochs.get(session)
                if previous is None or epoch > previous:
                    epochs[session] = epoch
                    move(by_session.get(session), r, newer_than=epoch)
            elif kind == "attempt.started":
                if r.invocation is not None:
                    attempts[r.invocation] = r
                    if r.data.get("replay"):
                        move(by_invocation.get(r.invocation), r)
            elif kind in _WAITS:
                if tc is not None:
                    waiting.add(tc)
            elif kind in _ANSWERS:
                if tc is not None:
                    waiting.discard(tc)
            elif kind == "tool.result":
                intent = intents.get(tc) if tc is not None else None
                if intent is None:
                    continue
                if r.data.get("outcome") == "held":
                    intent.held = intent.held or r
                elif intent.move is not None:
                    intent.settled = intent.settled or r
                intent.resolved = True
                if intent.session is not None:
                    by_session.get(intent.session, set()).discard(tc)
                if intent.invocation is not None:
                    by_invocation.get(intent.invocation, set()).discard(tc)
            elif kind == "turn.held":
                targets = ([intents[tc]] if tc is not None and tc in intents
                           else turn_intents(session, attr(r, "turn")))
                for intent in targets:
                    if intent.move is not None and intent.held is None:
                        intent.held = r
            elif kind == "turn.ended" and r.data.get("reason") in _ACCEPTED_ENDS:
                for intent in turn_intents(session, attr(r, "turn")):
                    if intent.move is not None and intent.settled is None:
                        intent.settled = r

        end_time = run_end(history)
        held = 0
        for intent in moved:
            if intent.held is not None:
                held += 1
                continue
            assert intent.move is not None
            if intent.settled is not None or end_time - intent.move.time <= config.tolerance:
                continue
            tc = attr(intent.record, "tool_call")
            violations.append(Violation(
                f"turn {intent.turn} was not held: tool call {tc} had an intent with no "
                f"known result when ownership moved at {at(intent.move.time)}, and "
                f"{fmt_duration(end_time - intent.move.time)} later the run ended without a "
                f"hold: {intent.record.describe()}; {intent.move.describe()}",
                cite((intent.record, intent.move)),
            ))
        if named:
            violations.extend(Violation(
                f"tool call {attr(intent, 'tool_call')} was attempted under idempotency key "
                f"{attr(attempt, 'key')}, but its intent names no key while this run's other "
                f"intents name theirs: a recovery that reads keys from the log would not find "
                f"this one: {intent.describe()}; {attempt.describe()}",
                cite((intent, attempt)),
            ) for intent, attempt in keyless)
        # An attempt under another key than its intent recorded is judged without a move.
        return verdict(
            self.name, violations, reached=bool(moved),
            note="" if moved or violations else
            "ownership never moved while a tool intent was in flight",
            stats={"intents": float(len(intents)), "recoveries": float(len(moved)),
                   "held": float(held), "unjudged_attempts": float(unjudged)},
        )


def _owner(assignments: tuple[Assignment, ...], epoch: int, before: int) -> str | None:
    """Who was first assigned `epoch` of a session's thread, before record `before`."""
    for a in assignments:
        if a.record.index >= before:
            break
        if a.epoch == epoch and a.owner is not None:
            return a.owner
    return None
