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
"""

from __future__ import annotations

from typing import final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import Dedup, at, attr, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.history import History, Record

_KINDS = frozenset({"tool.intent", "threadlog.assigned", "turn.held"})


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
            if r.kind == "tool.intent":
                intents.setdefault((tc, run), r)
                continue
            holds += 1
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


def _run(record: Record) -> int | None:
    run = record.data.get("run")
    return None if run is None else int(run)
