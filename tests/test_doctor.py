"""`durable-chaos doctor`, the components cache and the component pins.

Pins: one module (harness/components/pins.py) that the Makefile reads and package.json
repeats. Lookup: environment variable, repository, cache, PATH, and the doctor says which one
answered. Installs: the real `go install` and `npm install` into a temporary cache (marked
`real`; outside CI they skip with the command to run when go or npm is missing).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from harness.cli import main
from harness.components import binaries, pins
from harness.components.binaries import RESTATE_SERVER, TOXIPROXY_SERVER, Tool, cache_dir
from harness.components.restate import RestateUnavailable, find_restate_server
from harness.doctor import check_path, render

ROOT = Path(__file__).resolve().parent.parent


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI=true requires it")
    pytest.skip(reason)


def _fake(path: Path, version: str) -> Path:
    """An executable that answers a version probe, standing in for a binary's location only
    (nothing here starts a server)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{version}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No component anywhere: a repository without installs, an empty cache, an empty PATH."""
    repo = tmp_path / "repo"
    (repo / "harness").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("")
    monkeypatch.setattr(binaries, "_REPO_ROOT", repo)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    for tool in (RESTATE_SERVER, TOXIPROXY_SERVER):
        monkeypatch.delenv(tool.env_var, raising=False)
    return tmp_path


# ---------------------------------------------------------------------------- pins


def test_package_json_and_its_lock_pin_the_same_restate_server() -> None:
    manifest = json.loads((ROOT / "package.json").read_text())
    assert manifest["dependencies"]["@restatedev/restate-server"] == pins.RESTATE_SERVER
    lock = json.loads((ROOT / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/@restatedev/restate-server"]["version"] == \
        pins.RESTATE_SERVER


def test_the_makefile_installs_the_pinned_versions() -> None:
    make = shutil.which("make")
    if make is None:
        _unavailable("make is not installed (apt-get install make)")
    assert make is not None
    out = subprocess.run([make, "-s", "-C", str(ROOT), "pins"], capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["restate-server", pins.RESTATE_SERVER, "toxiproxy", pins.TOXIPROXY]
    # And the toxiproxy target passes the pin to go install.
    dry = subprocess.run([make, "-n", "-B", "-C", str(ROOT), "toxiproxy"],
                         capture_output=True, text=True, check=True).stdout
    assert f"cmd/server@{pins.TOXIPROXY}" in dry


# ---------------------------------------------------------------------------- lookup


def test_cache_dir_follows_xdg_and_ignores_a_relative_value(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "durable-chaos"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "durable-chaos"


@pytest.mark.parametrize("tool", [RESTATE_SERVER, TOXIPROXY_SERVER], ids=lambda t: t.name)
def test_lookup_order_is_env_repository_cache_path(
        tool: Tool, nowhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert tool.locate() is None
    on_path = _fake(nowhere / "path" / tool.name, "on path")
    assert tool.locate() == binaries.Found(on_path, "PATH")
    cached = _fake(tool.cache_path(), "cached")
    assert tool.locate() == binaries.Found(cached, "cache")
    in_repo = _fake(nowhere / "repo" / tool.repository[0], "repo")
    assert tool.locate() == binaries.Found(in_repo, "repository")
    from_env = _fake(nowhere / "elsewhere" / tool.name, "env")
    monkeypatch.setenv(tool.env_var, str(from_env))
    assert tool.locate() == binaries.Found(from_env, f"${tool.env_var}")


def test_an_installed_wheel_does_not_look_for_a_repository(
        nowhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # site-packages holds harness/ but no pyproject.toml: node_modules there means nothing.
    (nowhere / "repo" / "pyproject.toml").unlink()
    _fake(nowhere / "repo" / TOXIPROXY_SERVER.repository[0], "stray")
    assert TOXIPROXY_SERVER.locate() is None
    assert "repo" not in TOXIPROXY_SERVER.looked()


def test_a_missing_binary_names_the_doctor_install_command(nowhere: Path) -> None:
    with pytest.raises(RestateUnavailable) as caught:
        find_restate_server()
    message = str(caught.value)
    assert "`durable-chaos doctor --install restate`" in message
    assert f"@restatedev/restate-server@{pins.RESTATE_SERVER}" in message
    assert str(RESTATE_SERVER.cache_path()) in message  # where it looked


def test_the_doctor_says_which_lookup_answered(nowhere: Path) -> None:
    _fake(RESTATE_SERVER.cache_path(), f"restate-server {pins.RESTATE_SERVER}")
    _fake(nowhere / "path" / TOXIPROXY_SERVER.name, "toxiproxy-server version v0.0.1")
    report = check_path("restate")
    by_name = {c.name: c for c in report.checks}
    assert by_name["restate-server"].source == "cache"
    assert by_name["restate-server"].version == f"restate-server {pins.RESTATE_SERVER}"
    assert by_name["toxiproxy-server"].source == "PATH"
    text = render([report])
    assert f"at {RESTATE_SERVER.cache_path()} (from cache)" in text
    # A binary of another version is used, and the doctor says what the pin is.
    assert f"[pinned {pins.TOXIPROXY}]" in text


# ---------------------------------------------------------------------------- the command


def test_doctor_path_restate_fails_naming_each_install_command(
        nowhere: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--path", "restate"]) == 1
    out, err = capsys.readouterr()
    assert "restate: NOT READY" in out
    assert "missing  restate-server" in out
    assert "install: durable-chaos doctor --install restate" in out
    assert "install: durable-chaos doctor --install toxiproxy" in out
    assert "restate cannot run here" in err


def test_doctor_simulator_is_always_ready(
        nowhere: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--path", "simulator"]) == 0
    assert "simulator: ready" in capsys.readouterr().out


def test_doctor_without_path_reports_every_path_and_exits_0(
        nowhere: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    for path in ("simulator", "restate", "temporal", "dbos", "containers"):
        assert f"\n{path}: " in f"\n{out}"
    # The fixture hides restate-server and toxiproxy-server: the restate path says so and
    # names the one command that installs them (whatever Python extras this venv has).
    assert "restate: NOT READY" in out
    assert "install: durable-chaos doctor --install restate" in out


def test_doctor_rejects_an_unknown_path(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["doctor", "--path", "kafka"])
    assert caught.value.code == 2
    assert "--path: invalid choice: 'kafka'" in capsys.readouterr().err


@pytest.mark.real
def test_doctor_path_restate_is_ready_with_every_component(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    found = {t: t.locate() for t in (RESTATE_SERVER, TOXIPROXY_SERVER)}
    if None in found.values():
        _unavailable("restate-server or toxiproxy-server is missing; run "
                     "`make restate toxiproxy`")
    from harness.components.postgres import PostgresUnavailable, find_binaries

    try:
        find_binaries()
    except PostgresUnavailable as exc:
        _unavailable(str(exc))
    for tool, where in found.items():
        assert where is not None
        monkeypatch.setenv(tool.env_var, str(where.path))
    assert main(["doctor", "--path", "restate"]) == 0
    out = capsys.readouterr().out
    assert "restate: ready" in out
    assert f"restate-server {pins.RESTATE_SERVER}" in out
    assert "(from $DURABLE_CHAOS_RESTATE_BIN)" in out


def test_an_install_without_npm_fails_in_one_line_and_leaves_no_entry(
        nowhere: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--install", "restate"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("durable-chaos: error: restate: npm is not on PATH")
    assert "DURABLE_CHAOS_RESTATE_BIN" in err
    leftovers = list(cache_dir().iterdir()) if cache_dir().exists() else []
    assert leftovers == []


def _install_env(monkeypatch: pytest.MonkeyPatch, program: str) -> None:
    """The real PATH for `program`; Go's own build cache stays where it was (Go derives it
    from XDG_CACHE_HOME, which the test moved: a cold cache would rebuild Toxiproxy)."""
    found = shutil.which(program, path=_ORIGINAL_PATH)
    if found is None:
        _unavailable(f"{program} is not installed; the doctor's install needs it")
    assert found is not None
    monkeypatch.setenv("PATH", f"{Path(found).parent}{os.pathsep}{_ORIGINAL_PATH}")
    if program == "go":
        gocache = subprocess.run([found, "env", "GOCACHE"], capture_output=True, text=True,
                                 env={**os.environ, "XDG_CACHE_HOME": _ORIGINAL_XDG or ""},
                                 check=True).stdout.strip()
        if gocache and gocache != "off":
            monkeypatch.setenv("GOCACHE", gocache)


_ORIGINAL_PATH = os.environ.get("PATH", "")
_ORIGINAL_XDG = os.environ.get("XDG_CACHE_HOME")


@pytest.mark.real
def test_doctor_installs_the_pinned_toxiproxy_into_the_cache(
        nowhere: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _install_env(monkeypatch, "go")
    assert main(["doctor", "--install", "toxiproxy"]) == 0
    out = capsys.readouterr().out
    target = TOXIPROXY_SERVER.cache_path()
    assert f"installed at {target}" in out
    version = subprocess.run([str(target), "-version"], capture_output=True, text=True,
                             check=True).stdout
    assert pins.TOXIPROXY in version
    assert TOXIPROXY_SERVER.locate() == binaries.Found(target, "cache")
    # A second install finds it there and does nothing.
    assert main(["doctor", "--install", "toxiproxy"]) == 0
    assert "already in the cache" in capsys.readouterr().out


@pytest.mark.real
def test_doctor_installs_the_pinned_restate_server_into_the_cache(
        nowhere: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _install_env(monkeypatch, "npm")
    assert main(["doctor", "--install", "restate"]) == 0
    target = RESTATE_SERVER.cache_path()
    assert f"installed at {target}" in capsys.readouterr().out
    version = subprocess.run([str(target), "--version"], capture_output=True, text=True,
                             check=True).stdout
    assert version.strip() == f"restate-server {pins.RESTATE_SERVER}"
    assert RESTATE_SERVER.locate() == binaries.Found(target, "cache")


def test_the_containers_path_needs_an_engine_that_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("docker") is None:
        _unavailable("the docker CLI is not installed (apt-get install docker.io)")
    dead = f"unix://{tmp_path / 'no-engine.sock'}"
    monkeypatch.setenv("DOCKER_HOST", dead)
    report = check_path("containers")
    engine = next(c for c in report.checks if c.name == "docker engine")
    assert not engine.found and not report.ok
    assert dead in engine.note
    assert engine.install.startswith("apt-get install docker.io")


def test_the_restate_path_needs_postgresql_server_binaries(
        nowhere: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("harness.components.postgres._VERSIONED_BIN_GLOB",
                        str(nowhere / "no-postgresql" / "*" / "bin"))
    report = check_path("restate")
    pg = next(c for c in report.checks if c.name == "postgresql server")
    assert not pg.found and not report.ok
    assert "initdb" in pg.note
    assert pg.install.startswith("apt-get install postgresql")
