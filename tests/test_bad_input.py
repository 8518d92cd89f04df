"""Bad input of every kind: one line naming the file, the field or the option and the fix,
exit status 2, no traceback, nothing run or written.

Scenario files and command-line options through `durable-chaos run`; ini keys and options
through the pytest plugin (pytester, as a user's project).
"""

from __future__ import annotations

# Loaded before any in-process pytester run: a module first imported inside one is dropped
# from sys.modules after it, and a later process pool pickles against a fresh copy of
# concurrent.futures.process ("not the same object").
import concurrent.futures.process  # noqa: F401
import gc
from pathlib import Path

import pytest

import harness.exploration
import harness.suite  # noqa: F401
from harness.cli import main

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "01-answered-in-2-minutes.toml"
MESSAGE = '[[step]]\nat = "0s"\ndo = "message"\nsession = "s1"\n'

# (case, file contents, what the one line names after "bad.toml: ")
SCENARIOS: list[tuple[str, str | bytes, str]] = [
    ("TOML syntax error", 'name = "x\n' + MESSAGE, "field '-': not valid TOML (Illegal"),
    ("a key given twice", MESSAGE + 'at = "1s"\n', "field '-': not valid TOML (Cannot "
                                                   "overwrite a value"),
    ("unknown action", MESSAGE.replace('"message"', '"mesage"'),
     "field 'step[0].do': unknown action 'mesage'; use one of ['answer'"),
    ("unknown provider fault", MESSAGE + '[[step]]\nat = "1m"\ndo = "provider"\n'
                                         'fault = "503"\n',
     "field 'step[1].fault': unknown provider fault '503'; use one of ['500_before'"),
    ("unknown service", MESSAGE + '[[step]]\nat = "1m"\ndo = "service-fault"\n'
                                  'service = "ledger"\nfault = "429"\n',
     "field 'step[1].service': unknown service 'ledger'; use one of ['provider', 'email', "
     "'payments', 'identity', 'cards']"),
    ("unknown payments fault", MESSAGE + '[[step]]\nat = "1m"\ndo = "service-fault"\n'
                                         'service = "payments"\nfault = "502"\n',
     "field 'step[1].fault': unknown payments fault '502'; use one of ['500_before', "
     "'500_after', '429', 'timeout', 'slow', '200_error']"),
    ("a service fault without its service", MESSAGE + '[[step]]\nat = "1m"\n'
                                                      'do = "service-fault"\nfault = "429"\n',
     "field 'step[1].service': 'service-fault' needs service"),
    ("a provider step naming a service", MESSAGE + '[[step]]\nat = "1m"\ndo = "provider"\n'
                                                   'service = "email"\nfault = "429"\n',
     "field 'step[1].service': 'provider' takes no service"),
    ("unknown fault point", MESSAGE + '[[step]]\nat = "1m"\ndo = "arm"\npoint = "nowhere"\n'
                                      'action = "crash"\n',
     "field 'step[1].point': unknown fault point 'nowhere'"),
    ("duration '5 minutes'", MESSAGE.replace('"0s"', '"5 minutes"'),
     "field 'step[0].at': expected a duration like '90s', '5m'"),
    ("duration '-1s'", MESSAGE.replace('"0s"', '"-1s"'), "field 'step[0].at': expected a "
                                                         "duration"),
    ("duration '1e309s'", MESSAGE.replace('"0s"', '"1e309s"'), "field 'step[0].at': "
                                                               "expected a duration"),
    ("a step after the horizon", 'horizon = "1m"\n' + MESSAGE + '[[step]]\nat = "2m"\n'
                                                                'do = "answer"\n'
                                                                'session = "s1"\n',
     "field 'horizon': '1m' ends the run before step[1] at '2m'; set the horizon after the "
     "last step, or leave it out"),
    ("an answer naming another session's call", MESSAGE + '[[step]]\nat = "1m"\n'
                                                          'do = "answer"\nsession = "s1"\n'
                                                          'of = "s2"\n',
     "field 'step[1].of': 'answer' takes no of"),
    ("a background request's of is a number", MESSAGE + '[[step]]\nat = "1m"\n'
                                                       'do = "background"\nsession = "s1"\n'
                                                       'of = 2\n',
     "field 'step[1].of': expected a string, got 2"),
    ("missing session", '[[step]]\nat = "0s"\ndo = "message"\n',
     "field 'step[0].session': 'message' needs session; add session = ..."),
    ("session is a number", MESSAGE.replace('"s1"', "5"),
     "field 'step[0].session': expected a string, got 5"),
    ("seed is a string", 'seed = "7"\n' + MESSAGE, "field 'seed': expected an integer, got "
                                                   "'7'"),
    ("step is a number", "step = 3\n", "field 'step': expected [[step]] tables, got 3"),
    ("at is a list", MESSAGE.replace('"0s"', "[1]"), "field 'step[0].at': expected a duration"),
    ("duration is a bool", MESSAGE + '[[step]]\nat = "1m"\ndo = "gc-pause"\nhost = "any"\n'
                                     "duration = true\n",
     "field 'step[1].duration': expected a duration"),
    ("fails is a string", '[expect]\nfails = "busy-rule"\n' + MESSAGE,
     "field 'expect.fails': expected a non-empty list of invariant names"),
    ("tools is a string", MESSAGE + 'tools = "send_email"\n',
     "field 'step[0].tools': expected a list of tool names"),
    ("an empty file", "", "field 'step': a scenario needs at least one [[step]]"),
    ("not UTF-8", b"\xff\xfe name", "field '-': not UTF-8 text (byte 0xff at offset 0)"),
]


