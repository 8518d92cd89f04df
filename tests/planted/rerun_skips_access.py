"""access-rechecked: the re-run after the hand-off does not re-resolve access.

When the person answers a wait that was handed off, PendingToolCall re-runs the tool; the
reference asks identity again (the user may have lost access during the days of the wait).
Here the re-run's identity check always says yes, so a revoked user's tool still runs.
"""

from __future__ import annotations

from dataclasses import replace

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from reference_impl.pending import build_pending_service

INVARIANT = "access-rechecked"


class _StillAllowed:
    async def has_access(self, user: str, tool: str) -> bool:
        return True


def build(ports: Ports, version: str = "v1") -> App:
    app = build_app(ports, version)
    stale = build_pending_service(replace(ports, identity=_StillAllowed()), version)
    return App(version, tuple(stale if s.name == stale.name else s for s in app.services))


ADAPTER = SimAdapter("planted-rerun-skips-access", "re-run after hand-off skips has_access",
                     build)
