"""How long the agent waits, and how the chaos run maps its time.

In production the agent waits up to 8 days for an approval, and its team wants no release
kept alive more than 5 minutes by a waiting workflow. Temporal's dev server has no time
skipping, so a chaos run maps scenario time onto real time through anchors: 5 minutes are
3 real seconds and 8 days are 30 (`harness.kit.AnchoredScale`). The thresholds stay the
production ones; the agent waits `TIMING.real(8 days)` = 31 real seconds (the
run adds a guard band of `tolerance` after 5 minutes: `Timing.run_scale`), and the slack for
Temporal's own latency is given in real seconds.
"""

from __future__ import annotations

from harness.kit import AnchoredScale, Timing

DAY = 86400.0
SCALE = AnchoredScale(((300.0, 3.0), (8 * DAY, 30.0)))
# A crashed worker is back 5 real seconds later: long enough for scenario 04 to let the
# 8-day wait run out and the answer arrive while it is down.
TIMING = Timing(SCALE, hand_off_after=300.0, max_wait=8 * DAY, tolerance=1.0, liveness=5.0,
                downtime=5.0)
