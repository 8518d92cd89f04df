"""Claimed invariants: a design is judged by what it promises.

An adapter says which invariants its design promises (`claims`); `durable-chaos run
--invariants a,b`, the pytest option `--chaos-invariants` and the ini key `chaos_invariants`
override it. The others are still judged, for the reader, and shown "not claimed" (CLI
summary, HTML report, JUnit as skipped with the reason); they never fail a run or its exit
status. A runtime that claims an invariant and breaks it still fails. An unknown name is a
one-line usage error naming the nearest valid one. The adapters are written outside the
package (tests/outside_adapters/lean_runtime.py).
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import harness.adapters.sim
import harness.report  # kept loaded across in-process pytester runs
from harness.adapters import claimed_invariants, load_adapter
from harness.checkers import ALL
from harness.checkers.base import Result
from harness.cli import exit_status, main
from harness.errors import UsageError
from harness.outcome import RunOutcome, SuiteOutcome
from harness.run import RunOptions, run_schedule
from harness.schedules.scenario_file import load_scenario

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = ROOT / "tests" / "outside_adapters"
# A new message while a turn waits on a person: the busy-rule bug starts a second turn.
BUSY = OUTSIDE / "busy.toml"
NAMES = [c.name for c in ALL]
assert harness.adapters.sim  # the simulator stays loaded for in-process pytester runs


@pytest.fixture
def outside(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(OUTSIDE)
    return OUTSIDE


def _run(spec: str, invariants: tuple[str, ...] | None = None) -> RunOutcome:
    return run_schedule(load_adapter(spec), load_scenario(BUSY),
                        RunOptions(adapter_spec=spec, report_dir=None, invariants=invariants))


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    return err


# ---------------------------------------------------------------------------- which claims


def test_the_override_beats_the_claims_which_beat_all() -> None:
    class Claims:
        name = "c"
        claims = ("busy-rule", "fencing")

    class NoClaims:
        name = "n"

    assert claimed_invariants(NoClaims(), None, NAMES) == tuple(NAMES)
    assert claimed_invariants(Claims(), None, NAMES) == ("busy-rule", "fencing")
    # In the design's order, whatever order they were given in.
    assert claimed_invariants(Claims(), ("liveness", "pinning-bound"), NAMES) == (
        "pinning-bound", "liveness")


def test_an_unknown_invariant_names_the_nearest_valid_one() -> None:
    class Typo:
        name = "typo"
        claims = ("pinning-bond",)

    with pytest.raises(UsageError, match=r"adapter 'typo': claims: unknown invariant "
                                         r"'pinning-bond'; did you mean 'pinning-bound'\?"):
        claimed_invariants(Typo(), None, NAMES)


# ---------------------------------------------------------------------------- one run


def test_an_unclaimed_violation_is_kept_apart_and_never_fails_the_run(outside: Path) -> None:
    outcome = _run("lean_runtime:busy_adapter")
    assert not outcome.failed and not outcome.unknown
    assert "busy-rule" not in {r.checker for r in outcome.results}
    [busy] = [r for r in outcome.unclaimed if r.checker == "busy-rule"]
    assert busy.valid is False
    assert "started at t=60.0m while turn s1.turn1" in busy.violations[0].message
    assert {r.checker for r in outcome.unclaimed} == {
        "busy-rule", "fencing", "access-rechecked", "conservative-recovery",
        "effect-authorized", "answer-fate", "effect-done", "hold-justified",
        "outcome-justified", "message-logged", "approval-asked", "context-kept",
        "turn-per-message", "background-honored", "cancel-honored", "turn-answered",
        "card-closed", "no-code-error", "malformed-refused", "result-told"}


def test_a_runtime_that_claims_the_busy_rule_and_breaks_it_fails(outside: Path) -> None:
    outcome = _run("lean_runtime:busy_claimed_adapter")
    assert outcome.failed
    assert [r.checker for r in outcome.results if r.valid is False] == ["busy-rule"]
    # --invariants turns a claim on for an adapter that does not make it.
    forced = _run("lean_runtime:busy_adapter", invariants=("busy-rule",))
    assert forced.failed and [r.checker for r in forced.results] == ["busy-rule"]


def test_an_unclaimed_unknown_does_not_make_the_suite_unknown() -> None:
    run = RunOutcome(name="r", adapter="a", seed=0, source="scenario",
                     results=(Result("liveness", True),), schedule_toml="",
                     replay_command="", unclaimed=(Result("busy-rule", None, note="?"),
                                                   Result("fencing", False)))
    assert not run.unknown and not run.failed
    suite = SuiteOutcome(adapters=("a",), seed=0, runs=(run,), wall_time=0.0)
    assert suite.violations == 0
    assert exit_status(suite) == 0


# ---------------------------------------------------------------------------- the CLI


def test_the_cli_exit_status_follows_the_claims(
    outside: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "--scenarios", str(BUSY), "--schedules", "0", "--quiet", "--report-dir"]
    assert main([*args, str(tmp_path / "a"), "--adapter", "lean_runtime:busy_adapter"]) == 0
    out = capsys.readouterr().out
    assert ("not claimed (judged, never failing the run): busy-rule, fencing, "
            "access-rechecked, conservative-recovery, effect-authorized, answer-fate, "
            "effect-done, hold-justified, outcome-justified, message-logged, "
            "approval-asked, context-kept, turn-per-message, background-honored, "
            "cancel-honored, turn-answered, card-closed, no-code-error, malformed-refused, "
            "result-told") in out
    assert "busy-rule (not claimed) would fail in 1 run(s), e.g. new-message-during-" in out

    assert main([*args, str(tmp_path / "b"), "--adapter",
                 "lean_runtime:busy_claimed_adapter"]) == 1
    assert "  busy-rule: 1 run(s), e.g. new-message-during-waiting-turn" in (
        capsys.readouterr().out)

    assert main([*args, str(tmp_path / "c"), "--adapter", "lean_runtime:busy_adapter",
                 "--invariants", "busy-rule,liveness"]) == 1
    out = capsys.readouterr().out
    assert "not claimed (judged, never failing the run): no-duplicate-effects, " \
           "pinning-bound, fencing, turn-outcome, access-rechecked, " \
           "conservative-recovery, effect-authorized, answer-fate, effect-done, " \
           "hold-justified, outcome-justified, message-logged, approval-asked, " \
           "context-kept, turn-per-message, background-honored, cancel-honored, " \
           "turn-answered, card-closed, no-code-error, malformed-refused, " \
           "result-told" in out


def test_a_replay_command_keeps_the_invariants_it_was_judged_by(
    outside: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shlex

    spec = "lean_runtime:busy_adapter"
    outcome = run_schedule(load_adapter(spec), load_scenario(BUSY),
                           RunOptions(adapter_spec=spec, report_dir=tmp_path / "r",
                                      invariants=("busy-rule",)))
    assert outcome.failed
    assert outcome.replay_command.endswith(f" replay --adapter-path {outside} --adapter {spec} "
                                           f"--invariants busy-rule {BUSY}")
    argv = shlex.split(outcome.replay_command)[1:]
    assert main([*argv, "--quiet", "--report-dir", str(tmp_path / "again")]) == 1
    assert "busy-rule: 1 run(s)" in capsys.readouterr().out


@pytest.mark.parametrize(("extra", "expected"), [
    (["--adapter", "lean_runtime:adapter", "--invariants", "busy-rul"],
     "durable-chaos: error: --invariants: unknown invariant 'busy-rul'; did you mean "
     "'busy-rule'?"),
    (["--adapter", "lean_runtime:adapter", "--invariants", " , "],
     "durable-chaos: error: --invariants: expected a comma list of invariant names"),
    (["--adapter", "lean_runtime:misspelled_adapter"],
     "durable-chaos: error: adapter 'lean-misspelled': claims: unknown invariant "
     "'busy-rul'; did you mean 'busy-rule'?"),
    # Claiming nothing would judge nothing, and exit 0: refused.
    (["--adapter", "lean_runtime:claims_nothing_adapter"],
     "durable-chaos: error: adapter 'lean-claims-nothing': claims: names no invariant, so a "
     "run would judge nothing"),
])
def test_an_unknown_invariant_is_exit_2_naming_the_nearest(
    outside: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str],
    expected: str,
) -> None:
    report = tmp_path / "r"
    assert main(["run", "--schedules", "0", "--report-dir", str(report), *extra]) == 2
    assert _one_line_error(capsys).startswith(expected)
    assert not report.exists()  # found before anything ran


def test_the_report_and_junit_show_not_claimed(outside: Path, tmp_path: Path) -> None:
    report = tmp_path / "r"
    assert main(["run", "--scenarios", str(BUSY), "--schedules", "0", "--quiet",
                 "--report-dir", str(report), "--adapter", "lean_runtime:busy_adapter",
                 "--adapter", "lean_runtime:busy_claimed_adapter"]) == 1
    page = (report / "index.html").read_text()
    cell = page.split('data-invariant="busy-rule" data-adapter="lean-busy-bug">', 1)[1]
    cell = cell.split("</td>", 1)[0]
    assert "not claimed" in cell and "would fail in 1 of 1 run" in cell
    claimed = page.split('data-invariant="busy-rule" data-adapter="lean-busy-bug-claimed">',
                         1)[1].split("</td>", 1)[0]
    assert "b-fail" in claimed
    assert "Not claimed (never fail the run)" in page

    root = ET.parse(report / "junit.xml").getroot()
    suites = {ts.get("name"): ts for ts in root.iter("testsuite")}
    case = _case(suites["lean-busy-bug"], "busy-rule")
    skipped = case.find("skipped")
    assert skipped is not None and case.find("failure") is None
    assert skipped.get("message", "").startswith(
        "not claimed: adapter lean-busy-bug does not claim this invariant")
    assert "it would fail: session s1: turn s1.turn2 started" in skipped.get("message", "")
    assert suites["lean-busy-bug"].get("failures") == "0"
    assert _case(suites["lean-busy-bug-claimed"], "busy-rule").find("failure") is not None


def _case(suite: Any, name: str) -> Any:
    [case] = [c for c in suite.iter("testcase") if c.get("name") == name]
    return case


# ---------------------------------------------------------------------------- the plugin


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    shutil.copy(OUTSIDE / "lean_runtime.py", pytester.path / "lean_runtime.py")
    shutil.copy(BUSY, pytester.path / "busy.toml")
    return pytester


def test_the_plugin_skips_generated_items_of_unclaimed_invariants(
    project: pytest.Pytester,
) -> None:
    project.makeini("[pytest]\npythonpath = .\n")
    result = project.runpytest_inprocess(
        "--chaos-adapter", "lean_runtime:adapter", "--chaos-scenarios=busy.toml",
        "--chaos-schedules", "2", "--chaos-seed", "1", "--chaos-report=out", "-rs")
    # The contract, the scenario and the 4 claimed generated items pass; the generated
    # items of the 17 unclaimed invariants are skipped with the reason.
    result.assert_outcomes(passed=6, skipped=20)
    result.stdout.fnmatch_lines(["SKIPPED [[]20[]] *: not claimed: adapter "
                                 "lean_runtime:adapter does not claim this invariant*"])
    root = ET.parse(project.path / "out" / "junit.xml").getroot()
    cases = [c for c in root.iter("testcase") if c.get("name") == "busy-rule"]
    assert cases and all(c.find("skipped") is not None for c in cases)
    assert root.get("failures") == "0"


def test_the_ini_key_makes_a_claim_and_the_item_fails(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\npythonpath = .\nchaos_invariants = busy-rule, liveness\n")
    result = project.runpytest_inprocess(
        "--chaos-adapter", "lean_runtime:busy_adapter", "--chaos-scenarios=busy.toml",
        "--chaos-schedules", "0")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*busy-rule: session s1: turn s1.turn2 started*"])


def test_the_plugin_names_the_nearest_invariant(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\npythonpath = .\n")
    result = project.runpytest_inprocess(
        "--chaos-adapter", "lean_runtime:adapter", "--chaos-invariants", "fencng")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--chaos-invariants on the command line: unknown invariant "
                                 "'fencng'; did you mean 'fencing'?*"])


def test_chaos_run_gives_unclaimed_results_too(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\npythonpath = .\nchaos_adapter = lean_runtime:busy_adapter\n"
                    "chaos_schedules = 0\nchaos_scenarios = none\n")
    project.makepyfile(test_mine="""
        def test_busy(chaos_run):
            run = chaos_run(open("busy.toml").read())
            assert not run.failed
            assert "busy-rule" in run.unclaimed and "busy-rule" not in run.results
            assert run["busy-rule"].valid is False
    """)
    result = project.runpytest_inprocess("-k", "test_busy")
    result.assert_outcomes(passed=1)
