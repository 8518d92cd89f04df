"""The thresholds of the design: the two bounds in scenario seconds on every engine and the
bound on model steps per turn (docs/design.md), and what the checkers judge by
(`CheckConfig`: the thresholds and their slack).

One home for each: the runtime acts on them (`contract.ports.Config`) and the checkers judge
by them (`CheckConfig`, which an adapter returns from `check_config()`); each defaults from
here, so the two can only differ when an adapter says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["HAND_OFF_AFTER", "MAX_STEPS_PER_TURN", "MAX_WAIT", "Bound", "CheckConfig"]

# A tool call waiting for its approval this long is handed off to the background: 5 minutes.
HAND_OFF_AFTER: Final = 300.0
# A wait that long expires (the card, the background call): 8 days.
MAX_WAIT: Final = 8 * 86400.0
# A turn asks the model at most this many times: an agent stuck in a loop stops spending.
MAX_STEPS_PER_TURN: Final = 8

Bound = Literal["hand_off", "max_wait"]


@dataclass(frozen=True, slots=True)
class CheckConfig:
    """Thresholds the checkers judge against, in scenario seconds on every engine."""

    hand_off_after: float = HAND_OFF_AFTER
    max_wait: float = MAX_WAIT
    # Slack for work that legitimately happens after the bound (a step, a retry back-off).
    tolerance: float = 60.0
    # After the last fault heals, every session must be idle within this bound.
    liveness_bound: float = 3600.0
    # Of `tolerance`, the part a real engine's own latency needed (harness.checkers.measured).
    latency: float = 0.0
    # The slack at each bound, when it is not `tolerance` (None): on a scaled clock a real
    # second of slack is minutes near `hand_off_after` and hours near `max_wait`, and one
    # figure for both would judge the pinning bound with hours of slack (see harness.kit).
    hand_off_tolerance: float | None = None
    max_wait_tolerance: float | None = None
    # The runtime's bound on model steps per turn (`turn-answered`); None: the adapter does
    # not state one (a user's agent has its own), and the bound is not judged.
    max_steps_per_turn: int | None = None

    def slack(self, bound: Bound) -> float:
        """The tolerance that applies at `bound`: its own, else `tolerance`."""
        own = self.hand_off_tolerance if bound == "hand_off" else self.max_wait_tolerance
        return self.tolerance if own is None else own
