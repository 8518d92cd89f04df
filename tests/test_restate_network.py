"""Network faults on the real stack: connections reset by Toxiproxy after the other side
committed, and the `NetworkFaults` capability.

- PostgreSQL: the first append's COMMIT is held at the server once it is durable, Toxiproxy
  resets the worker's connection in place of the answer (`arm(..., "reset-after-commit")`).
  The worker cannot know whether its entry is in the log: the harness records that as an
  `info` record (`pg.outcome_unknown`); the retry finds the entry committed and does not write
  it again.
- The world: a `reset_peer` on the world link for 3 minutes of scenario time (3 s here). The
  model provider produced and billed the completion, then the answer was reset: each call is
  an `info` record (`world.outcome_unknown`), and the retries carry the same key, so the
  completion is delivered once and deduplicated after.
"""

from __future__ import annotations

import time
import tomllib
from dataclasses import dataclass

import psycopg
import pytest
from restate_fixtures import (
    Capturing,
    assert_linear,
    failing,
    groups_gone,
    of,
    require_real_stack,
    run,
)

from harness.adapters.base import RunContext
from harness.adapters.restate import NetworkFaults, RestateRuntime
from harness.history import History
from harness.schedules.scenario_file import parse_scenario

pytestmark = pytest.mark.real


@pytest.fixture(scope="module", autouse=True)
def _real_stack() -> None:
    require_real_stack()


@dataclass(frozen=True)
class ResetAfterCommit(Capturing):
    """Arms the reset after the first append's COMMIT, and resets the world link at t=0."""

    def open(self, ctx: RunContext) -> RestateRuntime:
        runtime = super().open(ctx)
        runtime.arm("threadlog.append.locked", "reset-after-commit", 0.0, 1)
        runtime.toxic("world", "reset_peer", 180.0)
        return runtime


LOOKUP = parse_scenario(tomllib.loads("""
name = "reset-after-commit"
horizon = "1h"
[[step]]
at = "0s"
do = "message"
session = "s1"
text = "look it up"
tools = ["lookup"]
"""), "<inline>", "reset-after-commit")


def test_reset_after_commit_is_unknown_and_nothing_is_duplicated() -> None:
    adapter = ResetAfterCommit()
    outcome = run(adapter, LOOKUP)
    assert outcome.error is None, outcome.error
    assert failing(outcome) == {}, failing(outcome)
    results = {r.checker: r for r in outcome.results}
    assert results["no-duplicate-effects"].valid is True
    assert results["fencing"].valid is True
    runtime = adapter.opened[0]
    history: History = runtime.history

    # PostgreSQL: the COMMIT went through, the worker could not know it.
    reset = of(history, "network.reset_after_commit")
    assert len(reset) == 1 and reset[0].type == "info", reset
    assert "error" not in reset[0].data and "committed" in reset[0].data["outcome"], reset[0]
    unknown = of(history, "pg.outcome_unknown")
    assert len(unknown) == 1 and unknown[0].type == "info", unknown
    entry, epoch = unknown[0].data["entry"], unknown[0].epoch
    log = assert_linear(history, "s1")
    landed = [r for r in log if r.data["entry"] == entry]
    assert len(landed) == 1 and landed[0].epoch == epoch, (entry, log)
    # The attempt after it read the log and went on (it did not append the entry again).
    later = [r for r in history.of_kind("threadlog.assigned") if r.time > unknown[0].time]
    assert later and later[0].epoch == (epoch or 0) + 1

    # The world: billed once, answers reset, retries deduplicated under the same key.
    calls = [r for r in history.of_kind("world.outcome_unknown") if r.type == "info"]
    assert calls, "no world call was reset"
    key = calls[0].key
    assert key is not None and key.startswith("model:"), calls[0]
    assert len(of(history, "effect.delivered", key=key)) == 1
    assert of(history, "effect.deduplicated", key=key)
    assert of(history, "network.toxic", link="world", kind="reset_peer")
    assert of(history, "network.healed", link="world", kind="reset_peer")
    assert len(history.of_kind("turn.ended")) == 1
    groups_gone(runtime.process_groups())


def test_network_faults_capability_applies_and_heals_each_kind() -> None:
    adapter = Capturing()
    runtime = adapter.open(RunContext(seed=0, history=History(wall=time.time), hosts=1))
    try:
        assert isinstance(runtime, NetworkFaults)
        toxi = runtime.toxiproxy.client
        through_proxy = (f"host=127.0.0.1 port={runtime._pg_proxy.listen_port} "
                         "user=postgres dbname=postgres connect_timeout=3")
        for kind in ("latency", "timeout", "reset_peer", "down"):
            applied = runtime.now()
            # One second: below the fault floor, so it lasts one real second as well.
            runtime.toxic("pg", kind, 1.0)
            if kind == "down":
                assert toxi.get_proxy("pg").enabled is False
                with pytest.raises(psycopg.OperationalError):
                    psycopg.connect(through_proxy).close()
            else:
                assert [t["type"] for t in toxi.toxics("pg")] == [kind]
            if kind == "latency":
                started = time.monotonic()
                with psycopg.connect(through_proxy) as conn:
                    conn.execute("SELECT 1").fetchone()
                assert time.monotonic() - started >= runtime.toxic_latency_ms / 1000
            runtime.advance(applied + 1.05)
            # The fault ends one *real* second after it began, which the scenario clock may
            # reach sooner: wait for the heal itself (readiness), bounded, not for a time.
            deadline = time.monotonic() + 15.0
            while ((toxi.toxics("pg") or not toxi.get_proxy("pg").enabled)
                   and time.monotonic() < deadline):
                runtime.advance(runtime.now() + 0.05)
            assert toxi.toxics("pg") == [] and toxi.get_proxy("pg").enabled, kind
        with psycopg.connect(through_proxy) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        healed = [r.data["kind"] for r in runtime.history.of_kind("network.healed")]
        assert healed == ["latency", "timeout", "reset_peer", "down"]
    finally:
        runtime.close()
    groups_gone(runtime.process_groups())
