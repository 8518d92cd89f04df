"""The pytest plugin, run as a user runs it: pytest in a temporary project (pytester).

Each test pins one promise of the plugin: silent without an adapter, the suite passes on the
reference and fails on the naive design with a replayable minimal schedule, one-line errors
that say where a bad value came from, the seed in the header and `--chaos-seed=last`, the
adapter contract checked first, the fixtures, and xdist.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

# In-process runs (runpytest_inprocess) restore sys.modules afterwards, so whatever a run
# imports is imported again by the next one; importing the harness here keeps it loaded.
import reference_impl.app
import reference_impl.naive  # noqa: F401
from harness.checkers import ALL
from harness.plugin import item_seed

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
ANSWERED_IN_2_MINUTES = "01-answered-in-2-minutes.toml"
ANSWERED_AFTER_3_DAYS = "02-answered-after-3-days-across-redeploys.toml"

USER_TEST = """
def test_mine():
    assert True
"""

BROKEN_ADAPTER = """
from harness.adapters import load_adapter

class DeafRuntime:
    '''Answers go nowhere: a card stays open forever.'''

    def __init__(self, inner):
        self._inner = inner
        self.world = inner.world

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def answer(self, tool_call, decision, user):
        pass

class DeafAdapter:
    name = "deaf"
    description = "drops every answer"
    engine = "sim"

    def __init__(self):
        self._inner = load_adapter("reference")

    def check_config(self):
        return self._inner.check_config()

    def open(self, ctx):
        return DeafRuntime(self._inner.open(ctx))

adapter = DeafAdapter()
"""


def _scenarios(pytester: pytest.Pytester, *names: str) -> Path:
    target = pytester.path / "scenarios"
    target.mkdir(exist_ok=True)
    for name in names:
        shutil.copy(SCENARIOS / name, target / name)
    return target


def _error_lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stderr.lines if line.strip()]


# ---------------------------------------------------------------------------- silence


def test_without_an_adapter_nothing_is_collected_or_imported(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TEST + """
import sys

def test_the_harness_was_not_imported():
    loaded = [m for m in ("harness.sim", "harness.run", "harness.adapters",
                          "harness.checkers", "reference_impl", "hypothesis", "freezegun")
              if m in sys.modules]
    assert loaded == []
