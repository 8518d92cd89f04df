"""A table of hostile and careless cases, each through the CLI (a real process) and, where it
applies, the pytest plugin. What every case pins, whatever it throws at the harness:

- the exit status the README promises (2: usage, one line naming the file, field or option;
  3: could not judge, one line; 0/1 only for runs that were judged);
- at most one line of our own on stderr, never a traceback;
- evidence intact: a report whenever a run ran, nothing written outside the report
  directory, nothing from another run mixed in, the previous report whole when the new one
  cannot be written;
- nothing left behind: no process of the command's session outlives it.

Adapters are written as a user would, outside the package (tests/outside_adapters/).
"""

from __future__ import annotations

import fcntl
import html
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = ROOT / "tests" / "outside_adapters"
SCENARIO = ROOT / "scenarios" / "01-answered-in-2-minutes.toml"
sys.path.insert(0, str(OUTSIDE))
from hostile import ATTACKS  # noqa: E402

pytest_plugins = ["pytester"]


@dataclass(frozen=True)
class Done:
    code: int
    out: str
    err: str
    seconds: float


def _session_processes(sid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _none_left(sid: int, within: float = 10.0) -> None:
    give_up = time.monotonic() + within
    while (left := _session_processes(sid)) and time.monotonic() < give_up:
        time.sleep(0.05)
    assert not left, f"left behind: {left}"


def cli(args: list[str], cwd: Path, *, env: dict[str, str] | None = None,
        stdout: int | None = subprocess.PIPE, stderr: int | None = subprocess.PIPE,
        limit_file_size: int | None = None, timeout: float = 120) -> Done:
    """`durable-chaos ARGS` in a session of its own; none of its processes may outlive it."""
    def before() -> None:
        if limit_file_size is not None:
            # A full disk, without filling one: writes past the limit fail with EFBIG.
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_size, limit_file_size))

    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=cwd,
                            stdout=stdout, stderr=stderr, text=True, start_new_session=True,
                            preexec_fn=before,
                            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    _none_left(proc.pid)
    return Done(proc.returncode, out or "", err or "", time.monotonic() - started)


def one_line(err: str) -> str:
    """Our own line on stderr: exactly one, and no traceback anywhere."""
    assert "Traceback" not in err, err
    ours = [line for line in err.splitlines() if line.startswith("durable-chaos:")
            and not line.startswith("durable-chaos: warning:")]
    assert len(ours) == 1, err
    return ours[0]


def run_args(adapter: str, report: Path, *extra: str) -> list[str]:
    return ["run", "--adapter", adapter, "--adapter-path", str(OUTSIDE), "--scenarios",
            str(SCENARIO), "--schedules", "0", "--run-timeout", "0.5", "--report-dir",
            str(report), "--quiet", *extra]


def _inside(report: Path, base: Path) -> None:
    """Everything the run wrote is under `report` (nothing escaped into `base`)."""
    for path in base.rglob("*"):
        assert report in (path, *path.parents) or base / "in" in (path, *path.parents), path


# ---------------------------------------------------------------------------- 1. attacks

# (attack, where): every attack, in open(), in send_message() and in close(). An adapter that
# signals its own process group reaches its worker only, which ignores SIGINT: that run is
# judged as any other. A SystemExit from open() is an open() that fails (exit 2, pinned in
# test_misbehaving_adapters): it is run on its own below.
ATTACK_CASES = [(mode, where) for mode in ATTACKS for where in ("send", "open", "close")
                if (mode, where) != ("sys_exit_3", "open")]


@pytest.fixture(scope="module")
def attacked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Done, Path]]:
    """One command per place of attack, with every attacking adapter in it (a command per
    adapter cost a second each): the summary has a line per adapter."""
    found = {}
    for where in ("send", "open", "close"):
        base = tmp_path_factory.mktemp(f"attacked-{where}")
        report = base / "r"
        adapters = [arg for mode, at in ATTACK_CASES if at == where
                    for arg in ("--adapter", f"hostile:{mode}_{where}")]
        args = run_args("hostile:well_behaved", report)
        done = cli([args[0], *adapters, *args[1:]], base)
        found[where] = (done, report)
    return found


@pytest.mark.parametrize(("mode", "where"), ATTACK_CASES,
                         ids=[f"{m}-{w}" for m, w in ATTACK_CASES])
