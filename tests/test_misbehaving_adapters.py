"""A user's adapter that misbehaves, through the CLI and through the pytest plugin.

The adapters are written outside the package (tests/outside_adapters/misbehaving.py), public
API only, each broken in one way a user's can be. What must hold, whatever the breakage:

- a run the harness cannot judge is "unknown", named with why in the summary and the report,
  and the CLI exits 3, never 0;
- a configuration error (the adapter cannot load, its check_config() or engine is wrong, its
  claims name nothing valid) is exit 2 with one line naming the fix, nothing run or written;
- an adapter whose open() fails on its first run ends the suite with exit 2, report written;
- never a traceback, and the report is written whenever a run ran;
- under pytest the contract item fails naming the broken promise (the rest is skipped), or
  pytest stops with a usage error; never a pass.
"""

from __future__ import annotations

# Loaded before any in-process pytester run: a module first imported inside one is dropped
# from sys.modules after it, and a later process pool pickles against a fresh copy of
# concurrent.futures.process ("not the same object").
import concurrent.futures.process  # noqa: F401
import gc
import html
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness.exploration
import harness.suite  # noqa: F401
from harness import replay
from harness.checkers import ALL
from harness.cli import main

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = ROOT / "tests" / "outside_adapters"
SCENARIO = ROOT / "scenarios" / "01-answered-in-2-minutes.toml"
SECOND = ROOT / "scenarios" / "02-answered-after-3-days-across-redeploys.toml"

# (attribute, exit status, what the summary and the report name)
UNKNOWN = [
    ("close_raises", "close failed: OSError: the worker would not stop"),
    ("close_hangs", "close() did not return within 2s"),
    ("advance_raises", "ConnectionResetError: the engine closed the connection"),
    ("advance_hangs", "timed out: the run passed its wall-clock limit of 2s"),
    ("now_str", "TypeError: now() returned '0.0'; return the seconds since the run started"),
    ("now_backwards", "ValueError: now() went back from "),
    ("send_custom_base", "CustomStop: the user's own BaseException"),
    ("send_system_exit", "SystemExit: 0"),
    ("send_generator_exit", "GeneratorExit"),
    ("misspelled_kind", "unknown record kind 'turn.begun'"),
    ("missing_field", "record 'tool.result' lacks required field 'outcome'"),
]
CANNOT_OPEN = [
    ("open_raises", "open() failed: ConnectionRefusedError: no engine at 127.0.0.1:9"),
    ("open_hangs", "timed out: the run passed its wall-clock limit of 2s"),
    ("open_raises_lines", "open() failed: RuntimeError: engine failed to start: | port 9 in use "
                          "| see engine.log"),
    ("open_returns_none", "open() failed: TypeError: open(ctx) returned NoneType, which lacks "
                          "world, now, advance, send_message, answer, finish, close; return a "
                          "harness.adapters.base.Runtime"),
]
CONFIGURATION = [
    ("config_garbage", "check_config() returned 'hand_off_after=300'; return a "
                       "harness.checkers.base.CheckConfig"),
    ("config_none", "check_config() returned None"),
    ("config_raises_lines", "check_config() raised ValueError: bad thresholds: | "
                            "hand_off_after missing | max_wait missing; fix the adapter"),
    ("engine_typo", "engine is 'simulator'; use 'sim'"),
    ("name_none", "name is None; give it a non-empty str name"),
    ("claims_unknown", "unknown invariant 'busy-rul'; did you mean 'busy-rule'?"),
    ("claims_none", "names no invariant, so a run would judge nothing"),
    ("not_an_adapter", "is not an adapter"),
    ("class_not_instance", "make class_not_instance an instance (class_not_instance = "
                           "Adapter(...))"),
    ("no_such_attribute", "module 'misbehaving' has no attribute 'no_such_attribute'"),
]


def _cli(mode: str, report: Path, *extra: str) -> list[str]:
    # Two scenario files, each with a message and an answer: every breakage is reached in
    # both runs, whatever the generator makes of a seed (the fan-out has its own test).
    return ["run", "--adapter", f"misbehaving:{mode}", "--adapter-path", str(OUTSIDE),
            "--scenarios", str(SCENARIO), "--scenarios", str(SECOND), "--schedules", "0",
            "--run-timeout", "2", "--report-dir", str(report), "--quiet", *extra]


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
              capsys: pytest.CaptureFixture[str]) -> Path:
    # A user runs from their own project: nothing of this repository's tests on the path.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    # --adapter-path is remembered for replay commands: kept to this test.
    monkeypatch.setattr(replay, "_adapter_paths", list(replay._adapter_paths))
    _quiet(capsys)
    return tmp_path