""")
    # Not -v: Hypothesis's own plugin imports hypothesis to print its verbose header.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["collected 2 items"])
    result.stdout.no_fnmatch_line("durable-chaos:*")  # no header lines, no chaos items


def test_the_options_are_in_a_named_group_and_mirrored_by_ini_keys(
        pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--help")
    text = result.stdout.str()
    assert "durable-chaos:" in text
    for flag in ("--chaos-adapter", "--chaos-seed", "--chaos-schedules", "--chaos-report",
                 "--chaos-scenarios"):
        assert flag in text
        assert flag[2:].replace("-", "_") in text  # the ini key


def test_an_adapter_from_the_ini_file_turns_the_suite_on_and_none_turns_it_off(
        pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nchaos_adapter = reference\nchaos_schedules = 0\n")
    pytester.makepyfile(test_user=USER_TEST)
    on = pytester.runpytest_inprocess("--collect-only", "-q")
    on.stdout.fnmatch_lines(["test_user.py::test_mine", "durable-chaos::reference::contract"])
    off = pytester.runpytest_inprocess("--collect-only", "-q", "--chaos-adapter", "none")
    assert "durable-chaos" not in off.stdout.str()


# ---------------------------------------------------------------------------- the suite


def test_the_suite_passes_on_the_reference_with_the_seed_in_the_header(
        pytester: pytest.Pytester) -> None:
    _scenarios(pytester, ANSWERED_IN_2_MINUTES, ANSWERED_AFTER_3_DAYS)  # <rootdir>/scenarios
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_inprocess("--chaos-adapter", "reference", "--chaos-seed", "7",
                                          "--chaos-schedules", "2", "-v")
    # the user's test, the contract, 2 scenarios, one generated item per invariant
    result.assert_outcomes(passed=4 + len(ALL))
    result.stdout.fnmatch_lines([
        "durable-chaos: seed 7 (given; rerun with --chaos-seed=7)*",
        "durable-chaos: adapters reference; scenarios 2 from scenarios*",
        "*durable-chaos::reference::contract PASSED*",
        "*durable-chaos::reference::scenario[[]01-answered-in-2-minutes[]] PASSED*",
        "*durable-chaos::reference::generated[[]pinning-bound[]] PASSED*",
    ])
    chaos_only = pytester.runpytest_inprocess("--chaos-adapter", "reference",
                                              "--chaos-schedules", "0", "-m", "not chaos")
    chaos_only.assert_outcomes(passed=1)


def test_the_suite_fails_on_the_naive_design_with_a_minimal_replayable_schedule(
        pytester: pytest.Pytester) -> None:
    _scenarios(pytester, ANSWERED_AFTER_3_DAYS)
    result = pytester.runpytest_inprocess(
        "--chaos-adapter", "naive", "--chaos-seed", "3", "--chaos-schedules", "5",
        "-k", "contract or scenario or pinning-bound")
    result.assert_outcomes(passed=1, failed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = result.stdout.str()
    # The scenario item lists the violated invariants with their witness.
    result.stdout.fnmatch_lines([
        "*durable-chaos: naive scenario[[]02-answered-after-3-days-across-redeploys[]]*",
        "pinning-bound: *dep1*t=3.00d*",  # the checker's witness: the answer came on day 3
        "replay: *durable-chaos replay --adapter naive *02-answered-after-3-days*.toml",
    ])
    # The generated item reads "pinning-bound: <witness>", the minimal schedule, the replay.
    result.stdout.fnmatch_lines([
        "*durable-chaos: naive generated[[]pinning-bound[]]*",
        "pinning-bound: *suspended*",
        "minimal failing schedule (1 step(s)*",
        "[[][[]step[]][]]",
        'do = "message"',
        'tools = [[]"*"[]]',  # the approval tool that pins it (send_email or charge_card)
        "replay: save the schedule above as schedule.toml, then: *durable-chaos replay "
        "--adapter naive schedule.toml",
        'rerun this item: pytest --chaos-adapter naive --chaos-seed 3 --chaos-schedules 5 '
        '-m chaos -k "generated and pinning-bound"',
    ])
    assert "Traceback" not in text


def test_the_report_is_written_at_the_end_of_the_session(pytester: pytest.Pytester) -> None:
    # A fixed seed: with a fresh one, a few schedules may not reach the pinning window.
    result = pytester.runpytest_inprocess("--chaos-adapter", "naive", "--chaos-seed", "3",
                                          "--chaos-schedules", "5", "--chaos-report", "out",
                                          "-k", "pinning-bound")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["durable-chaos: report out/index.html, junit out/junit.xml"])
    assert (pytester.path / "out" / "index.html").stat().st_size > 0
    junit = (pytester.path / "out" / "junit.xml").read_text()
    assert "pinning-bound" in junit
    saved = list((pytester.path / "out" / "runs" / "naive").glob("*/schedule.toml"))
    assert [p.parent.name for p in saved] == ["pinning-bound-shrunk-generated-0"]
    # With the schedule saved, the replay command names its file.
    result.stdout.fnmatch_lines(["replay: *durable-chaos replay --adapter naive */out/runs/naive/"
                                 "pinning-bound-shrunk-generated-0/schedule.toml"])


# ---------------------------------------------------------------------------- errors


def test_an_unknown_adapter_is_a_one_line_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--chaos-adapter", "nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = _error_lines(result)
    assert len(lines) == 1, lines
    assert lines[0].startswith("ERROR: --chaos-adapter on the command line: unknown adapter "
                               "'nope'")


@pytest.mark.parametrize(("ini", "args", "expected"), [
    ("chaos_seed = abc", (), "ERROR: chaos_seed in the ini file tox.ini: expected an integer "
     "seed or 'last', got 'abc'"),
    ("", ("--chaos-seed", "-3"), "ERROR: --chaos-seed on the command line: expected a seed "
     ">= 0, got -3"),
    ("chaos_schedules = many", (), "ERROR: chaos_schedules in the ini file tox.ini: expected "
     "a whole number of schedules such as 25, got 'many'"),
    ("", ("-o", "chaos_schedules=-1"), "ERROR: chaos_schedules in -o/--override-ini on the "
     "command line: expected a number >= 0, got -1"),
    ("", ("--chaos-scenarios", "missing"), "ERROR: --chaos-scenarios on the command line: "
     "missing does not exist*"),
    ("addopts = --chaos-seed=soon", (), "ERROR: --chaos-seed in addopts of the ini file "
     "tox.ini: expected an integer seed or 'last', got 'soon'"),
])
def test_a_bad_value_names_where_it_came_from(pytester: pytest.Pytester, ini: str,
                                              args: tuple[str, ...], expected: str) -> None:
    pytester.makefile(".ini", tox=f"[pytest]\nchaos_adapter = reference\n{ini}\n")
    result = pytester.runpytest_inprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    lines = _error_lines(result)
    assert len(lines) == 1, lines
    result.stderr.fnmatch_lines([expected])


def test_a_malformed_scenario_file_is_a_usage_error_naming_the_file(
        pytester: pytest.Pytester) -> None:
    (pytester.path / "bad.toml").write_text('[[step]]\nat = "soon"\ndo = "message"\n')
    result = pytester.runpytest_inprocess("--chaos-adapter", "reference",
                                          "--chaos-scenarios", "bad.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --chaos-scenarios on the command line: *bad.toml: "
                                 "field 'step[[]0[]].at': *"])


# ---------------------------------------------------------------------------- seeds


def test_chaos_seed_last_reuses_the_previous_seed(pytester: pytest.Pytester) -> None:
    args = ("-p", "cacheprovider", "--chaos-adapter", "reference", "--chaos-schedules", "0",
            "--collect-only")
    first = pytester.runpytest_inprocess(*args, "--chaos-seed", "4242")
    first.stdout.fnmatch_lines(["durable-chaos: seed 4242 (given*"])
    again = pytester.runpytest_inprocess(*args, "--chaos-seed", "last")
    again.stdout.fnmatch_lines(["durable-chaos: seed 4242 (reused with --chaos-seed=last; "
                                "rerun with --chaos-seed=4242)*"])
    fresh = pytester.runpytest_inprocess(*args)
    fresh.stdout.fnmatch_lines(["durable-chaos: seed * (fresh; *"])


def test_chaos_seed_last_without_the_cache_says_so(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--chaos-adapter",
                                          "reference", "--chaos-seed", "last")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --chaos-seed on the command line: 'last' reads the "
                                 "previous seed from pytest's cache, which is disabled here*"])
    # With a seed given and no cache, the header says it could not be kept.
    header = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--chaos-adapter",
                                          "reference", "--chaos-seed", "5",
                                          "--chaos-schedules", "0", "--collect-only")
    header.stdout.fnmatch_lines(["durable-chaos: seed 5 *(not cached: the cache plugin is "
                                 "disabled*"])


def test_per_item_seeds_derive_from_the_session_seed_and_the_node_id() -> None:
    a = item_seed(7, "durable-chaos::reference::generated[pinning-bound]")
    assert a == item_seed(7, "durable-chaos::reference::generated[pinning-bound]")
    assert a != item_seed(7, "durable-chaos::reference::generated[fencing]")
    assert a != item_seed(8, "durable-chaos::reference::generated[pinning-bound]")
    assert 0 <= a < 2**32


# ---------------------------------------------------------------------------- adapters


def test_the_example_adapter_loads_by_module_attr_and_keeps_the_contract(
        pytester: pytest.Pytester) -> None:
    shutil.copytree(ROOT / "examples" / "my_runtime", pytester.path / "my_runtime",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "examples" / "test_my_runtime.py", pytester.path)
    pytester.makeini("[pytest]\npythonpath = .\n")
    result = pytester.runpytest_inprocess(
        "--chaos-adapter", "my_runtime:adapter_with_handoff", "--chaos-schedules", "0",
        "--chaos-scenarios=none", "-v")
    # The example's own chaos tests (written with the fixtures) and the contract.
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines([
        "*test_my_runtime.py::test_nothing_stays_pinned_across_a_three_day_wait PASSED*",
        "*durable-chaos::my_runtime:adapter_with_handoff::contract PASSED*",
    ])


def test_a_broken_adapter_fails_the_contract_before_the_chaos(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(broken=BROKEN_ADAPTER)
    pytester.syspathinsert()
    result = pytester.runpytest_inprocess("--chaos-adapter", "broken:adapter",
                                          "--chaos-schedules", "1", "-k",
                                          "contract or pinning-bound", "-rs")
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "*durable-chaos: broken:adapter contract*",
        "AdapterContractError: adapter 'deaf': message and answer: answering the open card "
        "contract-s1.turn1.t1 did not end turn contract-s1.turn1 *",
        "SKIPPED * adapter broken:adapter breaks the adapter contract (see "
        "durable-chaos::broken:adapter::contract)",
    ])


# ---------------------------------------------------------------------------- fixtures


def test_the_fixtures_run_schedules_and_drive_a_runtime(pytester: pytest.Pytester) -> None:
    _scenarios(pytester, ANSWERED_IN_2_MINUTES)
    pytester.makepyfile(test_fixtures=f"""
