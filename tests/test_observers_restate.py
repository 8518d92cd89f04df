"""RestateObserver on a real restate-server: Restate's own tables, judged by the checkers.

The built-in naive-restate adapter runs a scenario (its own records are what the run is
judged by); beside it a RestateObserver reads the same server's `sys_invocation` and
`sys_deployment` into a history of its own, on the runtime's clock. Judged alone, that
history must show what Restate did: v1 pinned by the in-call wait long after v2 replaced it.
Needs the real stack (`make restate toxiproxy`); skips without it, fails under CI=true.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from restate_fixtures import Capturing, groups_gone, require_real_stack, run, scenario

from harness.adapters.base import RunContext
from harness.adapters.restate import RestateRuntime
from harness.checkers.base import CheckConfig
from harness.checkers.pinning import PinningBound
from harness.history import History
from harness.observers import RestateObserver

pytestmark = pytest.mark.real


@pytest.fixture(autouse=True, scope="module")
def _stack() -> None:
    require_real_stack()


@dataclass(frozen=True)
class Observed(Capturing):
    """The built-in adapter with a RestateObserver beside each runtime it opens."""

    observed: list[History] = field(default_factory=list)

    def open(self, ctx: RunContext) -> RestateRuntime:
        runtime = super().open(ctx)
        history = History(runtime.now)
        observer = RestateObserver(history, admin_url=runtime.restate.admin_url)
        observer.start()
        close = runtime.close

        def closing() -> None:
            observer.stop()
            observer.poll()  # the last state, after the run's end
            close()

        runtime.close = closing  # type: ignore[method-assign]
        self.observed.append(history)
        return runtime


def test_the_observers_records_show_the_naive_design_pinning_v1() -> None:
    adapter = Observed(name="naive-restate", variant="naive")
    outcome = run(adapter, scenario("02-answered-after-3-days-across-redeploys.toml", "3d1h"))
    assert outcome.error is None, outcome.error
    [history] = adapter.observed
    deployments = [r.deployment for r in history.of_kind("deployment.registered")]
    assert len(deployments) == 3, deployments  # v1 and the two releases of the scenario
    v1 = deployments[0]
    assert [r.deployment for r in history.of_kind("deployment.superseded")][:1] == [v1]
    pinned_to_v1 = {r.invocation for r in history.of_kind("invocation.started")
                    if r.deployment == v1}
    assert pinned_to_v1
    config = CheckConfig()
    verdict = PinningBound().check(history, config)
    assert verdict.valid is False, verdict.note
    assert f"deployment {v1}" in verdict.witness()
    # The built-in adapter's own records say the same.
    assert {r.checker: r.valid for r in outcome.results}["pinning-bound"] is False
    groups_gone(adapter.opened[0].process_groups())
