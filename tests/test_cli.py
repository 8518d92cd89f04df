"""The `durable-chaos` command as a user runs it: exit codes, one-line errors, reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.adapters import load_adapter
from harness.cli import main
from harness.run import RunOptions, run_schedule
from harness.schedules.scenario_file import load_scenario

ROOT = Path(__file__).resolve().parents[1]


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('[[step]]\nat = "0s"\ndo = "explode"\n', "step[0].do"),
        ('[[step]]\nat = "five minutes"\ndo = "message"\nsession = "s1"\n', "step[0].at"),
        ('[[step]]\nat = "0s"\ndo = "message"\n', "step[0].session"),
        ('[[step]]\nat = "0s"\ndo = "provider"\nfault = "503"\n', "step[0].fault"),
        ('[[step]]\nat = "0s"\ndo = "arm"\npoint = "nowhere"\n', "step[0].point"),
        ('hosts = "two"\n[[step]]\nat = "0s"\ndo = "deploy"\n', "hosts"),
        ('[expect]\nspeed = "pass"\n[[step]]\nat = "0s"\ndo = "deploy"\n', "expect.speed"),
        ("this is = not toml =", "-"),
    ],
)
def test_malformed_scenario_is_one_line_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, field: str
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(body)
    code = main(["run", "--scenarios", str(bad), "--schedules", "0", "--report-dir",
                 str(tmp_path / "r"), "--quiet"])
    assert code == 2
    err = _one_line_error(capsys)
    assert str(bad) in err
    assert f"field '{field}'" in err
    assert not (tmp_path / "r").exists()  # nothing ran, nothing half-written


def test_unknown_adapter_and_bad_numbers_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--adapter", "nope", "--report-dir", str(tmp_path)]) == 2
    assert "unknown adapter 'nope'" in _one_line_error(capsys)
    assert main(["run", "--adapter", "no.such.module:thing"]) == 2
    assert "cannot import module" in _one_line_error(capsys)
    assert main(["run", "--schedules", "many"]) == 2
    assert "--schedules" in _one_line_error(capsys)
    assert main(["run", "--time-budget", "soon"]) == 2
    assert "--time-budget" in _one_line_error(capsys)


def test_adapters_lists_builtins(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["adapters"]) == 0
    out = capsys.readouterr().out
    for name in ("reference", "naive", "reference-restate", "module:attribute"):
        assert name in out


def test_naive_run_exits_1_naming_the_pinned_deployment_and_duration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "--adapter", "naive", "--scenarios",
                 str(ROOT / "scenarios" / "02-answered-after-3-days-across-redeploys.toml"),
                 "--schedules", "0", "--report-dir", str(tmp_path), "--quiet"])
    assert code == 1
    out = capsys.readouterr().out
    assert "pinning-bound" in out
    assert "deployment dep1" in out and "3.00d" in out
    assert (tmp_path / "index.html").exists() and (tmp_path / "junit.xml").exists()


def test_reference_scenarios_pass_and_replay_is_byte_identical(tmp_path: Path) -> None:
    code = main(["run", "--scenarios", str(ROOT / "scenarios"), "--schedules", "5",
                 "--report-dir", str(tmp_path), "--quiet"])
    assert code == 0
    adapter = load_adapter("reference")
    scenario = load_scenario(ROOT / "scenarios" / "14-crash-and-pause-during-wait.toml")
    first = run_schedule(adapter, scenario, RunOptions(report_dir=tmp_path / "a"))
    second = run_schedule(adapter, scenario, RunOptions(report_dir=tmp_path / "b"))
    assert first.history_path and second.history_path
    assert Path(first.history_path).read_bytes() == Path(second.history_path).read_bytes()
    # The program is the one that ran (its absolute path unless PATH finds that one).
    assert " replay --adapter reference " in first.replay_command


def test_replay_of_a_saved_schedule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = ROOT / "scenarios" / "01-answered-in-2-minutes.toml"
    assert main(["replay", str(scenario), "--report-dir", str(tmp_path), "--quiet"]) == 0
    assert main(["replay", "--report-dir", str(tmp_path)]) == 2
    assert "SCHEDULE.toml or --seed" in _one_line_error(capsys)


def test_network_steps_parse_and_a_runtime_without_the_capability_skips_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "net.toml"
    good.write_text('[[step]]\nat = "0s"\ndo = "message"\nsession = "s1"\n'
                    '[[step]]\nat = "1s"\ndo = "network"\nlink = "pg"\nkind = "reset_peer"\n'
                    'duration = "30s"\n')
    outcome = run_schedule(load_adapter("reference"), load_scenario(good), RunOptions())
    assert outcome.skipped_faults == ("network",)
    assert all(r.valid is not False for r in outcome.results)
    bad = tmp_path / "bad-net.toml"
    bad.write_text('[[step]]\nat = "0s"\ndo = "network"\nlink = "dns"\nkind = "down"\n')
    assert main(["run", "--scenarios", str(bad), "--schedules", "0", "--quiet"]) == 2
    assert "field 'step[0].link'" in _one_line_error(capsys)


def test_external_restate_needs_both_urls(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--restate-ingress-url", "http://127.0.0.1:1"]) == 2
    assert "--restate-admin-url" in _one_line_error(capsys)