from harness.schedules.model import Schedule, Step
from harness.adapters import Runtime

SCENARIO = {str(SCENARIOS / ANSWERED_IN_2_MINUTES)!r}
TOML = '''
    [[step]]
    at = "0s"
    do = "message"
    session = "s1"
    tools = ["send_email"]

    [[step]]
    at = "3d"
    do = "answer"
    session = "s1"
'''

def test_chaos_run_takes_text_paths_and_schedules(chaos_run, chaos_adapter_spec):
    by_text = chaos_run(TOML)
    by_path = chaos_run(SCENARIO)
    step = Step(0.0, "message", (("session", "s1"), ("text", "hi"), ("tools", []),
                                 ("user", "alice")))
    by_schedule = chaos_run(Schedule("one", (step,)))
    for run in (by_text, by_path, by_schedule):
        assert run.outcome.adapter == chaos_adapter_spec
        assert run.history.of_kind("run.end")
        assert set(run.results) >= {{"pinning-bound", "liveness"}}
    assert by_text["pinning-bound"].valid is (chaos_adapter_spec == "reference")
    assert ("pinning-bound" in by_text.violated) is (chaos_adapter_spec == "naive")

def test_runtime_world_and_clock(chaos_adapter, chaos_runtime, chaos_world, chaos_clock,
                                 chaos_history):
    assert isinstance(chaos_runtime, Runtime)
    assert chaos_world is chaos_runtime.world
    chaos_runtime.send_message("s1", {{"message_id": "s1.m1", "text": "hi", "user": "alice",
                                      "plan": ["send_email"]}})
    assert chaos_clock.advance(90) == 90.0
    [card] = chaos_world.cards.open_cards("s1")
    chaos_runtime.answer(card.tool_call, "approve", "alice")
    chaos_clock.advance_to(200)
    assert chaos_clock.now() == 200.0
    assert [r.session for r in chaos_history.of_kind("turn.ended")] == ["s1"]

