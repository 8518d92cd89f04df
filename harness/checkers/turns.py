"""turn-outcome: every turn that waited on a person ends its wait exactly once.

A wait starts at `turn.waiting` (the hand-off: the turn waits as state). It has three exits:

- answered: the same turnId resumes (`turn.resumed` with the same tool call; the outcome says
  how: answered, denied, rejected_access, background, expired, ...);
- expired: the tool result is `expired`, no earlier than `max_wait` after the wait started
  and, unless faults held things up, no later than `max_wait + tolerance` (the tolerance at
  that bound, `CheckConfig.slack("max_wait")`, as everywhere below);
- ended by a new message: the turn ends (`turn.ended`) while it waits, like a steer.

A doubled resume (two distinct `turn.resumed` for one wait, or a resume after the turn
already ended) and a lost one (still waiting at the end of the run, past
`max_wait + tolerance`) are violations.

Every tool call has at most one final outcome (answered, denied, rejected, expired, ended by a
new message, cancelled, completed; a placeholder for the background and a hold are not final):
two `tool.result`s with different final outcomes for one tool call, or two such results in
the committed thread log, are a violation even when the controller ignores the second one
(the transcript then holds two results and the model sees both). And every card is judged
from the moment it was shown, whether the runtime waited in-call or as state: an answer
applied (a result answered, denied or rejected) more than `max_wait + tolerance` after its
card was shown is a violation. Faults do not excuse it: a deadline that passed while a
worker was down has passed, and the person was told the request expired.

When the wait started is read generously: the expiry may not come before `max_wait` after
the card was shown (`tool.awaiting`), and must come by `max_wait` after the hand-off, so both
readings of "8 days" (from the card, or from the hand-off) pass. A call that expires without
ever waiting as state (no `turn.waiting`: it waited in the call, or never handed off) may not
expire before `max_wait` after its card either (unless it went to the background, whose wait
counts from just before its card). A hold (`turn.held`, or
`tool.result` with outcome `held`) shows a new card asking to confirm: the wait starts again.

Attribution: every result of a tool call that waited on a person, as reported
(`tool.result`) and as filed in the thread log (`threadlog.appended` of a result entry, with
the turn and tool call the entry is filed under), belongs to the call's own turn and session,
those its card was shown for (`tool.awaiting`, else its hand-off). A result filed under
another turn makes the transcript tell the model that a later turn's call ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import FAULT_KINDS, Dedup, at, attr, guarded, merge, overlap
from harness.checkers.base import CheckConfig, Result, Violation, cite, limit_at, verdict
from harness.checkers.model import model_of
from harness.history import History, Record, fmt_duration

_KINDS = frozenset(
    {"turn.waiting", "turn.resumed", "turn.ended", "tool.awaiting", "tool.handoff",
     "tool.result", "turn.held"}
)
_LOG_KINDS = frozenset({"threadlog.appended", "threadlog.committed"})
_WANTED = _KINDS | _LOG_KINDS
_EPSILON = 1e-6
# Outcomes that do not end a tool call: the turn goes on with a placeholder (the real result
# still comes), or the person is asked to confirm (a new card, a new wait).
_NOT_FINAL = frozenset({"background", "held"})
# Outcomes that mean a person's answer was applied.
_ANSWERED = frozenset({"answered", "denied", "rejected_access"})
_RESULT_ENTRY = "result:"


@dataclass(slots=True)
class _Wait:
    record: Record
    resumes: list[Record] = field(default_factory=list)


@final
class TurnOutcome:
    name: str = "turn-outcome"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["turn-outcome"]
    description: str = (
        "Every turn that waits on a person ends its wait exactly once: answered (the same "
        "turn resumes), expired after the maximum wait, or ended by a new message; every "
        "tool call has one final result, and no answer is applied after the maximum wait."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch). The faults it reads from the run's model
    # (harness.checkers.model), built once over the whole history.
    reads: frozenset[str] = _WANTED | FAULT_KINDS | {"run.end"}

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        waits: dict[tuple[str, str], _Wait] = {}
        latest_wait: dict[str, str] = {}
        # tool call -> (time, "card" | "hold" | "handoff"), in order: a card or a hold starts
        # a wait.
        marks: dict[str, list[tuple[float, str]]] = {}
        backgrounded: set[str] = set()  # calls sent to the background (a placeholder result)
        ended: dict[str, list[Record]] = {}
        expiries: dict[str, Record] = {}
        early_resumes: dict[tuple[str, str], list[Record]] = {}
        # tool call -> final outcome -> its first `tool.result`, in order of arrival.
        finals: dict[str, dict[str, Record]] = {}
        # tool call -> final outcome -> the thread-log entry holding it (appended / committed).
        appended: dict[str, dict[str, Record]] = {}
        committed: dict[str, dict[str, Record]] = {}
        committed_ids = False
        # tool call -> the record its card was shown by, and every result filed for it.
        origins: dict[str, Record] = {}
        filed: dict[str, list[Record]] = {}
        dedup = Dedup()
        for r in history.records:
            kind = r.kind
            if kind not in _WANTED or not dedup.fresh(r):
                continue
            if kind in _LOG_KINDS:
                entry = r.data.get("entry")
                if kind == "threadlog.committed" and entry is not None:
                    committed_ids = True
                parsed = _result_entry(entry)
                if parsed is not None and kind == "threadlog.appended":
                    filed.setdefault(parsed[0], []).append(r)
                if parsed is not None and parsed[1] not in _NOT_FINAL:
                    into = committed if kind == "threadlog.committed" else appended
                    into.setdefault(parsed[0], {}).setdefault(parsed[1], r)
                continue
            turn = attr(r, "turn")
            tc = attr(r, "tool_call")
            if tc is not None and kind in ("tool.awaiting", "tool.handoff", "turn.waiting"):
                origins.setdefault(tc, r)
            if kind in ("tool.awaiting", "turn.held"):
                if tc is not None:
                    marks.setdefault(tc, []).append(
                        (r.time, "card" if kind == "tool.awaiting" else "hold"))
            elif kind == "tool.handoff":
                if tc is not None:
                    marks.setdefault(tc, []).append((r.time, "handoff"))
            elif kind == "turn.waiting":
                if turn is None or tc is None or (turn, tc) in waits:
                    continue
                wait = waits[(turn, tc)] = _Wait(r)
                wait.resumes.extend(early_resumes.pop((turn, tc), ()))
                latest_wait[turn] = tc
            elif kind == "turn.resumed":
                if turn is None:
                    continue
                if tc is None:
                    tc = latest_wait.get(turn)
                    if tc is None:
                        continue
                wait_or_none = waits.get((turn, tc))
                if wait_or_none is None:
                    # The answer may be observed before the hand-off that it ends.
                    early_resumes.setdefault((turn, tc), []).append(r)
                else:
                    wait_or_none.resumes.append(r)
                if r.data.get("outcome") == "expired":
                    expiries.setdefault(tc, r)
            elif kind == "turn.ended":
                if turn is not None:
                    ended.setdefault(turn, []).append(r)
            elif kind == "tool.result" and tc is not None:
                filed.setdefault(tc, []).append(r)
                outcome = r.data.get("outcome")
                if outcome is not None and str(outcome) not in _NOT_FINAL:
                    finals.setdefault(tc, {}).setdefault(str(outcome), r)
                if outcome == "background":
                    backgrounded.add(tc)
                if outcome == "held":
                    marks.setdefault(tc, []).append((r.time, "hold"))
                elif outcome == "expired":
                    first = expiries.get(tc)
                    if first is None or r.time < first.time:
                        expiries[tc] = r

        model = model_of(history)
        end_time = model.end
        fault_windows = merge([*model.faults.downtime, *model.faults.provider])
        max_wait, tolerance = config.max_wait, config.slack("max_wait")
        limit = limit_at(config, "max_wait")
        violations: list[Violation] = []
        counts = {"answered": 0, "expired": 0, "ended": 0, "open": 0, "doubled": 0}

        for (turn, tc), wait in waits.items():
            w = wait.record
            tc_marks = marks.get(tc, [])
            latest_start = max([w.time] + [t for t, _ in tc_marks])
            end_rec = next((e for e in ended.get(turn, ()) if e.index > w.index), None)
            resumes = wait.resumes
            if len(resumes) > 1:
                counts["doubled"] += 1
                listed = "; ".join(
                    f"{x.describe()} (outcome {x.data.get('outcome')})" for x in resumes)
                violations.append(Violation(
                    f"turn {turn} resumed {len(resumes)} times for tool call {tc} it waited on "
                    f"since {at(w.time)}: {listed}",
                    cite([w, *resumes]),
                ))
            elif resumes and end_rec is not None and end_rec.index < resumes[0].index:
                counts["doubled"] += 1
                violations.append(Violation(
                    f"turn {turn} resumed for tool call {tc} at {at(resumes[0].time)} after its "
                    f"wait had already ended ({end_rec.data.get('reason', 'no reason')}) at "
                    f"{at(end_rec.time)}: {w.describe()}; {end_rec.describe()}; "
                    f"{resumes[0].describe()}",
                    cite((w, end_rec, resumes[0])),
                ))
            elif resumes:
                outcome = resumes[0].data.get("outcome")
                counts[{"expired": "expired", "ended_by_message": "ended"}.get(
                    str(outcome), "answered")] += 1
            elif end_rec is not None:
                counts["ended"] += 1
            else:
                counts["open"] += 1
                waited = end_time - latest_start
                held_up = overlap(fault_windows, latest_start, end_time)
                if waited > max_wait + tolerance + held_up:
                    excuse = (f", not counting {fmt_duration(held_up)} of faults"
                              if held_up else "")
                    violations.append(Violation(
                        f"turn {turn} waited on tool call {tc} since {at(w.time)} and was "
                        f"never answered, expired or ended: still waiting when the run ended "
                        f"at {at(end_time)}, {fmt_duration(waited)} later (limit {limit}"
                        f"{excuse}): {w.describe()}",
                        cite((w,)),
                    ))

            expiry = expiries.get(tc)
            if expiry is None:
                continue
            start_lo, start_hi = _window(w, tc_marks, expiry.time)
            if expiry.time < start_lo + max_wait - _EPSILON:
                violations.append(Violation(
                    f"tool call {tc} of turn {turn} expired at {at(expiry.time)}, only "
                    f"{fmt_duration(expiry.time - start_lo)} after the wait started at "
                    f"{at(start_lo)} (it may not expire before {fmt_duration(max_wait)}): "
                    f"{w.describe()}; {expiry.describe()}",
                    cite((w, expiry)),
                ))
                continue
            held_up = overlap(fault_windows, start_hi, expiry.time)
            if expiry.time > start_hi + max_wait + tolerance + held_up:
                excuse = f", not counting {fmt_duration(held_up)} of faults" if held_up else ""
                violations.append(Violation(
                    f"tool call {tc} of turn {turn} expired late at {at(expiry.time)}, "
                    f"{fmt_duration(expiry.time - start_hi)} after the hand-off at "
                    f"{at(start_hi)} (limit {limit}{excuse}): {w.describe()}; "
                    f"{expiry.describe()}",
                    cite((w, expiry)),
                ))

        # A call that expired without ever waiting as state (it waited in-call, or never
        # handed off) is judged from its card all the same: expired before `max_wait` after
        # the card was shown, the person lost the days the design gives them to answer. A
        # call sent to the background from its in-call wait is left out: its wait counts from
        # when it was registered, just before its card, so a slow card service moves the
        # card, not the expiry.
        kept_waiting = {tc for _, tc in waits} | backgrounded
        for tc, expiry in expiries.items():
            shown = _shown_at(marks.get(tc, []), expiry.time)
            if tc in kept_waiting or shown is None or expiry.time >= shown + max_wait - _EPSILON:
                continue
            cited = [r for r in (origins.get(tc), expiry) if r is not None]
            violations.append(Violation(
                f"tool call {tc} expired at {at(expiry.time)}, only "
                f"{fmt_duration(expiry.time - shown)} after its card was shown at {at(shown)} "
                f"(it may not expire before {fmt_duration(max_wait)}): "
                + "; ".join(r.describe() for r in cited),
                cite(cited),
            ))

        # The log as committed when the adapter reports it with entry ids, else as appended.
        log_results = committed if committed_ids else appended
        doubled_outcomes = 0
        for tc in sorted(set(finals) | set(log_results)):
            observed = sorted(finals.get(tc, {}).values(), key=lambda x: x.index)
            logged = sorted(log_results.get(tc, {}).values(), key=lambda x: x.index)
            if len(observed) < 2 and len(logged) < 2:
                continue
            doubled_outcomes += 1
            parts = []
            if len(observed) >= 2:
                parts.append("; ".join(
                    f"{x.data.get('outcome')} at {at(x.time)}" for x in observed))
            if len(logged) >= 2:
                parts.append(f"the thread log holds {len(logged)} results for it: " + ", ".join(
                    str(x.data.get("entry")) for x in logged))
            first = observed[0] if observed else logged[0]
            turn = attr(first, "turn") or "?"
            violations.append(Violation(
                f"tool call {tc} of turn {turn} ended {max(len(observed), len(logged))} "
                f"times, it may end once: {'; '.join(parts)}",
                cite([*observed, *logged]),
            ))

        late_answers = 0
        for tc, by_outcome in finals.items():
            for outcome, result in by_outcome.items():
                if outcome not in _ANSWERED:
                    continue
                cards = [t for t, mark in marks.get(tc, ()) if mark in ("card", "hold")
                         and t <= result.time + _EPSILON]
                if not cards:
                    continue
                shown = cards[-1]
                if result.time - shown <= max_wait + tolerance:
                    continue
                late_answers += 1
                violations.append(Violation(
                    f"tool call {tc} of turn {attr(result, 'turn') or '?'} was {outcome} at "
                    f"{at(result.time)}, {fmt_duration(result.time - shown)} after its card was "
                    f"shown at {at(shown)}: an answer applied after max_wait (limit {limit}); "
                    f"the call should have expired: {result.describe()}",
                    cite((result,)),
                ))

        misfiled = _misfiled(origins, filed)
        violations.extend(misfiled)
        counts["doubled_outcomes"] = doubled_outcomes
        counts["late_answers"] = late_answers
        counts["misfiled"] = len(misfiled)
        # Reached when any rule judged something: a wait as state, and also a card or a tool
        # call's results, which an agent that waits in-call has without any `turn.waiting`
        # (JUnit called such runs skipped "without reaching its window").
        judged = set(origins) | set(finals) | set(log_results)
        reached = bool(waits) or bool(judged) or bool(violations)
        return verdict(
            self.name, violations, reached=reached,
            note="" if reached else "no turn waited on a person and no tool call had a result",
            stats={"waits": float(len(waits)), "judged": float(len(judged)),
                   **{k: float(v) for k, v in counts.items()}},
        )


def _window(wait: Record, marks: list[tuple[float, str]], expiry: float) -> tuple[float, float]:
    """(earliest, latest) start of the wait that expired at `expiry`.

    The wait is the one begun by the last card (or hold) before the expiry; it started at that
    card at the earliest and at its hand-off (or the turn's `turn.waiting`) at the latest. A
    hold and the confirmation card it shows are one start: a fault between them may delay
    the card, and a runtime may count from either.
    """
    shown = _shown_at(marks, expiry)
    start = wait.time if shown is None else shown
    later = [t for t, kind in marks if kind == "handoff" and start <= t <= expiry]
    if start <= wait.time <= expiry:
        later.append(wait.time)
    return start, max([start, *later])


def _shown_at(marks: list[tuple[float, str]], expiry: float) -> float | None:
    """When the card whose wait expired at `expiry` was shown: the last card (or hold) before
    it, a hold and the confirmation card it shows being one start; None without a card."""
    shown = [(t, kind) for t, kind in marks if kind in ("card", "hold") and t <= expiry]
    if not shown:
        return None
    if len(shown) >= 2 and shown[-1][1] == "card" and shown[-2][1] == "hold" and not any(
            kind == "handoff" and shown[-2][0] <= t <= shown[-1][0] for t, kind in marks):
        return shown[-2][0]
    return shown[-1][0]


def _result_entry(entry: object) -> tuple[str, str] | None:
    """(tool call, outcome) of a thread-log entry id `result:<tool call>:<outcome>`."""
    if not isinstance(entry, str) or not entry.startswith(_RESULT_ENTRY):
        return None
    tc, sep, outcome = entry[len(_RESULT_ENTRY):].rpartition(":")
    return (tc, outcome) if sep and tc else None


def _misfiled(origins: dict[str, Record], filed: dict[str, list[Record]]) -> list[Violation]:
    """A result of a call that waited on a person, filed under a turn or session not its
    own: the first such result per call."""
    found: list[Violation] = []
    for tc, results in filed.items():
        origin = origins.get(tc)
        if origin is None:
            continue
        own = (attr(origin, "session"), attr(origin, "turn"))
        for r in results:
            under = (attr(r, "session"), attr(r, "turn"))
            if under[1] is None or under == own:
                continue
            where = ("the thread log filed" if r.kind == "threadlog.appended" else
                     "the runtime reported")
            entry = _result_entry(r.data.get("entry"))
            outcome = r.data.get("outcome") or (entry[1] if entry else "")
            found.append(Violation(
                f"{where} the {outcome} result of {tc} under turn {under[1]} of session "
                f"{under[0]}, not its own turn {own[1]} of session {own[0]} (its card was "
                f"shown at {at(origin.time)}): {origin.describe()}; {r.describe()}",
                cite((origin, r)),
            ))
            break
    return found
