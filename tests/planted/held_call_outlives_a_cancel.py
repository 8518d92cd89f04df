"""cancel-honored (a cancelled turn's call stops asking): a held call's confirmation outlives
the cancel.

A call held for a confirmation (its approved run crashed after its intent) is still the
approved run's own question, so a new message ends the turn and not the call. The reference
ends it on a cancel, though: every answer to a cancelled turn's call is refused, and
PendingToolCall closes the confirmation and writes the call's `cancelled` result. Here a
cancel is treated like a new message (the hold outlives it): the confirmation stays up,
refusing every answer, until the call expires eight days later.
"""

from __future__ import annotations

from harness.adapters.sim import SimAdapter
from tests.planted._plant import variant

INVARIANT = "cancel-honored"

# The bug: the hold outlives a cancel too, not only a new message.
build = variant(pending={"HOLD_OUTLIVES": frozenset({"ended_by_message", "cancelled"})})
ADAPTER = SimAdapter("planted-held-call-outlives-a-cancel",
                     "a held call's confirmation stays up after the cancel until it expires",
                     build)