@pytest.fixture(autouse=True)
def _quiet(capsys: pytest.CaptureFixture[str]) -> None:
    """Collect an earlier test's garbage now: a simulated run cut short leaves handler
    coroutines that Python warns about ("never awaited") whenever they are collected, which
    would land in this test's stderr."""
    gc.collect()
    capsys.readouterr()


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(("case", "text", "names"), SCENARIOS, ids=[c[0] for c in SCENARIOS])
def test_a_bad_scenario_file_is_one_line_naming_the_file_and_the_field(
    case: str, text: str | bytes, names: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "bad.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    code = main(["run", "--scenarios", str(path), "--schedules", "0", "--quiet",
                 "--report-dir", str(tmp_path / "r")])
    line = _one_line(capsys)
    assert code == 2
    assert line.startswith(f"durable-chaos: error: {path}: {names}"), line
    assert not (tmp_path / "r").exists()


def test_a_directory_without_scenarios_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    code = main(["run", "--scenarios", "empty", "--schedules", "0", "--quiet"])
    assert code == 2
    assert _one_line(capsys) == ("durable-chaos: error: --scenarios: empty holds no *.toml "
                                 "scenario files; point it at a directory of scenario files, "
                                 "or use 'builtin' or 'none'")


OPTIONS = [
    (["--seed", "abc"], "--seed: expected an integer, got 'abc'"),
    (["--seed", "-3"], "--seed: expected a number >= 0, got -3"),
    (["--schedules", "-1"], "--schedules: expected a number >= 0, got -1"),
    (["--schedules", "1.5"], "--schedules: expected an integer, got '1.5'"),
    (["--workers", "0"], "--workers: expected at least 1 worker, got 0"),
    (["--workers", "two"], "--workers: expected an integer, got 'two'"),
    (["--time-budget", "soon"], "--time-budget: expected a duration like '90s'"),
    (["--run-timeout", "-1s"], "argument --run-timeout: expected one argument (give it a "
                               "value; one that starts with '-' goes after '=': "
                               "--option=VALUE); see `durable-chaos run --help`"),
    (["--run-timeout=-1s"], "--run-timeout: expected a duration like"),
    (["--bogus"], "unrecognized arguments: --bogus; see `durable-chaos --help`"),
    (["--ray", ""], "--ray: expected a Ray address such as 127.0.0.1:6379 or 'local'"),
    (["--ray", "nonsense"], "--ray nonsense: expected 'local' or a Ray head's address such "
                            "as 127.0.0.1:6379"),
    (["--report-dir", ""], "--report-dir: empty; give a directory such as reports"),
    (["--scenarios", ""], "--scenarios: empty; give a scenario file"),
    (["--adapter", ":"], "adapter ':': expected 'package.module:attribute', both parts named"),
    (["--adapter", "mod:"], "adapter 'mod:': expected 'package.module:attribute'"),
    (["--invariants", ",,"], "--invariants: expected a comma list of invariant names"),
]


