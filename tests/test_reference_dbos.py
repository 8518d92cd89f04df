"""The reference implementation and the naive variant on DBOS, with PostgreSQL and Toxiproxy.

The short CI subset of `make chaos-dbos`: virtual time as on the simulator (hand_off_after 5
minutes, max_wait 8 days, through the harness's timers), horizons shortened to just past the
last step. Skips when PostgreSQL, toxiproxy-server or the dbos package are missing (`make
toxiproxy`, `pip install -e '.[test]'`), fails instead under CI=true.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from pg_fixtures import pg_server_fixture  # noqa: F401
from restate_fixtures import component_groups

from harness.adapters import Adapter, load_adapter
from harness.adapters.base import RunContext
from harness.adapters.dbos import DbosRuntime, NaiveDbosAdapter, ReferenceDbosAdapter
from harness.components.net import wait_until
from harness.components.postgres import PostgresServer
from harness.components.procs import group_members
from harness.errors import DurableChaosError
from harness.outcome import RunOutcome
from harness.run import RunOptions, run_schedule
from harness.schedules.model import Schedule, parse_duration
from harness.schedules.scenario_file import load_scenario
from reference_impl.dbos.state import StateStore

pytestmark = pytest.mark.real

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


@pytest.fixture(scope="module", autouse=True)
def _real_stack() -> None:
    try:
        ReferenceDbosAdapter().preflight()
    except DurableChaosError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and the DBOS stack is required: {exc}", pytrace=False)
        pytest.skip(f"DBOS stack missing ({exc}); run `make toxiproxy` and "
                    "`pip install -e '.[test]'`")


@dataclass(frozen=True)
class Capturing(ReferenceDbosAdapter):
    """The adapter, keeping the runtimes it opened (to inspect after close)."""

    opened: list[DbosRuntime] = field(default_factory=list)

    def open(self, ctx: RunContext) -> DbosRuntime:
        runtime = super().open(ctx)
        self.opened.append(runtime)
        return runtime


@dataclass(frozen=True)
class CapturingNaive(NaiveDbosAdapter):
    opened: list[DbosRuntime] = field(default_factory=list)

    def open(self, ctx: RunContext) -> DbosRuntime:
        runtime = super().open(ctx)
        self.opened.append(runtime)
        return runtime


def scenario(name: str, horizon: str) -> Schedule:
    return replace(load_scenario(SCENARIOS / name), horizon=parse_duration(horizon))


def run(adapter: Adapter, schedule: Schedule) -> RunOutcome:
    outcome = run_schedule(adapter, schedule, RunOptions(adapter_spec=adapter.name,
                                                         report_dir=None))
    assert outcome.error is None, outcome.error
    return outcome


def verdicts(outcome: RunOutcome) -> dict[str, str]:
    return {r.checker: r.outcome for r in outcome.results}


def groups_gone(pgids: list[int]) -> None:
    def none_left() -> bool | None:
        return True if not any(group_members(g) for g in pgids) else None

    wait_until(none_left, timeout=15, what="the run's process groups to exit", interval=0.05)


def test_builtin_names_load_the_dbos_adapters() -> None:
    assert load_adapter("reference-dbos").name == "reference-dbos"
    naive = load_adapter("naive-dbos")
    assert isinstance(naive, NaiveDbosAdapter) and naive.variant == "naive"


def test_reference_on_dbos_all_invariants_hold_across_redeploys() -> None:
    adapter = Capturing()
    outcome = run(adapter, scenario("02-answered-after-3-days-across-redeploys.toml", "3d1h"))
    failing = {k: v for k, v in verdicts(outcome).items() if v != "pass"}
    assert failing == {}, failing
    runtime = adapter.opened[0]
    history = runtime.history
    # The answer on day 3 re-ran the tool on the newest version (v3), the same turn resumed.
    reruns = history.of_kind("tool.rerun")
    assert [r.data.get("version") for r in reruns] == ["v3"], reruns
    assert [r.data["reason"] for r in history.of_kind("turn.ended")] == ["completed"]
    # DBOS's own state: the in-call wait was a workflow in recv (suspended) for about the
    # hand-off bound, and v1 and v2 were retired once DBOS showed nothing pinned to them.
    config = adapter.check_config()
    suspended = history.of_kind("invocation.suspended")
    assert suspended, "no workflow was seen waiting in recv"
    retired = {r.deployment for r in history.of_kind("deployment.retired")}
    assert retired == {"v1", "v2"}, retired
    for version in ("v1", "v2"):
        counts = [r.data["count"] for r in history.of_kind("dbos.pinned")
                  if r.deployment == version]
        assert counts and counts[-1] == 0, (version, counts)
    assert config.hand_off_after == 300.0
    # Nothing is left running, nor the run's logs.
    pgids = runtime.process_groups()
    assert pgids
    groups_gone(pgids)
    assert not runtime.log_dir.exists()


def test_naive_on_dbos_fails_pinning_measured_by_dbos() -> None:
    adapter = CapturingNaive()
    outcome = run(adapter, scenario("02-answered-after-3-days-across-redeploys.toml", "3d1h"))
    result = verdicts(outcome)
    assert result["pinning-bound"] == "fail", result
    assert {k for k, v in result.items() if v != "pass"} == {"pinning-bound"}, result
    history = adapter.opened[0].history
    # The evidence is DBOS's: workflow_status kept a v1 workflow PENDING (in recv) past the
    # redeploys, and v1 was retired only once that count reached 0 (after the answer).
    counts = [r.data["count"] for r in history.of_kind("dbos.pinned") if r.deployment == "v1"]
    assert counts and counts[0] >= 1 and counts[-1] == 0, counts
    config = adapter.check_config()
    suspended = {r.invocation: r for r in history.of_kind("invocation.suspended")
                 if r.deployment == "v1"}
    ended = {r.invocation: r for r in history.of_kind("invocation.completed")}
    longest = max(ended[i].time - s.time for i, s in suspended.items() if i in ended)
    assert longest > config.hand_off_after + config.tolerance, longest
    groups_gone(adapter.opened[0].process_groups())


def test_paused_owner_is_taken_over_and_its_late_appends_are_fenced() -> None:
    adapter = Capturing()
    outcome = run(adapter, scenario("09-gc-pause-before-control-row.toml", "1h"))
    failing = {k: v for k, v in verdicts(outcome).items() if v != "pass"}
    assert failing == {}, failing
    history = adapter.opened[0].history
    # The frozen host's workflows went to a live host of its version through DBOS's own
    # recovery, which took the thread (epoch 2); the woken host's append was refused.
    recovered = history.of_kind("dbos.recovered")
    assert recovered and recovered[0].data["workflows"], recovered
    paused = history.of_kind("host.paused")[0].host
    assert recovered[0].host == paused
    epochs = [r.epoch for r in history.of_kind("threadlog.assigned")]
    assert epochs == [1, 2], epochs
    rejected = history.of_kind("threadlog.rejected")
    assert rejected and all(r.epoch == 1 for r in rejected), rejected


def test_naive_turn_whose_thread_moved_retries_its_attempt_like_the_simulator() -> None:
    # A naive turn waits in recv while a background call's re-run takes its session's thread
    # (a new epoch). When the answer wakes the turn, its append is stale: the attempt fails
    # and runs again from its recorded steps, taking the thread back, as a Restate attempt
    # retry does; a step retried alone would append at the stale epoch for ever.
    name = "16-background-result-while-another-turn-waits.toml"
    simulated = run(load_adapter("naive"), load_scenario(SCENARIOS / name))
    adapter = CapturingNaive()
    outcome = run(adapter, load_scenario(SCENARIOS / name))
    assert verdicts(outcome) == verdicts(simulated)
    history = adapter.opened[0].history
    rejected = [r for r in history.of_kind("threadlog.rejected")
                if str(r.data.get("entry", "")).startswith("intent:s1.turn2")]
    assert rejected, "the waiting turn's thread did not move"
    ended = {r.turn: r.data["reason"] for r in history.of_kind("turn.ended")}
    assert ended.get("s1.turn2") == "completed", ended


def test_an_engine_that_never_settles_is_a_clock_stall_not_a_restate_one() -> None:
    # The only host frozen outside any fault: the session's workflow stays enqueued, so DBOS
    # is never quiescent. After `stall_after` real seconds the clock jumps all the same,
    # recorded under the engine-neutral kind, with the workflow that kept DBOS busy; nothing
    # names an engine that did not run.
    from harness.history import History

    runtime = Capturing().open(RunContext(seed=0, history=History(wall=time.time), hosts=1))
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
        assert runtime.now() >= 86400.0
        assert runtime.history.of_kind("clock.stalled")
        assert not [r.kind for r in runtime.history if r.kind.startswith("restate.")]
        host.worker.resume()
    finally:
        runtime.close()
    groups_gone(runtime.process_groups())


def test_hosts_starting_together_create_the_state_table_once(pg_server: PostgresServer) -> None:
    import psycopg

    database = f"state_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_server.conninfo, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
    url = f"postgresql://postgres@127.0.0.1:{pg_server.port}/{database}"
    start = threading.Barrier(6)
    errors: list[BaseException] = []

    def host() -> None:
        store = StateStore(url)
        start.wait()
        try:
            store.ensure_schema()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=host) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    store = StateStore(url)
    store.write("Controller", "s1", {"queue": [1], "turns": 2})
    store.write("Controller", "s1", {"queue": None})
    assert store.read("Controller", "s1") == {"turns": 2}


KINDS = ("toxiproxy-server", "postgres", "reference_impl.dbos.worker")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_nothing_left_running_after_ctrl_c_or_kill(tmp_path: Path, sig: signal.Signals) -> None:
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--adapter", "reference-dbos",
         "--scenarios", str(SCENARIOS / "01-answered-in-2-minutes.toml"), "--schedules", "0",
         "--report-dir", str(tmp_path / "report"), "--quiet"],
        cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    groups: dict[int, str] = {}
    try:
        def started() -> bool | None:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            groups.update(component_groups(proc.pid, KINDS).values())
            kinds = list(groups.values())
            return True if all(kinds.count(k) >= (2 if k == KINDS[2] else 1)
                               for k in KINDS) else None

        wait_until(started, timeout=90, what="the harness's components", interval=0.05)
        os.killpg(proc.pid, sig)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    # Interrupted, the run stops and cleans up; killed, the components die of the death
    # signal they were started with. Either way no process of theirs is left.
    assert code in ((0, 1, 130) if sig == signal.SIGINT else (-signal.SIGKILL,)), code
    assert set(groups.values()) == set(KINDS), groups
    groups_gone(list(groups))


def test_reference_on_dbos_a_stranger_cannot_move_another_sessions_call() -> None:
    """Scenario 55 on real DBOS: session s1 names s2's call in a background request (twice);
    nothing moves, and s2's person approves it later."""
    outcome = run(Capturing(), scenario(
        "55-a-stranger-sends-another-sessions-call-to-the-background.toml", "30m"))
    failing = {k: v for k, v in verdicts(outcome).items() if v != "pass"}
    assert failing == {}, failing
    [background] = [r for r in outcome.results if r.checker == "background-honored"]
    assert background.valid is True and background.reached
