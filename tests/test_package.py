"""durable-chaos as users get it: a wheel installed into a fresh virtual environment, run in
an empty directory; and where scenario files come from (`--scenarios`, the built-in library).

The wheel is built once per session (shared by xdist workers through a lock) from a copy of
the source tree, so the build leaves nothing in the repository; the fresh environment gets the
wheel and pytest from PyPI or pip's cache. Those tests carry the `package` marker.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli import main
from harness.schedules.library import builtin_dir, describe_sets, resolve

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
TOP_LEVEL = sorted(SCENARIOS.glob("*.toml"))
REAL = sorted((SCENARIOS / "real").glob("*.toml"))
_IGNORE = shutil.ignore_patterns(".git", ".venv", "node_modules", ".tools", "reports", "build",
                                 "dist", "*.egg-info", "__pycache__", ".mypy_cache",
                                 ".ruff_cache", ".pytest_cache", ".hypothesis", ".scratch")


# ---------------------------------------------------------------------------- sources


def test_the_library_is_the_top_level_scenarios_directory() -> None:
    assert builtin_dir().resolve() == SCENARIOS.resolve()
    assert resolve("builtin").files == tuple(TOP_LEVEL)
    assert resolve("builtin:real").files == tuple(REAL)


def test_scenarios_is_repeatable_and_each_set_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copy(TOP_LEVEL[0], mine / "my-story.toml")
    monkeypatch.chdir(tmp_path)
    code = main(["run", "--scenarios", "builtin:real", "--scenarios", "mine", "--schedules",
                 "0", "--quiet", "--report-dir", str(tmp_path / "out")])
    assert code == 0
    out = capsys.readouterr().out
    # Before, the second --scenarios replaced the first: 1 run, not len(REAL) + 1.
    assert f"reference: {len(REAL) + 1} run(s)" in out
    assert f"scenario sets: builtin:real ({len(REAL)}), mine (1)" in out
    html = (tmp_path / "out" / "index.html").read_text()
    assert f"<dt>Scenario sets</dt><dd>builtin:real ({len(REAL)}), mine (1)</dd>" in html


def test_without_scenarios_a_project_gets_its_own_else_the_library(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--schedules", "0", "--quiet", "--report-dir", "out"]) == 0
    assert f"scenario sets: builtin ({len(TOP_LEVEL)})" in capsys.readouterr().out
    (tmp_path / "scenarios").mkdir()
    shutil.copy(TOP_LEVEL[0], tmp_path / "scenarios" / "own.toml")
    assert main(["run", "--schedules", "0", "--quiet", "--report-dir", "out"]) == 0
    assert "scenario sets: scenarios (1)\n" in capsys.readouterr().out


def test_a_file_named_twice_runs_once() -> None:
    # In a checkout the library is ./scenarios: `builtin` and `scenarios` are the same files.
    from harness.schedules.library import resolve_all

    sources = resolve_all(["builtin", str(SCENARIOS)])
    assert [s.label for s in sources] == ["builtin"]


@pytest.mark.parametrize(("value", "message"), [
    ("empty", "--scenarios: empty holds no *.toml scenario files"),
    ("notes", "--scenarios: notes holds no *.toml scenario files"),
    ("missing", "--scenarios: missing does not exist"),
    ("builtin:nope", "--scenarios: builtin:nope is not a built-in scenario set; use builtin "
                     "or one of: builtin:known-bugs, builtin:real"),
])
def test_a_scenario_source_without_scenarios_is_a_usage_error(
        value: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.md").write_text("no scenarios here")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--scenarios", "builtin", "--scenarios", value, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"durable-chaos: error: {message}")
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "reports").exists()  # nothing ran


def test_none_cannot_be_combined(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--scenarios", "none", "--scenarios", "builtin", "--quiet"]) == 2
    assert "'none' means no scenario files and cannot be combined with builtin" in \
        capsys.readouterr().err


def test_describe_sets_counts_per_directory() -> None:
    from harness.schedules.scenario_file import load_scenario

    schedules = [load_scenario(f) for f in (*TOP_LEVEL[:2], *REAL[:1])]
    assert describe_sets(schedules) == ("builtin (2)", "builtin:real (1)")


def test_the_plugin_defaults_to_the_library_and_takes_builtin_real(
        pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--chaos-adapter", "reference", "--chaos-schedules",
                                          "0", "--collect-only", "-q")
    stems = [f.stem for f in TOP_LEVEL]
    result.stdout.fnmatch_lines([f"durable-chaos::reference::scenario[[]{s}[]]"
                                 for s in stems])
    assert f"{len(stems) + 1} tests collected" in result.stdout.str()
    real = pytester.runpytest_inprocess("--chaos-adapter", "reference", "--chaos-schedules",
                                        "0", "--chaos-scenarios=builtin:real", "--collect-only",
                                        "-q")
    assert f"{len(REAL) + 1} tests collected" in real.stdout.str()
    (pytester.path / "empty").mkdir()
    bad = pytester.runpytest_inprocess("--chaos-adapter", "reference",
                                       "--chaos-scenarios=empty")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--chaos-scenarios on the command line: empty holds no *.toml*"])


def test_the_plugin_report_says_which_scenario_sets_ran(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--chaos-adapter", "reference", "--chaos-schedules",
                                          "0", "--chaos-scenarios=builtin:real",
                                          "--chaos-report=out")
    result.assert_outcomes(passed=len(REAL) + 1)
    html = (pytester.path / "out" / "index.html").read_text()
    assert f"<dt>Scenario sets</dt><dd>builtin:real ({len(REAL)})</dd>" in html


# ---------------------------------------------------------------------------- the wheel


def _session_dir(factory: pytest.TempPathFactory) -> Path:
    """One directory per test session, shared by its xdist workers."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(the wheel, a fresh venv with it and pytest installed), built once per session."""
    shared = _session_dir(tmp_path_factory) / "durable-chaos-wheel"
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        venv = shared / "venv"
        wheels = sorted((shared / "dist").glob("durable_chaos-*.whl"))
        if not wheels or not (venv / "bin" / "durable-chaos").exists():
            _build_and_install(shared)
            wheels = sorted((shared / "dist").glob("durable_chaos-*.whl"))
    yield wheels[0], venv


