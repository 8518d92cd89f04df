"""The two thresholds of the design, in scenario seconds on every engine (docs/design.md).

One home for both: the runtime acts on them (`contract.ports.Config`) and the checkers judge
by them (`harness.checkers.base.CheckConfig`); each defaults from here, so the two can only
differ when an adapter says so.
"""

from __future__ import annotations

from typing import Final

__all__ = ["HAND_OFF_AFTER", "MAX_WAIT"]

# A tool call waiting for its approval this long is handed off to the background: 5 minutes.
HAND_OFF_AFTER: Final = 300.0
# A wait that long expires (the card, the background call): 8 days.
MAX_WAIT: Final = 8 * 86400.0
