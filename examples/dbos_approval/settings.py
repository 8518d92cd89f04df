"""How long the agent waits, and how the chaos run maps its time.

In production the agent waits up to 8 days for an approval, and its team wants no release
kept alive more than 5 minutes by a waiting workflow. DBOS sleeps and waits are real (no time
skipping), so a chaos run cannot wait 8 days: under test the same rules run with shorter
thresholds (`CHAOS`), and the runtime's clock counts `scale` scenario seconds per real
second, so a scenario file says "60s" for what takes 6 real seconds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    scale: float  # scenario seconds per real second
    pinning_bound: float  # scenario seconds a release may stay pinned (5 minutes in prod)
    max_wait: float  # scenario seconds the agent waits for an approval (8 days in prod)
    tolerance: float  # scenario seconds of slack for the engine's own latency
    crash_downtime: float  # scenario seconds a crashed worker stays down

    def real(self, seconds: float) -> float:
        return seconds / self.scale


PRODUCTION = Settings(scale=1.0, pinning_bound=300.0, max_wait=8 * 86400.0,
                      tolerance=60.0, crash_downtime=5.0)
CHAOS = Settings(scale=10.0, pinning_bound=10.0, max_wait=60.0, tolerance=5.0,
                 crash_downtime=20.0)


def current() -> Settings:
    """`CHAOS` unless APPROVAL_PROFILE=production."""
    return PRODUCTION if os.environ.get("APPROVAL_PROFILE") == "production" else CHAOS