SEEDS = {{}}

def test_seed_a(chaos_seed):
    SEEDS["a"] = chaos_seed

def test_seed_b(chaos_seed):
    SEEDS["b"] = chaos_seed
    assert SEEDS["a"] != SEEDS["b"]
    print("seeds", SEEDS["a"], SEEDS["b"])
""")
    args = ("--chaos-adapter", "reference,naive", "--chaos-seed", "11",
            "--chaos-schedules", "0", "-m", "not chaos", "-v", "-s")
    result = pytester.runpytest_inprocess(*args)
    result.assert_outcomes(passed=6)  # two tests per adapter, two seed tests
    result.stdout.fnmatch_lines([
        "*test_chaos_run_takes_text_paths_and_schedules[[]reference[]] PASSED*",
        "*test_chaos_run_takes_text_paths_and_schedules[[]naive[]] PASSED*",
    ])
    seeds = [line for line in result.stdout.lines if "seeds" in line]
    again = pytester.runpytest_inprocess(*args)
    assert seeds == [line for line in again.stdout.lines if "seeds" in line]


# ---------------------------------------------------------------------------- xdist


def test_under_xdist_workers_share_the_seed_and_the_report_has_every_run(
        pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", "2", "--chaos-adapter", "reference",
        "--chaos-seed", "9", "--chaos-schedules", "1", "--chaos-scenarios", "none",
        "--chaos-report", "out")
    result.assert_outcomes(passed=2 + len(ALL))
    result.stdout.fnmatch_lines(["durable-chaos: seed 9 *", "durable-chaos: report out/*"])
    junit = (pytester.path / "out" / "junit.xml").read_text()
    # One generated schedule per invariant item, run in either worker, all in the report.
    assert junit.count("<testcase") >= 8


# ---------------------------------------------------------------------------- hangs

REAL_ADAPTER = """
import threading
import time
from pathlib import Path