def _run(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def _build_and_install(shared: Path) -> None:
    source = shared / "src"
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(ROOT, source, ignore=_IGNORE, symlinks=True)
    built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                  str(shared / "dist"), str(source)])
    assert built.returncode == 0, built.stderr[-3000:]
    venv = shared / "venv"
    shutil.rmtree(venv, ignore_errors=True)
    # No pip inside: the project's pip installs into it (--python), which saves ensurepip.
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    assert made.returncode == 0, made.stderr
    wheel = next((shared / "dist").glob("durable_chaos-*.whl"))
    done = _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                 "install", "-q", "--disable-pip-version-check", str(wheel), "pytest"])
    assert done.returncode == 0, done.stderr[-3000:]


def _user_env(home: Path) -> dict[str, str]:
    """An installed user's environment: the venv's bin first, no checkout on any path, no
    component variables, an empty components cache."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DURABLE_CHAOS_", "PYTEST_", "PYTHON")) and k != "CI"}
    env["XDG_CACHE_HOME"] = str(home / "cache")
    return env


pkg = pytest.mark.package


@pkg
def test_the_wheel_holds_every_scenario_file_and_module(
        installed: tuple[Path, Path]) -> None:
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    library = [f for f in SCENARIOS.rglob("*") if f.is_file() and "__pycache__" not in f.parts]
    assert library  # the library is not empty
    for f in library:
        assert f"harness/scenarios/{f.relative_to(SCENARIOS).as_posix()}" in names, f
    for package in ("contract", "harness", "reference_impl"):
        for f in (ROOT / package).rglob("*.py"):
            if "__pycache__" not in f.parts:
                assert f.relative_to(ROOT).as_posix() in names, f
    assert "harness/report/style.css" in names
    assert "contract/py.typed" in names


@pkg
def test_run_in_an_empty_directory_runs_the_builtin_scenarios(
        installed: tuple[Path, Path], tmp_path: Path) -> None:
    _, venv = installed
    done = _run([str(venv / "bin" / "durable-chaos"), "run", "--schedules", "3", "--quiet"],
                cwd=tmp_path, env=_user_env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"reference: {len(TOP_LEVEL) + 3} run(s), 0 with violations" in done.stdout
    assert f"scenario sets: builtin ({len(TOP_LEVEL)})" in done.stdout
    assert (tmp_path / "reports" / "index.html").is_file()
    assert (tmp_path / "reports" / "junit.xml").is_file()


@pkg
def test_the_plugin_runs_one_item_per_builtin_scenario(
        installed: tuple[Path, Path], tmp_path: Path) -> None:
    _, venv = installed
    done = _run([str(venv / "bin" / "python"), "-m", "pytest", "-p", "no:cacheprovider",
                 "--chaos-adapter", "reference", "--chaos-schedules", "0", "-v"],
                cwd=tmp_path, env=_user_env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    for f in TOP_LEVEL:
        assert f"durable-chaos::reference::scenario[{f.stem}] PASSED" in done.stdout
    assert f"{len(TOP_LEVEL) + 1} passed" in done.stdout  # + the adapter contract


@pkg
def test_doctor_and_the_real_path_from_the_wheel_say_what_to_install(
        installed: tuple[Path, Path], tmp_path: Path) -> None:
    _, venv = installed
    env = _user_env(tmp_path)
    doctor = _run([str(venv / "bin" / "durable-chaos"), "doctor", "--path", "restate"],
                  cwd=tmp_path, env=env)
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    assert "restate: NOT READY" in doctor.stdout
    assert "install: pip install 'durable-chaos[restate,postgres]'" in doctor.stdout
    assert "site-packages/node_modules" not in doctor.stdout  # no repository to look in
    if shutil.which("restate-server", path=env.get("PATH")) is None:
        assert "install: durable-chaos doctor --install restate" in doctor.stdout
    assert f"components cache: {tmp_path / 'cache' / 'durable-chaos'}" in doctor.stdout
    run = _run([str(venv / "bin" / "durable-chaos"), "run", "--adapter", "reference-restate",
                "--scenarios", "builtin:real", "--quiet"], cwd=tmp_path, env=env)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert "pip install 'durable-chaos[restate,postgres]'" in run.stderr


@pkg
@pytest.mark.real
def test_an_installed_user_gets_the_real_path_with_doctor_install(
        installed: tuple[Path, Path], tmp_path: Path) -> None:
    """The whole story of an installed user on the real path: the wheel with its extras, then
    `doctor --install restate toxiproxy` into an empty cache, then a scenario of the built-in
    real set. One scenario, not the set: the set costs a minute more and the real path's own
    tests (test_restate_*.py) run every scenario of it."""
    wheel, _ = installed
    for program in ("npm", "go"):
        if shutil.which(program) is None:
            _unavailable(f"{program} is not installed; `doctor --install` needs it")
    from harness.components.postgres import PostgresUnavailable, find_binaries

    try:
        find_binaries()
    except PostgresUnavailable as exc:
        _unavailable(str(exc))
    venv = tmp_path / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    assert made.returncode == 0, made.stderr
    done = _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                 "install", "-q", "--disable-pip-version-check", f"{wheel}[restate,postgres]"])
    assert done.returncode == 0, done.stderr[-3000:]
    env = _user_env(tmp_path)
    # Go derives its build cache from XDG_CACHE_HOME too: keep the user's warm one.
    env["GOCACHE"] = _run(["go", "env", "GOCACHE"]).stdout.strip()
    bin_dir = venv / "bin"
    install = _run([str(bin_dir / "durable-chaos"), "doctor", "--install", "restate",
                    "toxiproxy"], cwd=tmp_path, env=env)
    assert install.returncode == 0, install.stdout + install.stderr
    assert "restate: ready" in install.stdout
    assert install.stdout.count("(from cache)") == 2
    work = tmp_path / "project"
    work.mkdir()
    # The installed copy of a redeploy-and-answer story (real processes, registration, drain).
    where = _run([str(bin_dir / "python"), "-c", "from harness.schedules.library import "
                  "resolve; print(*resolve('builtin:real').files, sep='\\n')"], cwd=work, env=env)
    installed_real = [Path(p) for p in where.stdout.split()]
    assert [p.name for p in installed_real] == [p.name for p in REAL]
    assert all(str(venv) in str(p) for p in installed_real)
    story = next(p for p in installed_real if "across-redeploys" in p.name)
    run = _run([str(bin_dir / "durable-chaos"), "run", "--adapter", "reference-restate",
                "--scenarios", str(story), "--schedules", "0", "--quiet"], cwd=work, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "reference-restate: 1 run(s), 0 with violations, 0 unknown" in run.stdout
    assert "scenario sets: builtin:real (1)" in run.stdout


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI=true requires it")
    pytest.skip(reason)


def test_the_readme_commands_for_installed_users_parse() -> None:
    """Every `durable-chaos ...` line of the README's section for installed users is a
    command line the CLI accepts, and every `--chaos-*` option there is the plugin's."""
    import re
    import shlex

    from harness.cli import _parser

    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Install it in your own project", 1)[1].split("\n## ", 1)[0]
    commands = [line.split("  #")[0].strip() for line in section.splitlines()
                if line.strip().startswith("durable-chaos ") or "run: durable-chaos " in line]
    commands = [c.split("run: ", 1)[-1] for c in commands]
    assert len(commands) >= 6
    for command in commands:
        argv = shlex.split(command)[1:]
        _parser().parse_args(argv)  # exits 2 on an unknown option or a bad choice
    plugin = (ROOT / "harness" / "plugin.py").read_text()
    for option in set(re.findall(r"--chaos-[a-z]+", section)):
        assert f'"{option}"' in plugin, option
