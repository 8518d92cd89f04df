"""Replay commands rerun as printed: pasted into a shell in another directory, a failure's
replay command imports the user's adapter, finds the schedule and gives the same verdict and
the same history, byte for byte (the simulator is deterministic).

The adapter is written as a user writes one: a module outside the package (`mychaos.py` next
to the user's own `my_runtime` package, a copy of examples/my_runtime), public API only, found
from the directory the user ran in.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
PINNING_SCENARIO = ROOT / "scenarios" / "02-answered-after-3-days-across-redeploys.toml"
ADAPTER = """
from my_runtime.adapter import MyRuntimeAdapter


def factory():
    return MyRuntimeAdapter(hand_off=False)  # waits in-call: pins its deployment
"""


def _project(where: Path) -> Path:
    """A user's project: their runtime package, their adapter module, one scenario file."""
    where.mkdir(parents=True)
    shutil.copytree(ROOT / "examples" / "my_runtime", where / "my_runtime",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (where / "mychaos.py").write_text(ADAPTER, encoding="utf-8")
    (where / "chaos").mkdir()
    shutil.copy(PINNING_SCENARIO, where / "chaos" / "pinned.toml")
    return where


def _env() -> dict[str, str]:
    # Nothing of the user's project on the import path but what the command itself says.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    return env


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=300)


def _replay_commands(stdout: str) -> list[str]:
    found = re.findall(r"^\s*replay: (.+)$", stdout, re.M)
    found += re.findall(r"^replay the minimal failing schedule: (.+)$", stdout, re.M)
    return found


def _history_of(command: str) -> Path:
    """The history the run that printed `command` saved beside the schedule it replays (a
    scenario file's run keeps it under the report directory, by name)."""
    return Path(command.rsplit(" ", 1)[1])


def test_printed_replay_commands_rerun_verbatim_from_another_directory(tmp_path: Path) -> None:
    project = _project(tmp_path / "project")
    first = _cli("run", "--adapter", "mychaos:factory", "--scenarios", "chaos",
                 "--schedules", "3", "--seed", "1", "--report-dir", "out", "--quiet",
                 cwd=project)
    assert first.returncode == 1, first.stdout + first.stderr
    commands = _replay_commands(first.stdout)
    # The scenario's failure and the minimal schedule shrunk from a generated one.
    assert any(c.endswith("chaos/pinned.toml") for c in commands), first.stdout
    assert any("shrunk-generated" in c for c in commands), first.stdout
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for command in commands:
        assert "--adapter mychaos:factory" in command
        assert f"--adapter-path {project.resolve()}" in command
        again = subprocess.run(command, shell=True, cwd=elsewhere, env=_env(),
                               capture_output=True, text=True, timeout=300)
        assert again.returncode == 1, f"{command}\n{again.stdout}{again.stderr}"
        assert "pinning-bound: 1 run(s)" in again.stdout, again.stdout
        name = "answered-after-3-days-across-redeploys" if command.endswith(
            "pinned.toml") else _history_of(command).parent.name
        original = project / "out" / "runs" / "my-runtime" / name / "history.jsonl"
        replayed = elsewhere / "reports" / "runs" / "my-runtime" / name / "history.jsonl"
        assert replayed.read_bytes() == original.read_bytes(), command
        shutil.rmtree(elsewhere / "reports")


def test_report_and_junit_carry_the_same_replay_command(tmp_path: Path) -> None:
    project = _project(tmp_path / "project")
    first = _cli("run", "--adapter", "mychaos:factory", "--scenarios", "chaos",
                 "--schedules", "0", "--report-dir", "out", "--quiet", cwd=project)
    assert first.returncode == 1, first.stderr
    [command] = _replay_commands(first.stdout)
    html = (project / "out" / "index.html").read_text(encoding="utf-8")
    junit = (project / "out" / "junit.xml").read_text(encoding="utf-8")
    import html as html_lib

    assert html_lib.escape(command) in html or command in html
    assert f"replay: {command}" in html_lib.unescape(junit)


def test_a_directory_given_with_adapter_path_is_named_again(tmp_path: Path) -> None:
    """An adapter found only through --adapter-path (the user ran elsewhere): the replay
    command names the directory, and it reruns from a third directory."""
    project = _project(tmp_path / "project")
    runner = tmp_path / "ci"
    runner.mkdir()
    first = _cli("run", "--adapter-path", str(project), "--adapter", "mychaos:factory",
                 "--scenarios", str(project / "chaos"), "--schedules", "0", "--quiet",
                 cwd=runner)
    assert first.returncode == 1, first.stderr
    [command] = _replay_commands(first.stdout)
    assert f"--adapter-path {project.resolve()}" in command
    third = tmp_path / "third"
    third.mkdir()
    again = subprocess.run(command, shell=True, cwd=third, env=_env(), capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 1 and "pinning-bound" in again.stdout, again.stderr


def test_adapter_path_that_is_not_a_directory_is_exit_2(tmp_path: Path) -> None:
    result = _cli("run", "--adapter-path", str(tmp_path / "nope"), "--adapter", "x:y",
                  cwd=tmp_path)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert "--adapter-path" in line and "not a directory" in line


def test_builtin_adapters_need_no_path_and_pythonpath_is_kept(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from harness.replay import replay_command

    monkeypatch.delenv("PYTHONPATH", raising=False)
    command = replay_command("naive", str(tmp_path / "s.toml"))
    assert "--adapter-path" not in command and "PYTHONPATH" not in command
    assert command.endswith(f"--adapter naive {tmp_path / 's.toml'}")
    monkeypatch.setenv("PYTHONPATH", "relative/dir")
    command = replay_command("pkg.mod:adapter", "s.toml", run_timeout=90)
    assert command.startswith(f"PYTHONPATH={Path('relative/dir').resolve()} ")
    assert "--run-timeout 90 " in command and command.endswith(str(Path("s.toml").resolve()))


def test_pytest_failure_text_replays_from_another_directory(pytester: pytest.Pytester,
                                                            tmp_path: Path) -> None:
    project = _project(pytester.path / "project")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--chaos-adapter",
         "mychaos:factory", "--chaos-scenarios=chaos", "--chaos-schedules=0",
         "--chaos-report=out", "-m", "chaos"],
        cwd=project, env=_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout
    commands = re.findall(r"^replay: (.+)$", result.stdout, re.M)
    assert commands, result.stdout
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = subprocess.run(commands[0], shell=True, cwd=elsewhere, env=_env(),
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 1 and "pinning-bound" in again.stdout, again.stderr
