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


# ---------------------------------------------------------------------------- time budget


def test_time_budget_ends_during_shrinking_and_the_smallest_failure_so_far_is_reported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The budget's clock is moved, not waited for: an hour passes once shrinking has found
    a few smaller failures, so the budget ends mid-shrink on any machine."""
    import harness.exploration as exploration
    from harness.cli import main

    failures: list[int] = []
    run_schedule, wall = exploration.run_schedule, exploration.wall

    def counting_run(*args: object, **kwargs: object) -> object:
        outcome = run_schedule(*args, **kwargs)  # type: ignore[arg-type]
        if outcome.failed:
            failures.append(len(failures))
        return outcome

    def budget_clock() -> float:
        # The batch's failure, the parent's replay of it, then ten smaller ones: time's up.
        return wall() + (7200.0 if len(failures) >= 12 else 0.0)

    monkeypatch.setattr(exploration, "run_schedule", counting_run)
    monkeypatch.setattr(exploration, "wall", budget_clock)
    spec = "tests.planted.queue_in_memory:ADAPTER"
    code = main(["run", "--adapter", spec, "--scenarios", "none", "--schedules", "30",
                 "--seed", "1", "--workers", "1", "--time-budget", "1h",
                 "--report-dir", str(tmp_path / "out"), "--quiet"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "shrinking cut short by the time budget" in out
    [command] = re.findall(r"^replay the smallest failing schedule: (.+)$", out, re.M)
    monkeypatch.undo()
    runs = tmp_path / "out" / "runs" / "planted-queue-in-memory"
    [original] = [p for p in runs.glob("generated-*/schedule.toml")]
    smallest = _history_of(command)
    assert smallest.parent.name.startswith("shrunk-")

    def steps(path: Path) -> int:
        return path.read_text(encoding="utf-8").count("[[step]]")

    assert steps(smallest) < steps(original)  # shrinking got somewhere before the cut
    # Not shrunk all the way, yet still failing on its own, as printed.
    again = subprocess.run(command, shell=True, cwd=tmp_path, env=_env(), capture_output=True,
                           text=True, timeout=300)
    # The invariant the search failed on (which one depends on the generated schedule).
    [invariant] = re.findall(r"^  ([a-z-]+): 1 run\(s\), e\.g\. generated-", out, re.M)[:1]
    assert again.returncode == 1 and f"{invariant}: 1 run(s)" in again.stdout, (
        again.stdout + again.stderr)
    html = (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    assert "Shrinking was cut short by the time budget" in html
    junit = (tmp_path / "out" / "junit.xml").read_text(encoding="utf-8")
    assert "shrinking cut short by the time budget" in junit


def test_without_a_budget_shrinking_runs_to_the_minimal_schedule(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    spec = "tests.planted.queue_in_memory:ADAPTER"
    code = main(["run", "--adapter", spec, "--scenarios", "none", "--schedules", "30",
                 "--seed", "1", "--workers", "1", "--report-dir", str(tmp_path), "--quiet"])
    out = capsys.readouterr().out
    assert code == 1 and "replay the minimal failing schedule: " in out
    assert "cut short" not in out
