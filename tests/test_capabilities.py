"""Optional capabilities: a step the runtime cannot take is skipped, named, and shown.

A runtime has the `Runtime` protocol and nothing else by obligation: background and cancel
are small protocols (`Backgroundable`, `Cancellable`) like the faults; the parts of the
harness's world it calls are declared (`world_endpoints`); the fault points it stops at are
declared (`points`). Each test pins one promise: what the harness then skips, where a reader
sees it (CLI summary, HTML report, JUnit, pytest), and that a runtime with everything still
skips nothing. The adapter is written outside the package (tests/outside_adapters).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import harness.adapters.sim
import harness.report  # kept loaded across in-process pytester runs
from harness.adapters import (
    Backgroundable,
    Cancellable,
    FaultPoints,
    RunContext,
    Runtime,
    lacking,
    load_adapter,
    world_endpoints,
)
from harness.conformance import check_adapter
from harness.errors import AdapterContractError, UsageError
from harness.history import History
from harness.run import RunOptions, run_schedule
from harness.schedules.scenario_file import load_scenario

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = ROOT / "tests" / "outside_adapters"
ALL_STEPS = OUTSIDE / "all_steps.toml"
# (step number, action, what the runtime lacks) for the lean runtime on all_steps.toml.
EXPECTED_SKIPS = [
    (1, "arm", "fault point 'threadlog.append.locked'"),
    (2, "service-fault", "world endpoint 'provider'"),
    (4, "revoke", "world endpoint 'identity'"),
    (5, "background", "Backgroundable"),
    (7, "cancel", "Cancellable"),
]


@pytest.fixture
def outside(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from the outside adapter's directory, as its user would."""
    monkeypatch.chdir(OUTSIDE)
    return OUTSIDE


def _run(spec: str, path: Path = ALL_STEPS) -> Any:
    return run_schedule(load_adapter(spec), load_scenario(path),
                        RunOptions(adapter_spec=spec, report_dir=None))


# ---------------------------------------------------------------------------- the protocols


class _Bare:
    """Only the Runtime protocol."""

    world: Any = None

    def now(self) -> float:
        return 0.0

    def advance(self, until: float) -> None: ...

    def send_message(self, session: str, message: dict[str, object]) -> None: ...

    def answer(self, tool_call: str, decision: str, user: str) -> None: ...

    def finish(self) -> None: ...

    def close(self) -> None: ...


def test_a_runtime_without_background_or_cancel_is_still_a_runtime() -> None:
    bare = _Bare()
    assert isinstance(bare, Runtime)
    assert not isinstance(bare, Backgroundable | Cancellable | FaultPoints)
    assert lacking(bare, "background") == "Backgroundable"
    assert lacking(bare, "cancel") == "Cancellable"
    assert lacking(bare, "message") is None and lacking(bare, "answer") is None


def test_world_endpoints_must_be_declared_and_spelled_right() -> None:
    bare = _Bare()
    assert world_endpoints(bare) == frozenset()
    # A service fault needs the endpoint of its own service.
    for service in ("provider", "email", "payments", "identity", "cards"):
        assert lacking(bare, "service-fault", service=service) == f"world endpoint {service!r}"
    assert lacking(bare, "revoke") == "world endpoint 'identity'"
    assert lacking(bare, "grant") == "world endpoint 'identity'"
    bare.world_endpoints = ("provider", "payments")  # type: ignore[attr-defined]
    assert lacking(bare, "service-fault", service="provider") is None
    assert lacking(bare, "service-fault", service="payments") is None
    assert lacking(bare, "service-fault", service="email") == "world endpoint 'email'"
    assert lacking(bare, "revoke") == "world endpoint 'identity'"
    bare.world_endpoints = ("providers",)  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match=r"world_endpoints: unknown endpoint 'providers'; "
                                         r"use some of provider, email, payments, identity, "
                                         r"cards"):
        world_endpoints(bare)


def test_fault_points_are_those_declared() -> None:
    bare = _Bare()
    assert lacking(bare, "arm", "effect.email.after_send") == "FaultPoints"
    bare.points = ("effect.email.after_send",)  # type: ignore[attr-defined]
    bare.arm = lambda point, action, duration, times: None  # type: ignore[attr-defined]
    assert isinstance(bare, FaultPoints)
    assert lacking(bare, "arm", "effect.email.after_send") is None
    assert lacking(bare, "arm", "tool.after_intent") == "fault point 'tool.after_intent'"


def test_the_simulator_runtime_lacks_nothing() -> None:
    runtime = harness.adapters.sim.SimRuntime(RunContext(seed=0, history=History()),
                                              load_adapter("reference").build)  # type: ignore[attr-defined]
    from contract.faultpoints import POINTS

    for action in ("background", "cancel", "revoke", "grant", "gc-pause",
                   "crash", "deploy", "clock-jump"):
        assert lacking(runtime, action) is None, action
    for service in ("provider", "email", "payments", "identity", "cards"):
        assert lacking(runtime, "service-fault", service=service) is None, service
    for point in POINTS:
        assert lacking(runtime, "arm", point) is None, point
    assert _run("reference").skipped_steps == ()