def test_an_adapter_that_attacks_its_process_never_decides_the_exit_status(
        mode: str, where: str, attacked: dict[str, tuple[Done, Path]]) -> None:
    done, report = attacked[where]
    assert done.code == 3, done.out + done.err
    line = one_line(done.err)
    assert line.startswith("durable-chaos: could not judge: "), line
    assert (report / "index.html").is_file() and (report / "junit.xml").is_file()
    _inside(report, report.parent)
    name = f"hostile-{mode}-{where}"
    if mode == "sigint_group":
        assert f"{name}: 1 run(s), 0 with violations, 0 unknown" in done.out, done.out
        return
    assert f"{name}: 1 run(s), 0 with violations, 1 unknown" in done.out, done.out
    why = done.out.split(f"{name}: 1 run(s)", 1)[1].split("unknown: 1 run(s), e.g. ", 1)[1]
    why = why.splitlines()[0].split(": ", 1)[1]
    page = html.unescape((report / "index.html").read_text(encoding="utf-8"))
    assert why in page, why


def test_an_adapter_whose_open_raises_system_exit_is_an_open_that_fails(
        tmp_path: Path) -> None:
    done = cli(run_args("hostile:sys_exit_3_open", tmp_path / "r"), tmp_path)
    assert done.code == 2
    assert "cannot run here: open() failed: SystemExit: 3" in one_line(done.err)
    assert (tmp_path / "r" / "index.html").is_file()


def test_an_adapter_that_forks_and_goes_on_in_the_harness_writes_nothing_twice(
        tmp_path: Path) -> None:
    report = tmp_path / "r"
    done = cli(run_args("hostile:fork_continues", report), tmp_path)
    assert done.code == 0, done.err
    runs = list((report / "runs" / "hostile-fork-continues").iterdir())
    assert [p.name for p in runs] == ["answered-in-2-minutes"]


def test_an_adapter_that_closes_stdout_in_its_worker_changes_nothing(tmp_path: Path) -> None:
    done = cli(run_args("hostile:close_stdout", tmp_path / "r"), tmp_path)
    assert done.code == 0, done.err
    assert "hostile-close-stdout: 1 run(s), 0 with violations, 0 unknown" in done.out


@pytest.mark.parametrize("how", ["os._exit(0)", "os.kill(os.getpid(), signal.SIGKILL)",
                                 "os.killpg(0, signal.SIGTERM)"])
def test_an_adapter_module_that_ends_its_process_at_import_is_exit_2(
        how: str, tmp_path: Path) -> None:
    (tmp_path / "dies.py").write_text(f"import os, signal\n{how}\nADAPTER = None\n",
                                      encoding="utf-8")
    done = cli(["run", "--adapter", "dies:ADAPTER", "--scenarios", str(SCENARIO),
                "--schedules", "0", "--report-dir", str(tmp_path / "r"), "--quiet"], tmp_path)
    assert done.code == 2, done.out + done.err
    assert "adapter 'dies:ADAPTER': loading it ended its process" in one_line(done.err)
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------------------- 2. bad input


def _deep(tmp: Path) -> Path:
    path = tmp / "deep.toml"
    path.write_text("a = " + "[" * 50_000 + "]" * 50_000 + "\n", encoding="utf-8")
    return path


def _deep_tables(tmp: Path) -> Path:
    path = tmp / "deep-tables.toml"
    path.write_text("a = " + "{b = " * 20_000 + "1" + "}" * 20_000 + "\n", encoding="utf-8")
    return path


def _fifo(tmp: Path) -> Path:
    path = tmp / "pipe.toml"
    os.mkfifo(path)
    return path


def _directory(tmp: Path) -> Path:
    path = tmp / "x.toml"
    path.mkdir()
    return path


def _loop(tmp: Path) -> Path:
    (tmp / "a.toml").symlink_to(tmp / "b.toml")
    (tmp / "b.toml").symlink_to(tmp / "a.toml")
    return tmp / "a.toml"


def _dangling(tmp: Path) -> Path:
    (tmp / "gone.toml").symlink_to(tmp / "nowhere.toml")
    return tmp / "gone.toml"


