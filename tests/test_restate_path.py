"""The reference implementation on a real Restate server, with PostgreSQL and Toxiproxy.

Scaled time (hand_off_after 5 s, max_wait 25 s). Skips when restate-server, toxiproxy-server
or PostgreSQL are missing (`make restate toxiproxy`), fails instead under CI=true.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.adapters.base import RunContext
from harness.adapters.restate import ReferenceRestateAdapter, RestateRuntime
from harness.checkers.base import CheckConfig
from harness.outcome import RunOutcome
from harness.runner import RunOptions, run_schedule
from harness.schedules.model import Schedule
from harness.schedules.scenario_file import load_scenario, parse_scenario

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[1]


def _missing() -> str | None:
    from harness.components.postgres import PostgresUnavailable, find_binaries
    from harness.components.restate import RestateUnavailable, find_restate_server
    from harness.components.toxiproxy import find_toxiproxy_server

    try:
        find_restate_server()
        find_toxiproxy_server()
        find_binaries()
    except (RestateUnavailable, PostgresUnavailable, RuntimeError) as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module", autouse=True)
def _components() -> None:
    reason = _missing()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and the real stack is required: {reason}", pytrace=False)
    pytest.skip(f"real stack missing ({reason}); run `make restate toxiproxy`")


@dataclass(frozen=True)
class Capturing(ReferenceRestateAdapter):
    """The reference adapter, keeping the runtimes it opened (to inspect after close)."""

    opened: list[RestateRuntime] = field(default_factory=list)

    def open(self, ctx: RunContext) -> RestateRuntime:
        runtime = super().open(ctx)
        self.opened.append(runtime)
        return runtime


def _run(adapter: ReferenceRestateAdapter, schedule: Schedule) -> RunOutcome:
    return run_schedule(adapter, schedule, RunOptions(adapter_spec=adapter.name,
                                                      report_dir=None))


def _failing(outcome: RunOutcome) -> dict[str, str]:
    return {r.checker: r.witness() for r in outcome.results if r.valid is not True}


def _groups_gone(runtime: RestateRuntime, pgids: list[int]) -> None:  # noqa: ARG001
    for pgid in pgids:
        with pytest.raises(ProcessLookupError):
            os.killpg(pgid, 0)


def test_reference_on_restate_all_invariants_hold() -> None:
    adapter = Capturing()
    assert isinstance(adapter.check_config(), CheckConfig)
    for path in ("01-answered-in-2-minutes.toml", "02-answered-after-3-days-across-redeploys.toml"):
        outcome = _run(adapter, load_scenario(ROOT / "scenarios" / path))
        assert outcome.error is None, outcome.error
        assert _failing(outcome) == {}, (path, _failing(outcome))
    # Nothing is left running: every process group the runs started is gone.
    for runtime in adapter.opened:
        pgids = runtime.process_groups()
        assert pgids
        _groups_gone(runtime, pgids)


def test_naive_on_restate_violates_pinning_measured_by_restate() -> None:
    adapter = Capturing(name="naive-restate", variant="naive")
    schedule = load_scenario(ROOT / "scenarios" / "02-answered-after-3-days-across-redeploys.toml")
    outcome = _run(adapter, schedule)
    assert outcome.error is None, outcome.error
    pinning = next(r for r in outcome.results if r.checker == "pinning-bound")
    assert pinning.valid is False, pinning.witness()
    # The evidence is Restate's own: sys_invocation counted invocations pinned to v1 after
    # it was superseded, and v1 drained only once that count reached 0.
    history = adapter.opened[0].history
    v1 = history.of_kind("deployment.registered")[0].deployment
    counts = [r.data["count"] for r in history.of_kind("restate.pinned")
              if r.data["deployment"] == v1]
    assert counts and counts[0] >= 1 and counts[-1] == 0, counts
    superseded = next(r for r in history.of_kind("deployment.superseded") if r.deployment == v1)
    drained = next(r for r in history.of_kind("deployment.drained") if r.deployment == v1)
    config = adapter.check_config()
    assert drained.time - superseded.time > config.hand_off_after + config.tolerance
    _groups_gone(adapter.opened[0], adapter.opened[0].process_groups())


def test_worker_sigstopped_and_resumed() -> None:
    adapter = Capturing()
    schedule = parse_scenario(tomllib.loads("""
name = "paused-worker"
[[step]]
at = "0s"
do = "message"
session = "s1"
text = "look it up"
tools = ["lookup"]
[[step]]
at = "30s"
do = "gc-pause"
host = "latest/1"
duration = "2m"
[[step]]
at = "3m"
do = "message"
session = "s1"
text = "and again"
tools = ["lookup"]
"""), "<inline>", "paused-worker")
    outcome = _run(adapter, schedule)
    assert outcome.error is None, outcome.error
    assert _failing(outcome) == {}, _failing(outcome)
    runtime = adapter.opened[0]
    kinds = [r.kind for r in runtime.history]
    assert "host.resumed" in kinds
    ended = [r for r in runtime.history.of_kind("turn.ended")]
    assert len(ended) == 2
    _groups_gone(runtime, runtime.process_groups())