@pytest.fixture(scope="module", autouse=True)
def _collect_after() -> Iterator[None]:
    """The runs cut short here leave garbage behind (see `_quiet`): collected before the
    next test file starts, so that its warnings never land in another file's stderr."""
    yield
    gc.collect()


def _quiet(capsys: pytest.CaptureFixture[str]) -> None:
    """Collect an earlier test's garbage now: a simulated run cut short leaves handler
    coroutines that Python warns about ("never awaited") whenever they are collected, which
    would land in this test's stderr."""
    gc.collect()
    capsys.readouterr()


def _no_traceback(text: str) -> None:
    assert "Traceback (most recent call last)" not in text, text


@pytest.mark.parametrize(("mode", "why"), UNKNOWN, ids=[m for m, _ in UNKNOWN])
def test_the_cli_judges_a_broken_run_unknown_names_why_and_exits_3(
    mode: str, why: str, elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = elsewhere / "r"
    assert main(_cli(mode, report)) == 3
    out, err = capsys.readouterr()
    _no_traceback(out + err)
    assert err.strip().splitlines()[-1].startswith("durable-chaos: could not judge: 2 run(s) "
                                                   "unknown")
    assert f"misbehaving-{mode}: 2 run(s), 0 with violations, 2 unknown" in out
    line = out.split("  unknown: 2 run(s), e.g. ")[1].splitlines()[0]
    assert why in line
    assert not line.rstrip().endswith(":"), line  # an exception without a message: its name alone
    page = html.unescape((report / "index.html").read_text(encoding="utf-8"))
    assert why in page
    assert why in html.unescape((report / "junit.xml").read_text(encoding="utf-8"))


@pytest.mark.parametrize(("mode", "why"), CANNOT_OPEN, ids=[m for m, _ in CANNOT_OPEN])
def test_the_cli_stops_with_exit_2_when_the_first_open_fails_and_writes_the_report(
    mode: str, why: str, elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = elsewhere / "r"
    assert main(_cli(mode, report)) == 2
    out, err = capsys.readouterr()
    _no_traceback(out + err)
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"durable-chaos: error: adapter 'misbehaving:{mode}' cannot run "
                          f"here: {why}")
    assert (report / "index.html").is_file()


@pytest.mark.parametrize(("mode", "fix"), CONFIGURATION, ids=[m for m, _ in CONFIGURATION])
def test_the_cli_refuses_a_misconfigured_adapter_in_one_line_before_anything_runs(
    mode: str, fix: str, elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = elsewhere / "r"
    assert main(_cli(mode, report)) == 2
    out, err = capsys.readouterr()
    _no_traceback(out + err)
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("durable-chaos: error: adapter ")
    assert fix in err
    assert not report.exists()


MODULES = [
    ("a syntax error", "def broken(:\n", "has a syntax error (", "line 1"),
    ("a missing package", "import durable_chaos_no_such_package\n",
     "cannot import module", "No module named 'durable_chaos_no_such_package'"),
    ("argparse at import", "import argparse\nargparse.ArgumentParser().parse_args(['-x'])\n",
     "raised SystemExit: 2; fix the module", "import"),
    ("a BaseException at import", "class Stop(BaseException):\n    pass\nraise Stop('no')\n",
     "raised Stop: no; fix the module", "import"),
    ("no ADAPTER", "X = 1\n", "has no attribute 'ADAPTER'", "misbehaving_module"),
    ("ADAPTER is None", "ADAPTER = None\n", "is not an adapter", "open(ctx)"),
]


@pytest.mark.parametrize(("case", "body", "names", "also"), MODULES,
                         ids=[m[0] for m in MODULES])
def test_an_adapter_module_that_cannot_load_is_one_line_and_exit_2(
    case: str, body: str, names: str, also: str, elsewhere: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    where = elsewhere / "adapters"
    where.mkdir()
    module = f"misbehaving_module_{abs(hash(case)) % 10**8}"
    (where / f"{module}.py").write_text(body, encoding="utf-8")
    code = main(["run", "--adapter", f"{module}:ADAPTER", "--adapter-path", str(where),
                 "--scenarios", str(SCENARIO), "--schedules", "0", "--report-dir",
                 str(elsewhere / "r"), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 2, err
    _no_traceback(out + err)
    # The module's own output comes first (argparse prints its usage); ours is one line.
    ours = [line for line in err.splitlines() if line.startswith("durable-chaos:")]
    assert len(ours) == 1 and err.strip().endswith(ours[0]), err
    assert names in ours[0] and also in ours[0]
    assert not (elsewhere / "r").exists()


@pytest.mark.parametrize("mode", ["advance_raises", "send_custom_base"])
def test_runs_broken_in_fanned_out_workers_are_unknown_too(
    mode: str, elsewhere: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Generated schedules over 2 forked workers: a worker's run that raises (a BaseException
    # too) comes back unknown, named; the worker does not die.
    report = elsewhere / "r"
    args = ["run", "--adapter", f"misbehaving:{mode}", "--adapter-path", str(OUTSIDE),
            "--scenarios", "none", "--schedules", "6", "--workers", "2", "--report-dir",
            str(report), "--quiet"]
    assert main(args) == 3
    out, err = capsys.readouterr()
    _no_traceback(out + err)
    assert re.search(rf"misbehaving-{mode}: 6 run\(s\), 0 with violations, [1-6] unknown", out)
    assert ("ConnectionResetError: the engine closed the connection" if mode == "advance_raises"
            else "CustomStop: the user's own BaseException") in out
    assert (report / "index.html").is_file()


def test_a_runtime_that_prints_a_lot_is_judged_as_any_other(tmp_path: Path) -> None:
    # A subprocess: the runtime prints from its worker process, to the real stdout.
    report = tmp_path / "r"
    proc = subprocess.run([sys.executable, "-m", "harness.cli", *_cli("noisy", report)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert "engine log line 1999" in proc.stdout  # its output is its own business
    assert "misbehaving-noisy: 2 run(s), 0 with violations, 0 unknown" in proc.stdout
    assert (report / "index.html").is_file()


# ---------------------------------------------------------------------------- the plugin

CONTRACT = [
    ("open_raises", "open: open(ctx) raised ConnectionRefusedError: no engine at 127.0.0.1:9"),
    ("open_hangs", "the contract check passed the wall-clock limit of 2s"),
    ("open_returns_none", "open: open(ctx) returned NoneType, which lacks world, now, advance"),
    ("close_raises", "close: close() raised OSError: the worker would not stop"),
    ("close_hangs", "the contract check passed the wall-clock limit of 2s"),
    ("advance_raises", "raised ConnectionResetError: the engine closed the connection"),
    ("advance_hangs", "the contract check passed the wall-clock limit of 2s"),
    ("now_str", "now() returned '0.0'; return seconds since the run started"),
    ("now_backwards", "open: now() returned -3600.0; return seconds since the run started"),
    ("send_custom_base", "send_message('contract-s1', ...) raised CustomStop: the user's own "
                         "BaseException;"),
    ("send_system_exit", "send_message('contract-s1', ...) raised SystemExit: 0;"),
    ("send_generator_exit", "send_message('contract-s1', ...) raised GeneratorExit;"),
    ("misspelled_kind", "unknown record kind 'turn.begun'"),
    ("missing_field", "lacks required field 'outcome'"),
]
PLUGIN_USAGE = [(mode, fix) for mode, fix in CONFIGURATION]


@pytest.fixture(scope="module")
def contract_session(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    """One pytest session, in a subprocess, with every broken adapter (and the control) at
    once: each gets its own contract item. A subprocess, so that a broken adapter cannot take
    the test process with it."""
    project = tmp_path_factory.mktemp("project")
    shutil.copy(OUTSIDE / "misbehaving.py", project / "misbehaving.py")
    shutil.copy(SCENARIO, project / "one.toml")
    (project / "pytest.ini").write_text("[pytest]\npythonpath = .\n", encoding="utf-8")
    specs = ",".join(f"misbehaving:{mode}" for mode, _ in [*CONTRACT, ("well_behaved", ""),
                                                           ("later_system_exit", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
         f"--chaos-adapter={specs}", "--chaos-scenarios=one.toml", "--chaos-schedules=1",
         "--chaos-seed=1", "--chaos-run-timeout=2", "--chaos-report=out", "-rA"],
        cwd=project, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    return proc.returncode, proc.stdout + proc.stderr, project


def _section(text: str, mode: str) -> str:
    """The failure text of adapter `mode`'s contract item."""
    head = f" durable-chaos: misbehaving:{mode} contract "
    assert head in text, text[-3000:]
    return text.split(head, 1)[1].split("\n_____", 1)[0].split("\n=====", 1)[0]


@pytest.mark.parametrize(("mode", "why"), CONTRACT, ids=[m for m, _ in CONTRACT])
def test_the_plugin_fails_the_contract_item_naming_the_broken_promise(
    mode: str, why: str, contract_session: tuple[int, str, Path]
) -> None:
    status, text, project = contract_session
    assert status == pytest.ExitCode.TESTS_FAILED
    _no_traceback(text)
    section = _section(text, mode)
    assert f"AdapterContractError: adapter 'misbehaving-{mode}': " in section
    assert not [line for line in section.splitlines() if line.startswith("E ")], section
    assert why in section
    # The scenario and the generated item of each invariant are skipped, never passed.
    assert [line for line in text.splitlines()
            if line.startswith(f"SKIPPED [{1 + len(ALL)}] ") and
            f"adapter misbehaving:{mode} breaks the adapter contract" in line], text[-3000:]
    assert f"PASSED durable-chaos::misbehaving:{mode}::" not in text
    assert (project / "out" / "index.html").is_file()


def test_the_plugin_passes_a_well_behaved_adapter_from_outside(
    contract_session: tuple[int, str, Path],
) -> None:
    # The control: the module's adapter that keeps its promises passes every item.
    _, text, _ = contract_session
    passed = [line for line in text.splitlines()
              if line.startswith("PASSED durable-chaos::misbehaving:well_behaved::")]
    assert len(passed) == 2 + len(ALL), text[-3000:]


def test_the_plugin_fails_items_whose_runs_the_adapter_broke_as_unknown(
    contract_session: tuple[int, str, Path],
) -> None:
    # The contract holds; every chaos run raises SystemExit(0): each item fails "unknown",
    # none passes, and pytest goes on (a SystemExit did not end the session).
    _, text, _ = contract_session
    node = "durable-chaos::misbehaving:later_system_exit::"
    assert f"PASSED {node}contract" in text
    failed = [line for line in text.splitlines() if line.startswith(f"FAILED {node}")]
    assert len(failed) == 1 + len(ALL), text[-3000:]
    assert "unknown: the adapter crashed: SystemExit: 0" in text
    assert "unknown: the adapter crashed on 1 of 1 generated schedule(s)" in text


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    shutil.copy(OUTSIDE / "misbehaving.py", pytester.path / "misbehaving.py")
    pytester.makeini("[pytest]\npythonpath = .\n")
    return pytester


@pytest.mark.parametrize(("mode", "fix"), PLUGIN_USAGE, ids=[m for m, _ in PLUGIN_USAGE])
def test_the_plugin_stops_on_a_misconfigured_adapter_with_one_line(
    mode: str, fix: str, project: pytest.Pytester
) -> None:
    # In process: a usage error stops pytest before any adapter code beyond loading runs.
    result = project.runpytest_inprocess("-p", "no:cacheprovider",
                                         f"--chaos-adapter=misbehaving:{mode}")
    err = result.stderr.str().strip()
    _no_traceback(result.stdout.str() + err)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert len(err.splitlines()) == 1, err
    assert err.startswith("ERROR: --chaos-adapter on the command line: adapter ")
    assert fix in err


def test_a_module_that_exits_at_import_is_a_usage_error_under_pytest(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(exits_at_import=textwrap.dedent("""
        import sys
        sys.exit(0)
    """))
    result = project.runpytest_inprocess("-p", "no:cacheprovider",
                                         "--chaos-adapter=exits_at_import:ADAPTER")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --chaos-adapter on the command line: adapter "
                                 "'exits_at_import:ADAPTER': importing module "
                                 "'exits_at_import' raised SystemExit: 0; fix the module*"])


def test_a_runtime_that_leaves_a_thread_running_is_unknown_and_the_command_ends(
        tmp_path: Path) -> None:
    # The thread lives in the worker process, which the parent ends: the command does not
    # hang, and a run whose runtime left a thread behind (it would act on after the run) is
    # not a pass.
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", *_cli("leaks_thread", tmp_path / "r")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 3, proc.stderr
    assert "misbehaving-leaks_thread: 2 run(s), 0 with violations, 2 unknown" in proc.stdout
    assert ("the runtime left 1 thread(s) running after close() (engine-client-pump); stop "
            "them in close()") in proc.stdout
    assert (tmp_path / "r" / "index.html").is_file()


@pytest.mark.parametrize(("case", "body", "names", "also"), MODULES,
                         ids=[m[0] for m in MODULES])
def test_an_adapter_module_that_cannot_load_is_a_usage_error_under_pytest(
    case: str, body: str, names: str, also: str, project: pytest.Pytester,
) -> None:
    module = f"misbehaving_module_{MODULES.index((case, body, names, also))}"
    (project.path / f"{module}.py").write_text(body, encoding="utf-8")
    result = project.runpytest_inprocess("-p", "no:cacheprovider",
                                         f"--chaos-adapter={module}:ADAPTER")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    ours = [line for line in result.stderr.str().splitlines() if line.startswith("ERROR: ")]
    assert len(ours) == 1, result.stderr.str()
    assert ours[0].startswith(f"ERROR: --chaos-adapter on the command line: adapter "
                              f"'{module}:ADAPTER'")
    assert names in ours[0] and also.replace("misbehaving_module", module) in ours[0]
    sys.modules.pop(module, None)