def _write(name: str, data: bytes) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / name
        path.write_bytes(data)
        return path
    return make


def _huge(tmp: Path) -> Path:
    path = tmp / "huge.toml"
    with open(path, "wb") as handle:
        handle.truncate(11 * 1024 * 1024)  # sparse: costs no disk
    return path


def _host(host: str, extra: str = "") -> Callable[[Path], Path]:
    body = (f'name = "h"\n{extra}[[step]]\nat = "0s"\ndo = "message"\nsession = "s1"\n'
            f'text = "t"\ntools = ["send_email"]\n[[step]]\nat = "1m"\ndo = "crash"\n'
            f'host = "{host}"\n')
    return _write("host.toml", body.encode())


def _dir_holding_a_directory(tmp: Path) -> Path:
    where = tmp / "scenarios"
    where.mkdir()
    (where / "ok.toml").write_bytes(SCENARIO.read_bytes())
    (where / "x.toml").mkdir()
    return where


BAD_FILES: list[tuple[str, Callable[[Path], Path], str]] = [
    ("fifo", _fifo, "is a FIFO, not a regular file"),
    ("directory-named-toml", _directory, "is a directory, not a regular file"),
    ("symlink-loop", _loop, "Too many levels of symbolic links"),
    ("dangling-symlink", _dangling, "No such file or directory"),
    ("missing", lambda tmp: tmp / "missing.toml", "No such file or directory"),
    ("deep-arrays", _deep, "nested too deeply"),
    ("deep-inline-tables", _deep_tables, "nested too deeply"),
    ("not-utf8", _write("latin.toml", b'name = "caf\xe9"\n'), "not UTF-8"),
    ("empty", _write("empty.toml", b""), "field 'step'"),
    ("binary", _write("bin.toml", bytes(range(256))), "not"),
    ("huge", _huge, "more than"),
    ("nul-bytes", _write("nul.toml", b"name = \"a\x00b\"\n"), "not valid TOML"),
    ("host-unknown", _host("nohost"), "field 'step[1].host': no host 'nohost'"),
    ("host-latest-9", _host("latest/9"), "field 'step[1].host': no host 'latest/9'"),
    ("host-dep-9", _host("dep9.h1"), "field 'step[1].host': no host 'dep9.h1'"),
    ("host-h3-of-2", _host("dep1.h3"), "field 'step[1].host': no host 'dep1.h3'"),
    ("host-h0", _host("latest/0"), "no host 'latest/0'"),
    ("hosts-1-latest-2", _host("latest/2", "hosts = 1\n"), "no host 'latest/2'"),
]


