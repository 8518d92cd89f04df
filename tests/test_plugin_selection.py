"""Which items a pytest command line collects of the chaos suite (pytester, as a user runs it).

The rule (harness.settings.not_selected): with no path on the command line, or with
`--chaos`, the suite is collected; paths that are the project's own tests leave it out; the
scenarios directory (or a directory holding it, such as the rootdir) selects it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

# In-process runs restore sys.modules afterwards; importing the harness here keeps it loaded.
import harness.adapters.sim
import harness.conformance
import harness.exploration
import harness.fixtures
import harness.suite  # noqa: F401
import reference_impl.naive  # noqa: F401
from harness.checkers import ALL

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("01-answered-in-2-minutes.toml", "02-answered-after-3-days-across-redeploys.toml")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project whose ini turns the chaos suite on, with its own tests and scenarios."""
    pytester.makeini("[pytest]\nchaos_adapter = reference\nchaos_schedules = 2\n")
    tests = pytester.path / "tests"
    tests.mkdir()
    (tests / "test_one.py").write_text("def test_one():\n    assert True\n", encoding="utf-8")
    (tests / "test_two.py").write_text("def test_two():\n    assert True\n", encoding="utf-8")
    scenarios = pytester.path / "scenarios"
    scenarios.mkdir()
    for name in SCENARIOS:
        shutil.copy(ROOT / "scenarios" / name, scenarios / name)
    return pytester


def _collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest_inprocess("--collect-only", "-q", *args)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED), (
        result.stdout.str() + result.stderr.str())
    return [line for line in result.stdout.lines if "::" in line and " " not in line]


def _chaos(items: list[str]) -> list[str]:
    return [i for i in items if i.startswith("durable-chaos::")]


def test_one_test_file_runs_no_chaos_items(project: pytest.Pytester) -> None:
    result = project.runpytest_inprocess("tests/test_one.py")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["durable-chaos: chaos suite not collected: *--chaos*"])
    assert _chaos(_collected(project, "tests/test_one.py")) == []
    assert _chaos(_collected(project, "tests")) == []
    assert _chaos(_collected(project, "tests/test_one.py::test_one")) == []


def test_k_selects_just_that_scenario(project: pytest.Pytester) -> None:
    items = _collected(project, "-k", "01-answered")
    assert items == ["durable-chaos::reference::scenario[01-answered-in-2-minutes]"]
    result = project.runpytest_inprocess("-k", "01-answered")
    result.assert_outcomes(passed=1)


def test_the_explicit_ways_collect_the_whole_suite(project: pytest.Pytester) -> None:
    whole = [
        "durable-chaos::reference::contract",
        *(f"durable-chaos::reference::scenario[{Path(n).stem}]" for n in SCENARIOS),
    ]
    # No path: the project's tests, then the whole suite.
    items = _collected(project)
    assert items[:2] == ["tests/test_one.py::test_one", "tests/test_two.py::test_two"]
    chaos = _chaos(items)
    assert chaos[:3] == whole and len(chaos) == 3 + len(ALL)  # one generated item per invariant
    # --chaos with a path: that file and the whole suite.
    items = _collected(project, "tests/test_one.py", "--chaos")
    assert items[0] == "tests/test_one.py::test_one" and _chaos(items) == chaos
    # The scenarios directory, or the rootdir that holds it.
    assert _chaos(_collected(project, "scenarios")) == chaos
    assert _chaos(_collected(project, ".")) == chaos
    # -m chaos without a path: the suite alone.
    assert _collected(project, "-m", "chaos") == chaos


def test_under_xdist_workers_collect_what_the_controller_collects(project: pytest.Pytester) -> None:
    """Workers decide as the controller does (xdist keeps where the paths came from), so
    both collect the same items (else xdist stops: "Different tests were collected")."""
    project.makeini("[pytest]\nchaos_adapter = reference\ntestpaths = tests\n")
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2",
                                          "--chaos-schedules=0")
    result.assert_outcomes(passed=2 + 1 + len(SCENARIOS))
    alone = project.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2",
                                         "--chaos-schedules=0", "tests/test_one.py")
    alone.assert_outcomes(passed=1)