from harness.adapters import load_adapter

class WallClockRuntime:
    '''A user's real-engine runtime: it waits for its engine by the wall clock.'''

    def __init__(self, inner, block):
        self._inner = inner
        self._block = block
        self.world = inner.world

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def advance(self, until):
        if self._block is not None and until > self._block:
            threading.Event().wait()  # an engine that never answers
        deadline = time.monotonic() + 0.001
        while time.monotonic() < deadline:  # hangs forever under a frozen clock
            pass
        self._inner.advance(until)

    def close(self):
        Path("closed.txt").write_text("closed")
        self._inner.close()

class RealAdapter:
    name = "wall-clock"
    description = "a real engine's adapter that reads time.monotonic()"
    engine = "real"

    def __init__(self, block=None):
        self._inner = load_adapter("reference")
        self._block = block

    def check_config(self):
        return self._inner.check_config()

    def open(self, ctx):
        return WallClockRuntime(self._inner.open(ctx), self._block)

adapter = RealAdapter()
blocked = RealAdapter(block=-1.0)  # from the start
blocked_late = RealAdapter(block=86400.0)  # once a run waits past a day
"""


def test_a_real_engines_adapter_runs_on_the_real_clock(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(real_adapter=REAL_ADAPTER)
    pytester.syspathinsert()
    _scenarios(pytester, ANSWERED_IN_2_MINUTES)
    # The limit only keeps a regression from hanging: under a frozen clock the item would
    # fail as "timed out" instead of passing.
    result = pytester.runpytest_inprocess("--chaos-adapter", "real_adapter:adapter",
                                          "--chaos-schedules", "0", "--chaos-run-timeout",
                                          "30", "-k", "scenario")
    result.assert_outcomes(passed=1)


def test_a_run_blocked_in_advance_ends_at_the_ini_timeout_and_its_runtime_is_closed(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(real_adapter=REAL_ADAPTER)
    pytester.makeini("[pytest]\nchaos_run_timeout = 0.5\n")
    pytester.syspathinsert()
    _scenarios(pytester, ANSWERED_IN_2_MINUTES)
    result = pytester.runpytest_inprocess("--chaos-adapter", "real_adapter:blocked_late",
                                          "--chaos-schedules", "0")
    result.assert_outcomes(passed=1, failed=1)  # the contract waits less than a day
    result.stdout.fnmatch_lines(["*unknown: the adapter crashed: timed out: the run passed "
                                 "its wall-clock limit of 0.5s*"])
    assert (pytester.path / "closed.txt").exists()


def test_a_contract_check_blocked_in_advance_fails_at_the_timeout(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(real_adapter=REAL_ADAPTER)
    pytester.syspathinsert()
    result = pytester.runpytest_inprocess("--chaos-adapter", "real_adapter:blocked",
                                          "--chaos-schedules", "0", "--chaos-run-timeout",
                                          "0.5", "--chaos-scenarios", "none")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*adapter 'wall-clock': the contract check passed the "
                                 "wall-clock limit of 0.5s*"])
    assert (pytester.path / "closed.txt").exists()


def test_a_bad_run_timeout_names_where_it_came_from(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--chaos-adapter", "reference",
                                          "--chaos-run-timeout", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert any("--chaos-run-timeout on the command line: expected a positive duration" in line
               for line in _error_lines(result))


def test_an_adapter_that_cannot_run_here_is_a_usage_error_before_any_item(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(missing=BROKEN_ADAPTER + """
from harness.errors import ComponentUnavailable

def _preflight(self):
    raise ComponentUnavailable("engine-server not found; run `make engine`")

DeafAdapter.preflight = _preflight
""")
    pytester.syspathinsert()
    result = pytester.runpytest_inprocess("--chaos-adapter", "missing:adapter")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert _error_lines(result) == [
        "ERROR: --chaos-adapter on the command line: adapter 'missing:adapter' cannot run "
        "here: engine-server not found; run `make engine`"]