@pytest.mark.parametrize("command", ["run", "replay"])
@pytest.mark.parametrize(("case", "make", "says"), BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_input_that_is_not_a_scenario_file_is_exit_2_naming_it(
        command: str, case: str, make: Callable[[Path], Path], says: str,
        tmp_path: Path) -> None:
    where = tmp_path / "in"
    where.mkdir()
    path = make(where)
    report = tmp_path / "r"
    args = (["run", "--scenarios", str(path), "--schedules", "0"] if command == "run"
            else ["replay", str(path)])
    done = cli([*args, "--report-dir", str(report), "--quiet"], tmp_path, timeout=60)
    assert done.code == 2, done.out + done.err
    line = one_line(done.err)
    assert str(path) in line, line
    if command == "replay" or case not in ("directory-named-toml", "symlink-loop",
                                           "dangling-symlink", "missing"):
        # `--scenarios` also takes directories: what is not a file is said its own way.
        assert says in line, line
    assert not report.exists()


def test_a_scenario_directory_holding_a_directory_named_toml_is_exit_2(tmp_path: Path) -> None:
    where = _dir_holding_a_directory(tmp_path)
    done = cli(["run", "--scenarios", str(where), "--schedules", "0", "--report-dir",
                str(tmp_path / "r"), "--quiet"], tmp_path)
    assert done.code == 2
    assert f"{where / 'x.toml'}: field '-': is a directory" in one_line(done.err)


# ---------------------------------------------------------------------------- 3. options

SCEN = str(SCENARIO)
# The "before" design (adapter naive) breaks pinning-bound here: exit 1.
SECOND = str(ROOT / "scenarios" / "02-answered-after-3-days-across-redeploys.toml")
OPTIONS: list[tuple[str, list[str], str]] = [
    ("empty-adapter", ["run", "--adapter", ""], "--adapter: empty"),
    ("blank-adapter", ["run", "--adapter", "  "], "--adapter: empty"),
    ("empty-adapter-path", ["run", "--adapter-path", ""], "--adapter-path: empty"),
    ("empty-scenarios", ["run", "--scenarios", ""], "--scenarios: empty"),
    ("empty-report-dir", ["run", "--report-dir", ""], "--report-dir: empty"),
    ("empty-invariants", ["run", "--invariants", ""], "--invariants:"),
    ("comma-invariants", ["run", "--invariants", ",,"], "--invariants:"),
    ("empty-seed", ["run", "--seed", ""], "--seed: expected an integer"),
    ("empty-schedules", ["run", "--schedules", ""], "--schedules: expected an integer"),
    ("negative-schedules", ["run", "--schedules=-1"], "--schedules: expected a number >= 0"),
    ("float-schedules", ["run", "--schedules", "1e3"], "--schedules: expected an integer"),
    ("negative-seed", ["run", "--seed=-1"], "--seed: expected a number >= 0"),
    ("workers-0", ["run", "--workers", "0"], "--workers: expected at least 1"),
    ("workers-negative", ["run", "--workers=-2"], "--workers: expected a number >= 0"),
    ("budget-0", ["run", "--time-budget", "0"], "--time-budget"),
    ("budget-inf", ["run", "--time-budget", "inf"], "--time-budget"),
    ("budget-words", ["run", "--time-budget", "soon"], "--time-budget"),
    ("timeout-nan", ["run", "--run-timeout", "nan"], "--run-timeout"),
    ("timeout-negative", ["run", "--run-timeout=-1"], "--run-timeout"),
    ("unknown-adapter", ["run", "--adapter", "nosuch"], "unknown adapter 'nosuch'"),
    ("adapter-no-attr", ["run", "--adapter", "hostile:"], "both parts named"),
    ("unknown-option", ["run", "--bogus", "3"], "unrecognized arguments"),
    ("replay-nothing", ["replay"], "replay: give a SCHEDULE.toml or --seed S"),
    ("replay-empty-file", ["replay", ""], "replay: empty SCHEDULE.toml"),
    ("replay-file-and-seed", ["replay", SCEN, "--seed", "1"], "not both"),
    ("replay-file-and-schedules", ["replay", SCEN, "--schedules", "5"],
     "--schedules goes with --seed"),
    ("replay-file-and-zero-schedules", ["replay", SCEN, "--schedules", "0"],
     "--schedules goes with --seed"),
    ("replay-empty-seed", ["replay", "--seed", ""], "--seed: expected an integer"),
    ("invariant-typo", ["run", "--invariants", "busy-rul"], "did you mean 'busy-rule'"),
    ("components-bad", ["run", "--components", "vms"], "--components"),
]


@pytest.mark.parametrize(("case", "args", "says"), OPTIONS, ids=[c[0] for c in OPTIONS])
def test_a_bad_or_ignored_option_is_exit_2_in_one_line(
        case: str, args: list[str], says: str, tmp_path: Path) -> None:
    report = tmp_path / "r"
    extra = [] if "--report-dir" in args else ["--report-dir", str(report)]
    done = cli([*args, *extra, "--quiet"], tmp_path, timeout=60)
    assert done.code == 2, done.out + done.err
    assert "Traceback" not in done.err
    lines = done.err.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], done.err
    assert not report.exists()


