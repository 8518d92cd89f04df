"""hold-justified: the person is asked to confirm an effect only when its outcome is unknown.

A run of a tool call writes its intent, then acts. If the attempt that wrote the intent stops
before the journal learns the effect's outcome (a crash, a pause that cost it the thread), the
attempt that runs again cannot tell whether the effect happened: it holds (`turn.held`) and a
confirmation card asks the person. That is the only reason to hold. So a hold of run N of a
call needs, before it,

1. an intent of run N of that call (`tool.intent`): without one nothing is of unknown outcome,
   and a confirmation card for it asks the person about nothing (a pure tool held, a confirmed
   run held on the intent of the run it confirms);
2. a newer owner of the session's thread than the one that wrote that intent
   (`threadlog.assigned` at a higher epoch): every attempt takes ownership first, so the
   attempt that runs again comes with a new epoch. A hold at the intent's own epoch is the
   attempt that wrote the intent holding on itself: the effect was never tried, and a run
   that holds every time never does its effect however often the person confirms.

A runtime whose intents carry no epoch is judged on (1) only.

Both clauses rest on the run numbers the runtime reports (`run`), so they are judged too, as
the design numbers runs: a call's first run is run 1 (its approval card, its first intent),
and the run a confirmation card asks about after a hold of run N is run N + 1. A card or an
intent numbered otherwise (a first run numbered 2, a confirmation of run N + 2, or one that
reuses the held run's number) breaks the link between a hold and the intent it holds on, and
a confirmation that reuses a number replays the held run's steps instead of running again.
Records without a run number are not judged on it.
"""

from __future__ import annotations

from typing import final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import Dedup, at, attr, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.history import History, Record

_KINDS = frozenset({"tool.intent", "threadlog.assigned", "turn.held", "tool.awaiting"})


@final
class HoldJustified:
    name: str = "hold-justified"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["hold-justified"]
    description: str = (
        "A call is held for confirmation only on an intent of unknown outcome: its run wrote "
        "an intent and a later attempt, under a newer owner of the thread, found it."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch).
    reads: frozenset[str] = _KINDS

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        dedup = Dedup()
        # (tool call, run) -> its first intent; session -> the newest epoch assigned so far.
        intents: dict[tuple[str, int | None], Record] = {}
        newest: dict[str, int] = {}
        # tool call -> its holds so far, by run.
        held: dict[str, dict[int, Record]] = {}
        violations: list[Violation] = []
        holds = 0
        for r in history.records:
            if r.kind not in _KINDS or not dedup.fresh(r):
                continue
            tc = attr(r, "tool_call")
            if r.kind == "threadlog.assigned":
                session, epoch = attr(r, "session"), attr(r, "epoch")
                if session is not None and epoch is not None:
                    newest[session] = max(int(epoch), newest.get(session, int(epoch)))
                continue
            if tc is None:
                continue
            run = _run(r)
            if r.kind == "tool.awaiting":
                violations.extend(_card_numbered(r, tc, run, held.get(tc, {})))
                continue
            if r.kind == "tool.intent":
                violations.extend(_intent_numbered(r, tc, run, held.get(tc, {})))
                intents.setdefault((tc, run), r)
                continue
            holds += 1
            if run is not None:
                held.setdefault(tc, {}).setdefault(run, r)
            intent = intents.get((tc, run))
            if intent is None and run is None:
                intent = next((i for (c, _), i in intents.items() if c == tc), None)
            what = tc if run is None else f"run {run} of {tc}"
            if intent is None:
                violations.append(Violation(
                    f"{what} was held at {at(r.time)} with no intent of that run: no "
                    f"effect was of unknown outcome, yet the person is asked to confirm: "
                    f"{r.describe()}",
                    cite((r,)),
                ))
                continue
            written = attr(intent, "epoch")
            session = attr(intent, "session") or attr(r, "session")
            if written is None or session is None:
                continue
            if newest.get(session, int(written)) <= int(written):
                violations.append(Violation(
                    f"{what} was held at {at(r.time)} on its intent of {at(intent.time)} "
                    f"at epoch {written}, and no attempt took the thread of {session} since: "
                    "the attempt that wrote the intent held on it, its effect never tried: "
                    f"{intent.describe()}, then {r.describe()}",
                    cite((intent, r)),
                ))
        return verdict(
            self.name, violations, reached=holds > 0,
            note="" if holds else "no call was held",
            stats={"holds": float(holds), "intents": float(len(intents))},
        )


def _card_numbered(card: Record, tc: str, run: int | None,
                   held: dict[int, Record]) -> list[Violation]:
    """A card asks about run 1 (an approval) or about the run after a hold (a confirmation)."""
    if run is None:
        return []
    if card.data.get("mode") == "confirm":
        if run - 1 in held:
            return []
        after = (f"after a hold of run {max(held)} only ({held[max(held)].describe()})"
                 if held else "with no hold of the call before it")
        return [Violation(
            f"the confirmation card of {tc} at {at(card.time)} asks about run {run} {after}: "
            f"a confirmation follows a hold of run {run - 1}, so the hold and the run it "
            f"confirms do not match: {card.describe()}",
            cite((card, *held.values())),
        )]
    if run != 1 and not held:
        return [Violation(
            f"the approval card of {tc} at {at(card.time)} asks about run {run}: a call's "
            f"first run is run 1: {card.describe()}",
            cite((card,)),
        )]
    return []


def _intent_numbered(intent: Record, tc: str, run: int | None,
                     held: dict[int, Record]) -> list[Violation]:
    """An intent belongs to run 1, or to a run up to the one after the last hold (an earlier
    run's intent may still land late, from a paused attempt)."""
    if run is None:
        return []
    most = max(held) + 1 if held else 1
    if run <= most:
        return []
    since = (f"the last hold was of run {most - 1} ({held[most - 1].describe()})"
             if held else "no run of the call was held before, so this is run 1")
    return [Violation(
        f"run {run} of {tc} wrote its intent at {at(intent.time)}, but {since}: run numbers "
        f"skip, and the hold a later run relies on cannot name the intent it holds on: "
        f"{intent.describe()}",
        cite((intent, *held.values())),
    )]


def _run(record: Record) -> int | None:
    run = record.data.get("run")
    return None if run is None else int(run)
