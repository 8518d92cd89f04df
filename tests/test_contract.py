"""The contract package: the one source of truth between a runtime and the harness."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from contract.records import (
    FIELDS,
    JUDGED_ON,
    KINDS,
    RECORD_FIELDS,
    SCHEDULE_ACTIONS,
    bad_value,
    unknown_kind,
)
from harness.errors import RecordError
from harness.history import History

ROOT = Path(__file__).resolve().parent.parent

# The harness's core: everything that judges, drives or reports a run without running the
# reference implementation itself. Adapters that run the reference (adapters/sim.py,
# adapters/restate.py) import it inside functions, so importing them loads none of it either.
CORE = (
    "harness", "harness.adapters", "harness.adapters.base", "harness.adapters.sim",
    "harness.adapters.restate", "harness.checkers", "harness.cli", "harness.conformance",
    "harness.exploration", "harness.fanout", "harness.history", "harness.observers",
    "harness.plugin", "harness.report", "harness.report.html", "harness.report.timeline",
    "harness.run", "harness.schedules.generate", "harness.schedules.library",
    "harness.schedules.scenario_file", "harness.sim", "harness.suite", "harness.world",
    "harness.world_server",
)


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module or "")
    return names


def test_importing_the_harness_core_loads_no_reference_implementation() -> None:
    program = (
        "import importlib, sys\n"
        f"for name in {CORE!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'reference_impl'))\n"
        "print('contract.ports' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    loaded, contract = done.stdout.splitlines()
    assert loaded == "[]"
    assert contract == "True"  # the harness does use the contract


def test_the_contract_imports_neither_the_harness_nor_the_reference() -> None:
    for path in sorted((ROOT / "contract").glob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            assert top not in ("harness", "reference_impl"), (path, name)


def test_no_reference_module_only_re_exports_the_contract() -> None:
    # The contract's names have one home: a module under reference_impl/ that defined nothing
    # and re-exported contract names (the old binding.py, ports.py, faultpoints.py) would be a
    # second import path for the same object.
    for path in sorted((ROOT / "reference_impl").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        body = ast.parse(path.read_text(encoding="utf-8")).body
        defines = [node for node in body
                   if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                   or (isinstance(node, (ast.Assign, ast.AnnAssign))
                       and "__all__" not in ast.unparse(node))]
        assert defines, f"{path} only re-exports"
    for gone in ("binding", "ports", "faultpoints"):
        assert not (ROOT / "reference_impl" / f"{gone}.py").exists()


def test_a_reference_module_exports_only_what_it_defines() -> None:
    from contract import threadlog
    from reference_impl import threadlog as reference_threadlog

    assert reference_threadlog.__all__ == ["InMemoryThreadLogStore", "ThreadLog"]
    assert not set(reference_threadlog.__all__) & set(threadlog.__all__)


def test_one_fault_point_hook_for_the_process() -> None:
    import asyncio

    from contract import faultpoints

    reached: list[str] = []
    previous = faultpoints.install(lambda name: reached.append(name))
    try:
        asyncio.run(faultpoints.reach("tool.after_intent"))
    finally:
        assert faultpoints.install(previous) is not None
    assert reached == ["tool.after_intent"]


# ------------------------------------------------------------------ the record vocabulary

_KIND = re.compile(r"[a-z_]+\.[a-z_-]+")
CHECKERS = ROOT / "harness" / "checkers"


def _kind_literals(path: Path) -> set[str]:
    """Every string constant of the module that is shaped like a record kind."""
    return {node.value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and _KIND.fullmatch(node.value)}


def test_every_kind_a_checker_reads_is_in_its_judged_on_and_in_the_vocabulary() -> None:
    from harness.checkers import ALL
    from harness.checkers._common import FAULT_KINDS

    shared = _kind_literals(CHECKERS / "_common.py") | _kind_literals(CHECKERS / "base.py")
    assert shared - set(KINDS) == set(), "a shared checker helper reads a kind outside it"
    for checker in ALL:
        path = Path(sys.modules[type(checker).__module__].__file__ or "")
        source = path.read_text(encoding="utf-8")
        reads = _kind_literals(path)
        if "Faults" in source or "FAULT_KINDS" in source:
            reads |= FAULT_KINDS
        if "run_end" in source:
            reads.add("run.end")
        reads.add("clock.latency")  # every checker's tolerance (checkers.base.measured)
        judged = {reading.kind for reading in checker.judged_on}
        assert checker.judged_on == JUDGED_ON[checker.name]
        assert reads - set(KINDS) == set(), (checker.name, "reads a kind outside the vocabulary")
        assert reads - judged == set(), (checker.name, "reads a kind not in its judged_on")
        assert judged - set(KINDS) == set(), checker.name
    assert set(JUDGED_ON) == {c.name for c in ALL}


def test_every_field_of_the_vocabulary_means_something() -> None:
    names = set(FIELDS) | set(RECORD_FIELDS)
    for kind in KINDS.values():
        # Optional fields may be engine detail; required, expected and judged ones are
        # described, and a value set belongs to a field of the kind.
        assert not {f for f in kind.required + kind.expected if f not in names}, kind.name
        assert all(field in kind.required + kind.optional + kind.expected
                   for field, _ in kind.values), kind.name
    for name, readings in JUDGED_ON.items():
        for reading in readings:
            assert set(reading.fields) <= names, (name, reading)


def test_a_skipped_step_of_every_schedule_action_has_a_kind() -> None:
    from harness.schedules.model import ACTIONS

    assert set(SCHEDULE_ACTIONS) == set(ACTIONS)
    assert {f"fault.{action}" for action in ACTIONS} <= set(KINDS)


def test_every_kind_the_harness_records_by_name_is_in_the_vocabulary() -> None:
    # `history.add("kind", ...)` anywhere in the harness: the vocabulary's kinds, or an
    # adapter's own namespace (restate.*, network.*), never a closed namespace's unknown kind.
    added = re.compile(r"""\.add\(\s*["']([a-z_]+\.[a-z_.-]+|[a-z_]+)["']""")
    for path in sorted((ROOT / "harness").rglob("*.py")):
        for kind in added.findall(path.read_text(encoding="utf-8")):
            assert unknown_kind(kind) is None, (path, kind)


def test_the_observation_table_is_a_view_of_the_vocabulary() -> None:
    from contract.ports import EVENTS

    assert {k.name: k.promised for k in KINDS.values() if k.source == "runtime"} == EVENTS
    assert KINDS["tool.result"].value_set("outcome") == (
        "answered", "denied", "expired", "ended_by_message", "background", "rejected_access",
        "held", "completed", "cancelled")
    assert KINDS["turn.ended"].value_set("reason") == ("completed", "steered", "cancelled",
                                                       "held")


# ------------------------------------------------------------------ appending a bad record


def test_an_unknown_kind_fails_at_once_naming_the_nearest_kind() -> None:
    history = History()
    with pytest.raises(RecordError, match=r"unknown record kind 'tool.reslt': did you mean "
                                          r"'tool\.result'\?"):
        history.add("tool.reslt", session="s1", turn="t1", tool_call="c1",
                    data={"outcome": "answered"})
    with pytest.raises(RecordError, match="unknown record kind 'sendd'"):
        history.add("sendd")
    assert len(history) == 0  # nothing half-appended


def test_a_missing_required_field_fails_at_once_naming_it() -> None:
    history = History()
    with pytest.raises(RecordError, match=r"record 'tool.result' lacks required field "
                                          r"'outcome' \(how a tool call"):
        history.add("tool.result", session="s1", turn="t1", tool_call="c1")
    with pytest.raises(RecordError, match="lacks required field 'deployment'"):
        history.add("invocation.started", invocation="inv1", deployment=None)
    assert len(history) == 0


def test_a_field_may_sit_in_its_slot_or_in_data_and_own_namespaces_pass() -> None:
    history = History()
    history.add("tool.result", session="s1", turn="t1", tool_call="c1",
                data={"outcome": "answered"})
    history.add("tool.result", data={"session": "s1", "turn": "t1", "tool_call": "c2",
                                     "outcome": "denied"})
    history.add("myengine.started", data={"anything": 1})  # an adapter's own diagnostics
    assert [r.kind for r in history] == ["tool.result", "tool.result", "myengine.started"]


# ------------------------------------------------------------ an outside adapter's misspelling

# Written the way a user writes an adapter for their own engine (outside this package, public
# API only): it records its engine's invocation starts by hand, and misspells the kind.
TYPO_ADAPTER = '''
from dataclasses import dataclass

from harness.adapters.base import RunContext
from harness.adapters.sim import SimRuntime
from harness.checkers.base import CheckConfig
from reference_impl.app import build_app


class TypoRuntime(SimRuntime):
    def send_message(self, session, message):
        super().send_message(session, message)
        self.history.add("invocation.startd", invocation=f"mine-{session}",
                         deployment="dep1")


@dataclass(frozen=True)
class TypoAdapter:
    name: str = "typo"
    description: str = "my engine, recording one kind misspelt"
    engine: str = "sim"

    def check_config(self):
        return CheckConfig()

    def open(self, ctx: RunContext):
        return TypoRuntime(ctx, build_app)


ADAPTER = TypoAdapter()
'''


def test_conformance_reports_an_outside_adapters_misspelt_kind_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import AdapterContractError, check_adapter, load_adapter

    (tmp_path / "typo_adapter.py").write_text(TYPO_ADAPTER, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AdapterContractError) as failure:
        check_adapter(load_adapter("typo_adapter:ADAPTER"))
    text = str(failure.value)
    # At the first message, the call that appended it, naming the nearest kind.
    assert text.startswith("adapter 'typo': message and answer: send_message('contract-s1', "
                           "...) appended a record the vocabulary refuses: unknown record kind "
                           "'invocation.startd': did you mean 'invocation.started'?"), text
    sys.modules.pop("typo_adapter", None)


MISSPELT_OUTCOME = '''
from dataclasses import dataclass

from harness.adapters.base import RunContext
from harness.adapters.sim import SimRuntime
from harness.checkers.base import CheckConfig
from reference_impl.app import build_app


class MyRuntime(SimRuntime):
    def finish(self):
        super().finish()
        # What my engine says about the last card, written by hand, with a typo in the value.
        self.history.add("tool.result", session="mine", turn="mine.1", tool_call="mine.1.t1",
                         data={"event_id": "mine.1.t1.result", "outcome": "answerd"})


@dataclass(frozen=True)
class MyAdapter:
    name: str = "mine"
    description: str = "my engine"
    engine: str = "sim"

    def check_config(self):
        return CheckConfig()

    def open(self, ctx: RunContext):
        return MyRuntime(ctx, build_app)


ADAPTER = MyAdapter()
'''


def test_conformance_names_a_value_outside_a_closed_value_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import AdapterContractError, check_adapter, load_adapter

    (tmp_path / "misspelt_outcome.py").write_text(MISSPELT_OUTCOME, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AdapterContractError, match=r"adapter 'mine': history: record #\d+ .*"
                       r"tool.result .*: record 'tool.result' has outcome='answerd' \(did you "
                       r"mean 'answered'\?\), which is not one of answered, denied"):
        check_adapter(load_adapter("misspelt_outcome:ADAPTER"))
    sys.modules.pop("misspelt_outcome", None)
    # An open value set takes words of the engine's own.
    assert bad_value("turn.ended", {}, {"reason": "terminated"}) is None
    assert bad_value("tool.rerun", {}, {"access": "granted"}) is None


def test_a_run_of_an_adapter_appending_a_bad_record_is_unknown_with_the_reason(
        tmp_path: Path) -> None:
    (tmp_path / "typo_adapter.py").write_text(TYPO_ADAPTER, encoding="utf-8")
    scenario = ROOT / "scenarios" / "01-answered-in-2-minutes.toml"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "durable-chaos"), "run", "--adapter",
         "typo_adapter:ADAPTER", "--scenarios", str(scenario), "--schedules", "0", "--quiet",
         "--workers", "1", "--report-dir", str(tmp_path / "reports")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 3, out  # could not judge
    assert ("RecordError: unknown record kind 'invocation.startd': did you mean "
            "'invocation.started'?") in out, out


# ------------------------------------------------------------------ docs/events.md


def test_docs_events_md_is_generated_from_the_contract_and_not_stale() -> None:
    from contract.docs import COMMAND, render

    committed = (ROOT / "docs" / "events.md").read_text(encoding="utf-8")
    assert committed == render(), f"docs/events.md is stale: run `{COMMAND}`"
    assert COMMAND in committed.splitlines()[2]  # the command is said at the top
    # What the module writes to stdout is the page.
    done = subprocess.run([sys.executable, "-m", "contract.docs"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout == committed


def test_every_kind_a_checker_reads_is_in_docs_events_md_and_the_docs_link_it() -> None:
    page = (ROOT / "docs" / "events.md").read_text(encoding="utf-8")
    for name, readings in JUDGED_ON.items():
        assert f"### `{name}`" in page
        for reading in readings:
            assert f"| `{reading.kind}` |" in page, reading.kind
    for doc in ("README.md", "docs/observers.md"):
        text = (ROOT / doc).read_text(encoding="utf-8")
        assert "events.md" in text, doc
    # docs/ stands alone: no page points outside the repository's own files.
    for page_path in sorted((ROOT / "docs").glob("*.md")):
        assert "DESIGN.md" not in page_path.read_text(encoding="utf-8"), page_path


# ------------------------------------------------------------------ time scaling


def test_a_time_scale_converts_both_ways_and_refuses_a_bad_factor() -> None:
    from harness.errors import ConfigError
    from harness.scaling import TimeScale

    scale = TimeScale(10.0)
    assert scale.real(60.0) == 6.0 and scale.scenario(6.0) == 60.0
    assert scale.scenario(scale.real(8 * 86400.0)) == 8 * 86400.0
    for bad in (0, -1.0, float("inf"), float("nan"), "10", True):
        with pytest.raises(ConfigError, match=r"Expected a finite number > 0 of scenario "
                                              r"seconds per real second but got "
                                              r"per_real_second="):
            TimeScale(bad)  # type: ignore[arg-type]


def test_a_scaled_clock_reads_scenario_time_and_sleeps_until_it_ticking() -> None:
    from harness.scaling import ScaledClock, TimeScale

    real = [100.0]  # an injected monotonic clock: tests never wait on the real one
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        real[0] += seconds

    ticks: list[float] = []
    clock = ScaledClock(TimeScale(10.0), monotonic=lambda: real[0], sleep=sleep)
    real[0] += 5.0  # start-up is not scenario time
    clock.start()
    assert clock.now() == 0.0
    clock.sleep_until(3.0, tick=lambda: ticks.append(clock.now()))
    assert clock.now() == pytest.approx(3.0) and clock.real_elapsed() == pytest.approx(0.3)
    # Never more than `step` real seconds between two ticks.
    assert max(slept) <= 0.05 and len(ticks) == len(slept) >= 6
    clock.sleep_until(1.0)  # already past: returns at once
    assert clock.now() == pytest.approx(3.0)


def test_importing_the_scaling_module_loads_no_engine_and_no_extra() -> None:
    program = ("import sys, harness.scaling\n"
               "heavy = ('httpx', 'psycopg', 'temporalio', 'dbos', 'restate', 'toxiproxy',\n"
               "         'hypercorn', 'ray', 'docker', 'reference_impl', 'harness.adapters')\n"
               "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy\n"
               "             or m.startswith('harness.adapters')))\n")
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_a_witness_of_a_run_on_a_real_engine_gives_real_seconds_beside_scenario_time(
        tmp_path: Path) -> None:
    from harness import RunOptions, load_scenario, run_schedule
    from harness.adapters.base import RunContext
    from harness.adapters.sim import SimRuntime
    from harness.checkers.base import CheckConfig
    from harness.history import History
    from reference_impl.naive import build_naive_app

    class RealNaive:  # an adapter whose engine is real (here driven over the simulator)
        name, description, engine = "real-naive", "the naive design, engine real", "real"

        def check_config(self) -> CheckConfig:
            return CheckConfig()

        def open(self, ctx: RunContext) -> SimRuntime:
            return SimRuntime(ctx, build_naive_app)

    schedule = load_scenario(ROOT / "scenarios" / "02-answered-after-3-days-across-redeploys.toml")
    outcome = run_schedule(RealNaive(), schedule, RunOptions(report_dir=tmp_path))
    [pinning] = [r for r in outcome.results if r.checker == "pinning-bound"]
    assert pinning.valid is False and outcome.history_path is not None
    # The records a witness cites (listed under it in the report and junit) carry both times.
    history = History.load(outcome.history_path)
    cited = [history[i].describe() for v in pinning.violations for i in v.records]
    assert cited and all(re.match(r"#\d+ t=[\d.]+[smhd] \(real [\d.]+s\) ", line)
                         for line in cited), cited
    assert all(0.0 <= r.wall < 600 for r in history if r.wall is not None)  # since the start
    # On the simulator a record has scenario time only: histories stay byte-equal.
    assert "(real" not in History().add("run.end", time=5.0).describe()
    real = History(wall=lambda: 1.25)
    assert real.add("run.end", time=300.0).describe() == "#0 t=5.0m (real 1.25s) run.end"


def test_the_thresholds_have_one_home_that_the_runtime_and_the_checkers_default_from() -> None:
    from contract.ports import Config
    from contract.thresholds import HAND_OFF_AFTER, MAX_WAIT
    from harness.checkers.base import CheckConfig

    assert (HAND_OFF_AFTER, MAX_WAIT) == (300.0, 8 * 86400.0)  # 5 minutes, 8 days
    # Each default is the contract's name, not a second literal that could drift from it.
    for path, cls in ((ROOT / "contract" / "ports.py", "Config"),
                      (ROOT / "contract" / "thresholds.py", "CheckConfig")):
        [node] = [n for n in ast.parse(path.read_text(encoding="utf-8")).body
                  if isinstance(n, ast.ClassDef) and n.name == cls]
        defaults = {f.target.id: ast.unparse(f.value) for f in node.body
                    if isinstance(f, ast.AnnAssign) and isinstance(f.target, ast.Name)
                    and f.value is not None}
        assert defaults["hand_off_after"] == "HAND_OFF_AFTER", (cls, defaults)
        assert defaults["max_wait"] == "MAX_WAIT", (cls, defaults)
    assert (Config().hand_off_after, Config().max_wait) == (
        CheckConfig().hand_off_after, CheckConfig().max_wait)


def test_the_invariant_names_are_those_of_the_checkers() -> None:
    # A scenario's [expect] is read against contract.invariants, with no checker imported.
    from contract.invariants import INVARIANTS
    from harness.checkers import ALL

    assert tuple(c.name for c in ALL) == INVARIANTS