@pytest.mark.parametrize("where", ["file", "under-file"])
def test_a_report_dir_that_is_not_a_directory_is_exit_2(where: str, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    target = tmp_path / "f" if where == "file" else tmp_path / "f" / "r"
    done = cli(["run", "--scenarios", SCEN, "--schedules", "0", "--report-dir", str(target),
                "--quiet"], tmp_path)
    assert done.code == 2
    assert "--report-dir" in one_line(done.err)
    assert (tmp_path / "f").read_text() == "x"


def test_more_workers_than_cores_are_capped_with_a_warning(tmp_path: Path) -> None:
    done = cli(["run", "--scenarios", "none", "--schedules", "4", "--workers", "64",
                "--report-dir", str(tmp_path / "r"), "--quiet"], tmp_path)
    assert done.code == 0, done.err
    cores = os.cpu_count() or 1
    assert f"durable-chaos: warning: --workers: 64 is more than the {cores} core(s) here; " \
           f"using {cores}" in done.err


# ---------------------------------------------------------------------------- 4. names


def _scenario(path: Path, name: str) -> Path:
    text = SCENARIO.read_text(encoding="utf-8").replace('name = "answered-in-2-minutes"',
                                                        f"name = {name!r}")
    path.write_text(text, encoding="utf-8")
    return path


NAMES = [("dotdot", ".."), ("dot", "."), ("escape", "../../escaped"), ("slash", "a/b"),
         ("absolute", "/etc/passwd"), ("hidden", ".hidden"), ("spaces", "  "),
         ("backslash", "..\\..\\x")]


@pytest.mark.parametrize(("case", "name"), NAMES, ids=[c for c, _ in NAMES])
def test_a_scenario_name_is_never_a_path(case: str, name: str, tmp_path: Path) -> None:
    where = tmp_path / "in"
    where.mkdir()
    _scenario(where / "one.toml", name)
    report = tmp_path / "r"
    done = cli(["run", "--scenarios", str(where / "one.toml"), "--schedules", "0",
                "--report-dir", str(report), "--quiet"], tmp_path)
    if case == "spaces":  # not a name at all: refused by the scenario format
        assert done.code in (0, 2)
        return
    assert done.code == 0, done.err
    _inside(report, tmp_path)
    runs = [p for p in (report / "runs" / "reference").iterdir()]
    assert len(runs) == 1 and not runs[0].name.startswith("."), runs
    assert (runs[0] / "history.jsonl").is_file()


@pytest.mark.parametrize("adapter", ["dotdot_name", "slash_name"])
def test_an_adapter_name_is_never_a_path(adapter: str, tmp_path: Path) -> None:
    report = tmp_path / "r"
    done = cli(run_args(f"hostile:{adapter}", report), tmp_path)
    assert done.code == 0, done.err
    _inside(report, tmp_path)
    assert len(list((report / "runs").iterdir())) == 1


@pytest.mark.parametrize(("first", "second"), [("same", "same"), ("a b", "a-b"),
                                               ("x/y", "x-y")])
def test_two_scenarios_whose_names_collide_get_two_directories(
        first: str, second: str, tmp_path: Path) -> None:
    where = tmp_path / "in"
    where.mkdir()
    _scenario(where / "1.toml", first)
    _scenario(where / "2.toml", second)
    report = tmp_path / "r"
    done = cli(["run", "--scenarios", str(where), "--schedules", "0", "--report-dir",
                str(report), "--quiet"], tmp_path)
    assert done.code == 0, done.err
    runs = sorted((report / "runs" / "reference").iterdir())
    assert len(runs) == 2, runs
    assert all((run / "history.jsonl").is_file() for run in runs)


def test_a_second_run_does_not_mix_its_histories_with_the_first(tmp_path: Path) -> None:
    report = tmp_path / "r"
    base = ["run", "--scenarios", SCEN, "--schedules", "0", "--report-dir", str(report),
            "--quiet"]
    assert cli(base, tmp_path).code == 0
    (report / "runs" / "reference" / "stale-from-before").mkdir()
    assert cli(base, tmp_path).code == 0
    assert [p.name for p in (report / "runs" / "reference").iterdir()] == [
        "answered-in-2-minutes"]


# ---------------------------------------------------------------------------- 5. output


def test_a_report_dir_in_use_by_another_run_is_exit_2_naming_the_holder(
        tmp_path: Path) -> None:
    report = tmp_path / "r"
    report.mkdir()
    with open(report / ".durable-chaos.lock", "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        handle.write("pid 4242 since 10:00:00\n")
        handle.flush()
        done = cli(["run", "--scenarios", SCEN, "--schedules", "0", "--report-dir",
                    str(report), "--quiet"], tmp_path)
    assert done.code == 2
    line = one_line(done.err)
    assert "in use by another run (pid 4242 since 10:00:00)" in line
    assert not (report / "index.html").exists()


def test_two_runs_at_once_into_one_report_dir_one_waits_never_mixes(tmp_path: Path) -> None:
    report = tmp_path / "r"
    first = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--scenarios", "none", "--schedules",
         "100000", "--time-budget", "20", "--report-dir", str(report)], cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert first.stderr is not None
        assert first.stderr.readline().startswith("[")  # running
        second = cli(["run", "--scenarios", SCEN, "--schedules", "0", "--report-dir",
                      str(report), "--quiet"], tmp_path)
        assert second.code == 2
        assert f"pid {first.pid}" in one_line(second.err)
        os.killpg(first.pid, signal.SIGINT)
        first.communicate(timeout=60)
        assert first.returncode == 130
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    _none_left(first.pid)


@pytest.mark.parametrize("adapter", ["reference", "naive"])
def test_a_full_disk_is_exit_3_naming_the_path_and_the_old_report_stays_whole(
        adapter: str, tmp_path: Path) -> None:
    report = tmp_path / "r"
    report.mkdir()
    old = "<html>the previous report, whole</html>" + " " * 20_000
    (report / "index.html").write_text(old)
    done = cli(["run", "--adapter", adapter, "--scenarios", SECOND, "--schedules", "0",
                "--report-dir", str(report), "--quiet"], tmp_path, limit_file_size=16_384)
    assert done.code == 3, done.out + done.err  # never 1, never 0
    line = one_line(done.err)
    assert line.startswith("durable-chaos: could not judge: cannot write ") and \
        str(report) in line, line
    assert "run(s)" in done.out  # the summary is still printed
    page = (report / "index.html").read_text()
    assert page == old or page.rstrip().endswith("</html>")  # old or new, whole
    assert not list(report.glob(".*.tmp"))


@pytest.mark.parametrize("where", ["histories", "report"])
def test_an_unwritable_history_or_report_is_exit_3(where: str, tmp_path: Path) -> None:
    report = tmp_path / "r"
    report.mkdir()
    if where == "histories":
        (report / "runs").write_text("a file where the histories go")
    else:
        (report / "index.html").mkdir()  # replacing it fails
    done = cli(["run", "--scenarios", SCEN, "--schedules", "0", "--report-dir", str(report),
                "--quiet"], tmp_path)
    assert done.code == 3, done.out + done.err
    assert one_line(done.err).startswith("durable-chaos: could not judge: cannot write")


STREAMS = [("stdout-closed-pipe", "pipe", None), ("stdout-dev-full", "full", None),
           ("stderr-dev-full", None, "full"), ("both-dev-full", "full", "full"),
           ("stdout-devnull", "null", None)]


@pytest.mark.parametrize(("case", "out", "err"), STREAMS, ids=[c for c, _, _ in STREAMS])
@pytest.mark.parametrize("adapter", ["reference", "naive"])
def test_a_closed_or_full_terminal_does_not_change_the_verdict(
        case: str, out: str | None, err: str | None, adapter: str, tmp_path: Path) -> None:
    files = {"full": "/dev/full", "null": os.devnull}
    handles = ExitStack()
    stdout: int | None = subprocess.PIPE
    stderr: int | None = subprocess.PIPE
    read_end = None
    if out == "pipe":
        read_end, write_end = os.pipe()
        os.close(read_end)  # `| head -0`: nobody reads
        stdout = write_end
    elif out is not None:
        stdout = handles.enter_context(open(files[out], "w")).fileno()  # noqa: SIM115
    if err is not None:
        stderr = handles.enter_context(open(files[err], "w")).fileno()  # noqa: SIM115
    try:
        done = cli(["run", "--adapter", adapter, "--scenarios", SECOND, "--schedules", "0",
                    "--report-dir", str(tmp_path / "r")], tmp_path, stdout=stdout,
                   stderr=stderr)
    finally:
        handles.close()
        if out == "pipe":
            os.close(stdout)  # type: ignore[arg-type]
    assert done.code == (1 if adapter == "naive" else 0), done.err
    assert (tmp_path / "r" / "index.html").is_file()


# ---------------------------------------------------------------------------- 6. bounds


def test_a_huge_number_of_schedules_starts_at_once_and_keeps_its_budget(
        tmp_path: Path) -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # A budget long enough for a worker to start and run something on a loaded machine
    # (with nothing run, the command rightly exits 3: nothing was judged).
    done = cli(["run", "--scenarios", "none", "--schedules", "100000000", "--time-budget",
                "10", "--report-dir", str(tmp_path / "r"), "--quiet"], tmp_path, timeout=120)
    assert done.code == 0, done.err
    assert done.seconds < 60, done.seconds
    assert "the run was incomplete (out of time budget)" in done.out
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert max(peak, before) < 400_000  # kilobytes: flat, not gigabytes


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_a_huge_run_within_seconds_with_a_report(
        signum: int, status: int, tmp_path: Path) -> None:
    report = tmp_path / "r"
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--scenarios", "none", "--schedules",
         "100000000", "--report-dir", str(report)], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith("[")
        sent = time.monotonic()
        os.killpg(proc.pid, signum)
        _, err = proc.communicate(timeout=60)
        assert time.monotonic() - sent < 20
        assert proc.returncode == status, err
        assert "Traceback" not in err
        assert 'class="incomplete"' in (report / "index.html").read_text(encoding="utf-8")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    _none_left(proc.pid)