@pytest.mark.parametrize(("args", "names"), OPTIONS, ids=[" ".join(a) for a, _ in OPTIONS])
def test_a_bad_option_is_one_line_naming_it(
    args: list[str], names: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        code = main(["run", "--scenarios", str(SCENARIO), "--schedules", "0", "--quiet",
                     *args])
    except SystemExit as exc:  # argparse's own errors leave through exit()
        code = exc.code  # type: ignore[assignment]
    assert code == 2
    line = _one_line(capsys)
    assert names in line, line
    assert list(tmp_path.iterdir()) == []  # no report directory, nothing written


def test_ray_not_installed_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ray is hidden the way Python sees a package that is not installed: its import fails.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(__import__("sys").modules, "ray", None)
    code = main(["run", "--scenarios", str(SCENARIO), "--schedules", "0", "--quiet",
                 "--ray", "local"])
    assert code == 2
    assert _one_line(capsys) == ("durable-chaos: error: --ray: Ray is not installed here; "
                                 "pip install 'durable-chaos[ray]'")


# ---------------------------------------------------------------------------- the plugin

INI = [
    ("chaos_schedules = abc", "chaos_schedules in the ini file tox.ini: expected a whole "
                              "number of schedules"),
    ("chaos_schedules = -1", "chaos_schedules in the ini file tox.ini: expected a number >= 0"),
    ("chaos_seed = x", "chaos_seed in the ini file tox.ini: expected an integer seed or "
                       "'last', got 'x'"),
    ("chaos_workers = 0", "chaos_workers in the ini file tox.ini: expected a number of worker "
                          "processes >= 1"),
    ("chaos_run_timeout = soon", "chaos_run_timeout in the ini file tox.ini: expected a "
                                 "duration like"),
    ("chaos_scenarios = nowhere", "chaos_scenarios in the ini file tox.ini: nowhere does not "
                                  "exist"),
    ("chaos_invariants = bogus", "chaos_invariants in the ini file tox.ini: unknown invariant "
                                 "'bogus'"),
    ("chaos_components = vm", "chaos_components in the ini file tox.ini: unknown components "
                              "'vm'"),
    ("chaos_report = afile", "chaos_report in the ini file tox.ini: {path}/afile is a file, "
                             "not a directory; give a directory"),
    ("chaos_report = afile/reports", "chaos_report in the ini file tox.ini: "
                                     "{path}/afile/reports is under the file {path}/afile, not "
                                     "a directory"),
]


@pytest.mark.parametrize(("line", "names"), INI, ids=[c[0] for c in INI])
def test_a_bad_ini_key_is_one_usage_error_line(line: str, names: str,
                                               pytester: pytest.Pytester) -> None:
    pytester.makefile(".ini", tox=f"[pytest]\nchaos_adapter = reference\n{line}\n")
    pytester.makefile("", afile="a file, not a directory")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--co")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str().strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"ERROR: {names.format(path=pytester.path)}"), err


def test_a_ray_address_where_nothing_answers_is_one_line_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # ray.init retries a dead address for minutes; the CLI refuses it before anything runs.
    import importlib.util
    import os
    import socket

    if importlib.util.find_spec("ray") is None:  # pragma: no cover - the test extra has it
        assert os.environ.get("CI") != "true", "Ray is missing: pip install -e '.[test]'"
        pytest.skip("Ray is not installed: pip install -e '.[test]' (or '.[ray]')")

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.chdir(tmp_path)
    code = main(["run", "--scenarios", str(SCENARIO), "--schedules", "10", "--quiet",
                 "--ray", f"127.0.0.1:{port}"])
    assert code == 2
    assert _one_line(capsys) == (f"durable-chaos: error: --ray 127.0.0.1:{port}: nothing "
                                 "answers there (Connection refused); start the cluster's "
                                 "head (`ray start --head`) and give its address, or use "
                                 "--ray local")
    assert list(tmp_path.iterdir()) == []


def test_replay_of_a_file_and_a_seed_at_once_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["replay", str(SCENARIO), "--seed", "3", "--quiet"])
    assert code == 2
    assert _one_line(capsys) == (f"durable-chaos: error: replay: give {SCENARIO} or --seed 3, "
                                 "not both (a schedule file holds its own seed)")


def test_the_plugin_says_when_the_suite_has_nothing_to_judge(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--chaos-adapter=reference",
                                          "--chaos-scenarios=none", "--chaos-schedules=0")
    result.stdout.fnmatch_lines(["durable-chaos: nothing judged: no scenario file and "
                                 "--chaos-schedules 0 (only the adapter contract ran); give "
                                 "--chaos-scenarios or --chaos-schedules N"])