# ---------------------------------------------------------------------------- one run


def test_steps_the_runtime_lacks_are_skipped_and_recorded(outside: Path) -> None:
    outcome = _run("lean_runtime:adapter")
    assert [(s.step, s.action, s.lacks) for s in outcome.skipped_steps] == EXPECTED_SKIPS
    assert outcome.skipped_faults == ("arm", "service-fault")  # the two that are faults
    assert outcome.faults == {"arm": 1}  # injected: the arm of the declared point only
    notes = [n for n in outcome.step_notes if "skipped" in n]
    assert notes[3] == "step 5 (background at 2.0m, s1) skipped: the runtime lacks Backgroundable"
    assert not outcome.failed and not outcome.unknown


def test_a_skipped_step_is_not_applied_and_a_declared_point_is(outside: Path) -> None:
    from harness.fixtures import _Recording

    recording = _Recording(load_adapter("lean_runtime:adapter"))
    run_schedule(recording, load_scenario(ALL_STEPS),
                 RunOptions(adapter_spec="lean", report_dir=None))
    history = recording.history
    assert history is not None
    skipped = [(r.get("step"), r.get("action"), r.get("lacks"))
               for r in history.of_kind("step.skipped")]
    assert skipped == EXPECTED_SKIPS
    # None of them reached the runtime or the world.
    for kind in ("op.background", "op.cancel", "fault.service-fault", "service.fault",
                 "identity.revoked"):
        assert not history.of_kind(kind), kind
    # The declared point was armed and reached: the host crashed there.
    assert [r.get("point") for r in history.of_kind("fault.arm")] == [
        "effect.email.after_send"]
    assert any(r.get("point") == "effect.email.after_send"
               for r in history.of_kind("faultpoint.reached"))


def test_a_runtime_with_arm_but_no_points_breaks_the_contract(outside: Path) -> None:
    check_adapter(load_adapter("lean_runtime:adapter"))  # the lean runtime keeps it

    class NoPoints:
        def __init__(self, inner: Any) -> None:
            self._inner = inner
            self.world = inner.world

        def __getattr__(self, name: str) -> Any:
            if name == "points":
                raise AttributeError(name)
            return getattr(self._inner, name)

        def now(self) -> float:
            return float(self._inner.now())

        def advance(self, until: float) -> None:
            self._inner.advance(until)

        def send_message(self, session: str, message: dict[str, object]) -> None:
            self._inner.send_message(session, message)

        def answer(self, tool_call: str, decision: str, user: str) -> None:
            self._inner.answer(tool_call, decision, user)

        def finish(self) -> None:
            self._inner.finish()

        def close(self) -> None:
            self._inner.close()

        def arm(self, point: str, action: str, duration: float, times: int) -> None:
            self._inner.arm(point, action, duration, times)

    lean = load_adapter("lean_runtime:adapter")

    class Adapter:
        name, description, engine = "no-points", "arm() without points", "sim"

        def check_config(self) -> Any:
            return lean.check_config()

        def open(self, ctx: RunContext) -> Any:
            return NoPoints(lean.open(ctx))

    with pytest.raises(AdapterContractError, match=r"arm: the runtime has arm\(\) but no "
                                                   r"`points`.*declare the fault points"):
        check_adapter(Adapter())


# ---------------------------------------------------------------------------- where it shows


def test_the_cli_summary_report_and_junit_show_every_skipped_step(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    report = tmp_path / "r"
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--adapter", "lean_runtime:adapter",
         "--scenarios", str(ALL_STEPS), "--schedules", "0", "--report-dir", str(report),
         "--quiet"], cwd=OUTSIDE, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert ("skipped steps (the runtime lacks what they need): 1 arm (lacks fault point "
            "'threadlog.append.locked') in 1 run(s); 1 service-fault (lacks world endpoint "
            "'provider') in 1 run(s); 1 revoke (lacks world endpoint 'identity') in 1 run(s); "
            "1 background (lacks Backgroundable) in 1 run(s); 1 cancel (lacks Cancellable) "
            "in 1 run(s)") in out

    page = (report / "index.html").read_text()
    assert "Steps skipped (runtime lacks the capability)" in page
    assert "background (lacks Backgroundable)" in page
    assert "revoke (lacks world endpoint &#x27;identity&#x27;)" in page

    root = ET.parse(report / "junit.xml").getroot()
    [case] = [c for c in root.iter("testcase") if c.get("name") == "skipped steps"]
    skipped = case.find("skipped")
    assert skipped is not None
    message = skipped.get("message", "")
    for step, action, lacks in EXPECTED_SKIPS:
        assert f"step {step} ({action} at" in message and f"lacks {lacks}" in message