# ---------------------------------------------------------------------------- 7. left behind


def test_workers_die_with_a_parent_killed_with_sigkill(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--scenarios", "none", "--schedules",
         "100000000", "--workers", "2", "--report-dir", str(tmp_path / "r")], cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)})
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith("[")
        assert len(_session_processes(proc.pid)) >= 3  # the parent and its two workers
        os.kill(proc.pid, signal.SIGKILL)  # the parent alone
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    _none_left(proc.pid)
    # Its scratch directory is left; the next run sweeps it.
    done = cli(["run", "--scenarios", "none", "--schedules", "2", "--report-dir",
                str(tmp_path / "r2"), "--quiet"], tmp_path, env={"TMPDIR": str(tmp_path)})
    assert done.code == 0
    assert not list(tmp_path.glob("durable-chaos-batch-*"))


def test_the_next_run_sweeps_scratch_of_dead_runs_only(tmp_path: Path) -> None:
    dead = tmp_path / "durable-chaos-batch-999999999-abc"
    alive = tmp_path / f"durable-chaos-batch-{os.getpid()}-abc"
    for path in (dead, alive):
        path.mkdir()
        (path / "history.jsonl").write_text("{}")
    done = cli(["run", "--scenarios", SCEN, "--schedules", "3", "--report-dir",
                str(tmp_path / "r"), "--quiet"], tmp_path, env={"TMPDIR": str(tmp_path)})
    assert done.code == 0, done.err
    assert not dead.exists() and alive.is_dir()
    assert [p.name for p in tmp_path.glob("durable-chaos-batch-*")] == [alive.name]


