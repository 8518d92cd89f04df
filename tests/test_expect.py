"""`[expect] fails = [...]`: a scenario that pins a known bug.

The scenario passes only when each named invariant is violated and every other one holds; an
expected failure that does not show fails the run, saying the bug may be fixed; the report
shows an expected failure as such; a misspelled invariant is exit 2 naming the file, the
field and the nearest name.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import harness.adapters.sim
import harness.conformance
import harness.exploration
import harness.fixtures
import harness.suite  # noqa: F401
from harness.cli import main
from harness.schedules.scenario_file import load_scenario

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
KNOWN_BUG = ROOT / "scenarios" / "known-bugs" / "naive-pins-a-release-for-the-whole-wait.toml"


def _with_expect(tmp_path: Path, expect: str, name: str = "pinned.toml") -> Path:
    """The known-bug scenario with its [expect] table replaced."""
    text = KNOWN_BUG.read_text(encoding="utf-8")
    head, _, rest = text.partition("[expect]\n")
    _, _, steps = rest.partition("\n\n")
    path = tmp_path / name
    path.write_text(f"{head}[expect]\n{expect}\n\n{steps}", encoding="utf-8")
    return path


def _run(*args: str) -> int:
    return main(["run", "--schedules", "0", "--quiet", *args])


def test_the_known_bug_of_naive_passes_as_an_expected_failure(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = _run("--adapter", "naive", "--scenarios", "builtin:known-bugs",
                "--report-dir", str(tmp_path))
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert "0 with violations" in out.out
    assert "expected failures ([expect] fails): 1" in out.out
    html = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert '<span class="badge b-xfail">expected failure</span>' in html
    assert "expected failure of pinning-bound ([expect] fails): deployment dep1" in html
    junit = (tmp_path / "junit.xml").read_text(encoding="utf-8")
    assert 'type="pytest.xfail"' in junit and "<failure" not in junit


def test_an_expected_failure_that_holds_fails_saying_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The reference hands the wait off: the bug the scenario pins is not there.
    code = _run("--adapter", "reference", "--scenarios", str(KNOWN_BUG),
                "--report-dir", str(tmp_path))
    out = capsys.readouterr().out
    assert code == 1
    assert ("pinning-bound: 1 run(s), e.g. naive-pins-a-release-for-the-whole-wait: held, "
            "but the scenario expects it to fail ([expect] fails)") in out
    assert "remove pinning-bound from [expect] fails" in out
    html = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert "pinning-bound held, but the scenario expects it to fail" in html
    junit = (tmp_path / "junit.xml").read_text(encoding="utf-8")
    assert '<failure message="pinning-bound held, but the scenario expects it to fail"' in junit


def test_only_the_named_invariant_may_fail(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Expecting busy-rule where naive breaks pinning-bound: the pinning violation is a real
    one, and the busy-rule expectation is unmet."""
    scenario = _with_expect(tmp_path, 'fails = ["busy-rule"]')
    code = _run("--adapter", "naive", "--scenarios", str(scenario),
                "--report-dir", str(tmp_path / "r"))
    out = capsys.readouterr().out
    assert code == 1
    assert "pinning-bound: 1 run(s), e.g. naive-pins-a-release-for-the-whole-wait: " \
           "deployment dep1" in out
    assert "busy-rule: 1 run(s), e.g. naive-pins-a-release-for-the-whole-wait: held" in out


def test_a_per_invariant_fail_is_a_note_and_fails_is_the_pin(tmp_path: Path) -> None:
    """`pinning-bound = "fail"` says what a demonstration shows (its run is red, as the
    Temporal and DBOS examples want); only `fails = [...]` turns the violation green."""
    note = load_scenario(_with_expect(tmp_path, 'pinning-bound = "fail"', "note.toml"))
    pin = load_scenario(_with_expect(tmp_path, 'fails = ["pinning-bound"]', "pin.toml"))
    assert note.expect == (("pinning-bound", "fail"),)
    assert pin.expect == (("pinning-bound", "fails"),)
    assert _run("--adapter", "naive", "--scenarios", str(tmp_path / "note.toml"),
                "--report-dir", str(tmp_path / "r1")) == 1
    assert _run("--adapter", "naive", "--scenarios", str(tmp_path / "pin.toml"),
                "--report-dir", str(tmp_path / "r2")) == 0
    # A saved schedule keeps the expectation, so its replay is judged the same way.
    saved = tmp_path / "saved.toml"
    saved.write_text(pin.to_toml(), encoding="utf-8")
    assert "fails = [\"pinning-bound\"]" in saved.read_text(encoding="utf-8")
    assert load_scenario(saved).expect == pin.expect


@pytest.mark.parametrize(("expect", "field", "hint"), [
    ('fails = ["busy-rules"]', "expect.fails", "did you mean 'busy-rule'?"),
    ('fails = ["pinning"]', "expect.fails", "did you mean 'pinning-bound'?"),
    ('busy_rule = "fail"', "expect.busy_rule", "did you mean 'busy-rule'?"),
    ('fails = []', "expect.fails", 'write fails = ["busy-rule"]'),
    ('fails = "busy-rule"', "expect.fails", 'write fails = ["busy-rule"]'),
    ('fails = ["busy-rule"]\nbusy-rule = "pass"', "expect.busy-rule", "keep one of the two"),
])
def test_a_bad_expectation_is_exit_2_naming_file_field_and_fix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], expect: str, field: str,
        hint: str) -> None:
    scenario = _with_expect(tmp_path, expect)
    assert _run("--scenarios", str(scenario), "--report-dir", str(tmp_path / "r")) == 2
    err = capsys.readouterr().err
    [line] = err.strip().splitlines()
    assert str(scenario) in line and f"field '{field}'" in line and hint in line
    assert "Traceback" not in err and not (tmp_path / "r").exists()


def test_under_pytest_the_known_bug_is_an_xfail(pytester: pytest.Pytester) -> None:
    """With an adapter written outside the package (examples/my_runtime, waiting in-call)."""
    shutil.copytree(ROOT / "examples" / "my_runtime", pytester.path / "my_runtime",
                    ignore=shutil.ignore_patterns("__pycache__"))
    pytester.makepyfile(mychaos="from my_runtime.adapter import MyRuntimeAdapter\n"
                        "def factory():\n    return MyRuntimeAdapter(hand_off=False)\n")
    pytester.syspathinsert()
    result = pytester.runpytest_inprocess("--chaos-adapter", "mychaos:factory",
                                          f"--chaos-scenarios={KNOWN_BUG}",
                                          "--chaos-schedules=0", "-m", "chaos", "-rx")
    result.assert_outcomes(passed=1, xfailed=1)
    result.stdout.fnmatch_lines(["*pinning-bound violated, as the scenario's [[]expect[]] "
                                 "fails says*"])
    fixed = pytester.runpytest_inprocess("--chaos-adapter", "reference",
                                         f"--chaos-scenarios={KNOWN_BUG}",
                                         "--chaos-schedules=0", "-m", "chaos")
    fixed.assert_outcomes(passed=1, failed=1)
    fixed.stdout.fnmatch_lines(["pinning-bound: held, but the scenario expects it to fail*"])
