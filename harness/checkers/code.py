"""no-code-error: an attempt never fails on an error that says its own code is wrong.

An attempt of a durable handler may fail: the world failed (a provider's 500, a timeout), the
thread log refused a write (a stale epoch, an aborted transaction), a host crashed. The engine
retries it, and the retry is the design at work. An attempt that fails on `NameError`,
`AttributeError`, `TypeError`, `KeyError` and their kin failed on a defect of the runtime's
own code, met on a path the run opened (typically one that only a fault reaches: the handler
of a rejection reading a field only another rejection has). The engine retries it too, and
what it was doing when it failed (a report, a result, a card) is lost or late; a retry that
meets the same defect never clears, and the invocation retries until the engine gives up.

Read from `attempt.failed` (`error_type`: the class name of the error; the simulator records
it, for the reference and for a user's agent alike). The attempts judged are those the engine
reports starting (`attempt.started`); a runtime whose engine reports no attempts is not
judged. Deliberately by class name, and only Python's own classes that mean a defect: an
error class the runtime defines is its own way to fail, never counted here, and neither is
`ValueError` (a validation's refusal as often as a defect).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import Dedup, at, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.history import History

# Python's built-in errors that mean the code is wrong, not the world (subclasses by name:
# `type(err).__name__` is what the engine records).
CODE_ERRORS: Final[frozenset[str]] = frozenset({
    "NameError", "UnboundLocalError", "AttributeError", "TypeError", "KeyError", "IndexError",
    "AssertionError", "ZeroDivisionError", "RecursionError", "ImportError",
    "ModuleNotFoundError", "NotImplementedError", "SyntaxError",
})

_KINDS: Final = frozenset({"invocation.created", "attempt.started", "attempt.failed"})


@final
class NoCodeError:
    name: str = "no-code-error"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["no-code-error"]
    description: str = (
        "No attempt fails on an error of the runtime's own code (NameError, AttributeError, "
        "TypeError, KeyError...): attempts fail only on the world's faults and the design's "
        "rejections."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch).
    reads: frozenset[str] = _KINDS

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        dedup = Dedup()
        attempts = 0
        failed = 0
        # One violation per invocation and error class: a deterministic defect fails every
        # retry the same way, and one witness says it.
        seen: set[tuple[str, str]] = set()
        violations: list[Violation] = []
        named: dict[str, str] = {}  # invocation -> its target and key, as created
        for r in history.records:
            if r.kind not in _KINDS or not dedup.fresh(r):
                continue
            if r.kind == "invocation.created":
                if r.invocation:
                    target, key = r.data.get("target"), r.data.get("key")
                    named[r.invocation] = " ".join(str(x) for x in (target, key) if x)
                continue
            if r.kind == "attempt.started":
                attempts += 1
                continue
            failed += 1
            kind = _error_type(r.data)
            if kind not in CODE_ERRORS:
                continue
            invocation = str(r.invocation or r.data.get("invocation"))
            if (invocation, kind) in seen:
                continue
            seen.add((invocation, kind))
            error = r.data.get("error") or kind
            what = f"{invocation} ({named[invocation]})" if named.get(invocation) else invocation
            violations.append(Violation(
                f"an attempt of {what} failed at {at(r.time)} on {error}: an error of "
                f"the runtime's own code, not of the world (the engine retries it, and what "
                f"the attempt was doing is lost): {r.describe()}",
                cite((r,)),
            ))
        return verdict(
            self.name, violations, reached=attempts > 0,
            note="" if attempts else "the engine reported no attempts",
            stats={"attempts": float(attempts), "failed": float(failed)},
        )


def _error_type(data: Mapping[str, object]) -> str:
    kind = data.get("error_type")
    return kind if isinstance(kind, str) else ""