# ---------------------------------------------------------------------------- 8. the plugin

PLUGIN_ATTACKS = ["os_exit_0_send", "os_exit_1_send", "sigkill_self_send", "sigterm_self_send",
                  "abort_send", "blocked_hang_send", "fork_sleeps_send", "exit_in_thread_send",
                  "sys_exit_3_send", "sigterm_group_send"]


@pytest.fixture(scope="module")
def attacked_session(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    """One pytest session, in a process of its own, with every attacking adapter at once."""
    project = tmp_path_factory.mktemp("project")
    (project / "hostile.py").write_bytes((OUTSIDE / "hostile.py").read_bytes())
    (project / "one.toml").write_bytes(SCENARIO.read_bytes())
    (project / "pytest.ini").write_text("[pytest]\npythonpath = .\n", encoding="utf-8")
    specs = ",".join(f"hostile:{a}" for a in [*PLUGIN_ATTACKS, "well_behaved"])
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
         f"--chaos-adapter={specs}", "--chaos-scenarios=one.toml", "--chaos-schedules=0",
         "--chaos-run-timeout=0.5", "--chaos-report=out", "-rA"], cwd=project,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    _none_left(proc.pid)
    return proc.returncode, out, project


@pytest.mark.parametrize("attack", PLUGIN_ATTACKS)
def test_the_plugin_fails_an_attacked_item_as_unknown_and_goes_on(
        attack: str, attacked_session: tuple[int, str, Path]) -> None:
    status, text, project = attacked_session
    assert status == pytest.ExitCode.TESTS_FAILED, text[-3000:]
    assert "Traceback" not in text
    node = f"durable-chaos::hostile:{attack}::"
    assert f"PASSED {node}contract" in text, text[-3000:]
    assert f"FAILED {node}scenario[one]" in text, text[-3000:]
    assert "PASSED durable-chaos::hostile:well_behaved::scenario[one]" in text
    assert (project / "out" / "index.html").is_file()
    assert (project / "out" / "junit.xml").is_file()