def test_the_pytest_plugin_reports_the_skipped_steps(pytester: pytest.Pytester) -> None:
    shutil.copy(OUTSIDE / "lean_runtime.py", pytester.path / "lean_runtime.py")
    shutil.copy(ALL_STEPS, pytester.path / "all_steps.toml")
    pytester.makeini("[pytest]\npythonpath = .\n")
    result = pytester.runpytest_inprocess(
        "--chaos-adapter", "lean_runtime:adapter", "--chaos-scenarios=all_steps.toml",
        "--chaos-schedules", "0", "--chaos-report=out", "-p", "no:randomly")
    result.assert_outcomes(passed=2)  # the contract and the scenario
    root = ET.parse(pytester.path / "out" / "junit.xml").getroot()
    [case] = [c for c in root.iter("testcase") if c.get("name") == "skipped steps"]
    skipped = case.find("skipped")
    assert skipped is not None and "lacks Backgroundable" in skipped.get("message", "")
    page = (pytester.path / "out" / "index.html").read_text()
    assert "cancel (lacks Cancellable)" in page


# ---------------------------------------------------------------------------- a real engine

DBOS_LACKS = """
# The DBOS example (examples/dbos_approval) has no background mode and no identity checks,
# and stops only at its delivery points; it does call the world's model provider.
name = "dbos-lacks"
horizon = "20s"
[[step]]
at = "0s"
do = "provider"
fault = "429"
times = 1
[[step]]
at = "0s"
do = "arm"
point = "tool.after_intent"
action = "crash"
[[step]]
at = "0s"
do = "message"
session = "s1"
text = "email bob"
tools = ["send_email"]
[[step]]
at = "2s"
do = "revoke"
user = "alice"
tool = "send_email"
[[step]]
at = "3s"
do = "background"
session = "s1"
[[step]]
at = "5s"
do = "answer"
session = "s1"
decision = "approve"
"""


@pytest.mark.real
def test_a_real_engine_example_skips_what_it_declares_it_lacks(tmp_path: Path) -> None:
    import importlib

    try:
        importlib.import_module("dbos")
    except ImportError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"dbos is not importable: {exc}; CI=true requires it "
                        "(pip install -e '.[dbos]')")
        pytest.skip(f"dbos is not importable: {exc} (pip install -e '.[dbos]')")
    from examples.dbos_approval.chaos import adapter
    from harness.fixtures import _Recording

    scenario = tmp_path / "dbos-lacks.toml"
    scenario.write_text(DBOS_LACKS)
    recording = _Recording(adapter)
    outcome = run_schedule(recording, load_scenario(scenario),
                           RunOptions(adapter_spec="examples.dbos_approval.chaos:adapter",
                                      report_dir=None))
    assert outcome.error is None, outcome.error
    assert [(s.action, s.lacks) for s in outcome.skipped_steps] == [
        ("arm", "fault point 'tool.after_intent'"),
        ("revoke", "world endpoint 'identity'"),
        ("background", "Backgroundable"),
    ]
    history = recording.history
    assert history is not None
    # The provider fault it declares was applied, and reached its model call.
    assert [r.get("fault") for r in history.of_kind("fault.service-fault")] == ["429"]
    assert history.of_kind("service.fault")


def test_a_misspelled_world_endpoint_stops_the_cli_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    (tmp_path / "typo_runtime.py").write_text(
        "from lean_runtime import LeanAdapter, LeanRuntime\n"
        "class TypoRuntime(LeanRuntime):\n"
        "    world_endpoints = ('providers',)\n"
        "class TypoAdapter(LeanAdapter):\n"
        "    def open(self, ctx):\n"
        "        return TypoRuntime(ctx, self.build)\n"
        "adapter = TypoAdapter(name='typo')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(OUTSIDE))
    code = main(["run", "--adapter", "typo_runtime:adapter", "--scenarios", str(ALL_STEPS),
                 "--schedules", "0", "--quiet", "--report-dir", str(tmp_path / "r")])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("durable-chaos: error: adapter 'typo_runtime:adapter' cannot run "
                          "here: open() failed: UsageError: TypoRuntime.world_endpoints: "
                          "unknown endpoint 'providers'; use some of provider, email, "
                          "payments, identity, cards"), err


def test_the_progress_line_of_a_run_with_skipped_steps_says_so(tmp_path: Path) -> None:
    # "ok" alone would read as every step taken and survived.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--adapter", "lean_runtime:adapter",
         "--scenarios", str(ALL_STEPS), "--schedules", "0", "--report-dir", str(tmp_path)],
        cwd=OUTSIDE, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f": ok ({len(EXPECTED_SKIPS)} step(s) skipped)  (0 violation(s) so far)" in (
        done.stdout + done.stderr)
