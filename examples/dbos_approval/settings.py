"""How long the agent waits, and how the chaos run maps its time.

In production the agent waits up to 8 days for an approval, and its team wants no release
kept alive more than 5 minutes by a waiting workflow. DBOS sleeps and waits are real (no time
skipping), so a chaos run maps scenario time onto real time through anchors: 5 minutes are
3 real seconds and 8 days are 30 (`harness.kit.AnchoredScale`). The thresholds stay the
production ones; the agent waits `TIMING.real(8 days)` = 31 real seconds (the
run adds a guard band of `tolerance` after 5 minutes: `Timing.run_scale`), and the slack for
DBOS's own latency is given in real seconds.
"""

from __future__ import annotations

from harness.kit import AnchoredScale, Timing

DAY = 86400.0
SCALE = AnchoredScale(((300.0, 3.0), (8 * DAY, 30.0)))
# A server takes 1-2 real seconds to start; a crashed one is back 2 real seconds later.
# `max_steps_per_turn`: the agent's own bound on model steps per turn (agent.MAX_STEPS).
TIMING = Timing(SCALE, hand_off_after=300.0, max_wait=8 * DAY, tolerance=1.0, liveness=5.0,
                downtime=2.0, max_steps_per_turn=8)