PLUGIN_BAD = [(case, make, says) for case, make, says in BAD_FILES
              if case in ("fifo", "directory-named-toml", "symlink-loop", "deep-arrays",
                          "not-utf8", "host-unknown", "huge", "nul-bytes")]


@pytest.mark.parametrize(("case", "make", "says"), PLUGIN_BAD, ids=[c[0] for c in PLUGIN_BAD])
def test_the_plugin_refuses_input_that_is_not_a_scenario_file(
        case: str, make: Callable[[Path], Path], says: str, pytester: pytest.Pytester) -> None:
    path = make(pytester.path)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider",
                                          "--chaos-adapter=reference",
                                          f"--chaos-scenarios={path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str().strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1 and str(path) in err, err
    if case not in ("directory-named-toml", "symlink-loop"):  # a directory is a source too
        assert says in err, err


def test_the_plugin_refuses_a_report_dir_another_run_holds(pytester: pytest.Pytester) -> None:
    report = pytester.path / "out"
    report.mkdir()
    with open(report / ".durable-chaos.lock", "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        handle.write("pid 4242\n")
        handle.flush()
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider",
                                              "--chaos-adapter=reference",
                                              "--chaos-scenarios=none",
                                              f"--chaos-report={report}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "in use by another run (pid 4242)" in result.stderr.str()


def test_the_plugin_refuses_an_adapter_module_that_ends_its_process_at_import(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(dies="import os\nos._exit(0)\n")
    pytester.makeini("[pytest]\npythonpath = .\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider",
                                          "--chaos-adapter=dies:ADAPTER")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "loading it ended its process" in result.stderr.str()


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 2)])
def test_under_xdist_a_signal_still_reports_every_run_finished_on_every_worker(
        signum: int, status: int, tmp_path: Path) -> None:
    """Two xdist workers run the built-in scenarios, then generated items that would run
    for hours; once every scenario run finished (each worker spools its runs as they end),
    the signal goes to the whole session: the report holds all of them, marked incomplete."""
    from harness.schedules.library import default_sources

    names = [path.stem for path in default_sources(Path("/nonexistent"))[0].files]
    assert len(names) >= 21
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    report = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-n", "2", "--dist", "load", "--chaos-adapter=reference",
         "--chaos-scenarios=builtin", "--chaos-schedules=100000000", "--chaos-seed=1",
         f"--chaos-report={report}", "-q"], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        give_up = time.monotonic() + 180
        while True:
            spooled = sum(len(p.read_text().splitlines())
                          for p in report.glob(".xdist-runs-*.jsonl")) if report.is_dir() else 0
            if spooled >= len(names):
                break
            assert proc.poll() is None, proc.communicate()[0][-3000:]
            assert time.monotonic() < give_up, f"only {spooled} runs spooled"
            time.sleep(0.1)
        workers = {p.name for p in report.glob(".xdist-runs-*.jsonl")}
        assert len(workers) == 2, workers  # both workers finished runs
        os.killpg(proc.pid, signum)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    _none_left(proc.pid)
    assert proc.returncode == status, out[-3000:]
    junit = (report / "junit.xml").read_text(encoding="utf-8")
    assert 'name="complete" value="false"' in junit
    page = (report / "index.html").read_text(encoding="utf-8")
    for stem in names:
        name = stem.split("-", 1)[1]
        assert name in page, name
    assert not list(report.glob(".xdist-runs-*.jsonl"))


def test_the_plugin_caps_chaos_workers_at_the_cores_with_a_warning(
        pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--chaos-adapter=reference",
                                          "--chaos-scenarios=none", "--chaos-schedules=2",
                                          "--chaos-workers=64", "-k", "busy")
    cores = os.cpu_count() or 1
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"*--chaos-workers on the command line: 64 is more than the "
                                 f"{cores} core(s) here; using {cores}*"])
