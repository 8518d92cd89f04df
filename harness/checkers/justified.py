"""outcome-justified: an outcome that blames someone's act comes after that act.

Two outcomes say that someone stopped the work: `rejected_access` (identity, asked again at
the moment the tool would run, says the user may not use it) and `cancelled` (the person
cancelled the turn: the turn ends `cancelled`, and so does a call it waited on). Either one
without its act before it is the runtime refusing work nobody refused: a call approved by a
person entitled to it, a turn nobody cancelled. The other rules bound what a runtime does,
not what it fails to do, so none of them sees this.

- `rejected_access` of a call needs a revocation (`identity.revoked`, a world record the
  runtime cannot write) of the call's tool, or of every tool (`*`), before the rejection.
  Deliberately coarse (any user's revocation excuses it): it never blames a runtime whose
  identity check saw a revocation that the history orders after the check's own record.
- `cancelled` (a turn's end, or a call's result) needs a cancel of that session
  (`op.cancel`, written by the runner) before it. Judged only when the runner drove the run
  (its `op.message` records are there): a test that calls the runtime directly leaves no
  record of its cancels.
"""

from __future__ import annotations

from typing import Final, final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import Dedup, at, attr, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.history import History

_KINDS: Final = frozenset({"tool.result", "tool.awaiting", "tool.intent", "turn.ended",
                           "identity.revoked", "op.cancel", "op.message"})


@final
class OutcomeJustified:
    name: str = "outcome-justified"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["outcome-justified"]
    description: str = (
        "A call ends rejected for access only after a revocation of its tool, and a turn or "
        "call ends cancelled only after a cancel of its session."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch).
    reads: frozenset[str] = _KINDS

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        dedup = Dedup()
        revoked: set[str] = set()  # tools someone lost, "*" for every tool
        cancelled: set[str] = set()  # sessions the runner cancelled a turn of
        driven: set[str] = set()  # sessions the runner sent messages to
        tools: dict[str, str] = {}  # tool call -> its tool, from the records that name it
        violations: list[Violation] = []
        judged = 0
        for r in history.records:
            if r.kind not in _KINDS or not dedup.fresh(r):
                continue
            session = attr(r, "session")
            if r.kind == "identity.revoked":
                revoked.add(str(r.data.get("tool", "*")))
                continue
            if r.kind in ("op.cancel", "op.message"):
                if session is not None:
                    (cancelled if r.kind == "op.cancel" else driven).add(str(session))
                continue
            tc = attr(r, "tool_call")
            tool = r.data.get("tool")
            if tc is not None and tool is not None:
                tools.setdefault(tc, str(tool))
            outcome = r.data.get("reason" if r.kind == "turn.ended" else "outcome")
            if (r.kind in ("tool.result", "turn.ended") and outcome == "cancelled"
                    and str(session) in driven):
                judged += 1
                if str(session) not in cancelled:
                    what = attr(r, "turn") if r.kind == "turn.ended" else tc
                    violations.append(Violation(
                        f"{what} ended cancelled at {at(r.time)}, and nobody had cancelled a "
                        f"turn of {session}: {r.describe()}",
                        cite((r,)),
                    ))
            elif r.kind == "tool.result" and outcome == "rejected_access" and tc is not None:
                judged += 1
                named = tools.get(tc)
                if "*" in revoked or named is None or named in revoked:
                    continue
                violations.append(Violation(
                    f"{tc} ({named}) was rejected for access at {at(r.time)}, and nobody's "
                    f"access to {named} had been revoked: {r.describe()}",
                    cite((r,)),
                ))
        return verdict(
            self.name, violations, reached=judged > 0,
            note="" if judged else "no call was rejected and nothing was cancelled",
            stats={"judged": float(judged), "revoked_tools": float(len(revoked)),
                   "cancelled_sessions": float(len(cancelled))},
        )
