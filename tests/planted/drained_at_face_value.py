"""pinning-bound: a superseded deployment is recorded as drained at once.

The operator of the reference retires a deployment once nothing is pinned to it. Here the
runtime reports a deployment as drained the moment it is superseded ("no new invocations go
there"), while invocations are still pinned to it: the in-call wait of a card, a turn in
progress. Every later record of those invocations happens on a deployment already retired.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.adapters.base import RunContext
from harness.adapters.sim import SimAdapter, SimRuntime
from reference_impl.app import build_app

INVARIANT = "pinning-bound"


class _FaceValueRuntime(SimRuntime):
    def deploy(self, version: str) -> str:
        previous = self.sim.deployments[-1] if self.sim.deployments else None
        dep_id = super().deploy(version)
        if previous is not None and previous.drained_at is None:
            # The bug: "superseded" taken as "drained", whatever is still pinned to it.
            previous.drained_at = self.sim.clock.now()
            self.history.add("deployment.drained", deployment=previous.id,
                             data={"superseded_at": previous.drained_at, "after": 0.0})
        return dep_id


@dataclass(frozen=True)
class _FaceValueAdapter(SimAdapter):
    def open(self, ctx: RunContext) -> SimRuntime:
        return _FaceValueRuntime(ctx, self.build)


ADAPTER = _FaceValueAdapter("planted-drained-at-face-value",
                            "superseded deployments recorded as drained at once", build_app)
