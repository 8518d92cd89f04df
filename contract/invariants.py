"""The invariants a run is judged by, by name (docs/design.md, section 3).

The names a user writes (a scenario's `[expect] fails`, `--invariants`, an adapter's
`claims`) are agreed on here, so that reading a scenario file needs no checker: each checker
in `harness.checkers.ALL` judges the invariant of its `name`, in this order.
"""

from __future__ import annotations

from typing import Final

__all__ = ["INVARIANTS"]

INVARIANTS: Final[tuple[str, ...]] = (
    "no-duplicate-effects",
    "pinning-bound",
    "busy-rule",
    "fencing",
    "turn-outcome",
    "access-rechecked",
    "conservative-recovery",
    "liveness",
    "effect-authorized",
    "answer-fate",
    "effect-done",
    "hold-justified",
    "outcome-justified",
    "message-logged",
    "approval-asked",
    "context-kept",
    "turn-per-message",
    "background-honored",
    "cancel-honored",
    "turn-answered",
    "card-closed",
    "no-code-error",
    "malformed-refused",
    "result-told",
)
