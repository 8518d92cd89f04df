"""Never green on nothing: what `durable-chaos` exits with when runs cannot be judged, when
an adapter cannot run, when it hangs, when it is interrupted, and on bad input.

User adapters here are modules written into a temporary directory and loaded as
`module:attribute`, as a user's own would be: they wrap the reference on the simulator and
break in one place (their open() raises, their finish() raises, their advance() blocks).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from harness.cli import main

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "01-answered-in-2-minutes.toml"
NAIVE_FAILS = ROOT / "scenarios" / "02-answered-after-3-days-across-redeploys.toml"

ADAPTER = '''
import threading
import time
from pathlib import Path

from harness.adapters import load_adapter

MODE = {mode!r}
MARK = Path({mark!r})


class Runtime:
    def __init__(self, inner):
        self._inner = inner
        self.world = inner.world
        self.now = inner.now
        self.send_message, self.answer = inner.send_message, inner.answer
        self.background, self.cancel = inner.background, inner.cancel

    def advance(self, until):
        if MODE == "block":
            threading.Event().wait()  # an engine that never answers
        if MODE == "monotonic":
            # A real adapter waiting a moment for its engine, by the wall clock.
            deadline = time.monotonic() + 0.001
            while time.monotonic() < deadline:
                pass
        self._inner.advance(until)

    def finish(self):
        if MODE == "finish":
            raise RuntimeError("the database went away")
        self._inner.finish()

    def close(self):
        MARK.write_text("closed")
        self._inner.close()


class Adapter:
    name = {name!r}
    description = "a user's adapter around the reference"
    engine = {engine!r}

    def __init__(self):
        if MODE == "factory":
            raise ValueError("missing ENGINE_URL")
        self._inner = load_adapter("reference")

    def check_config(self):
        if MODE == "check_config":
            raise KeyError("hand_off_after")
        return self._inner.check_config()

    def open(self, ctx):
        if MODE == "open":
            raise ConnectionRefusedError("no engine at 127.0.0.1:9")
        return Runtime(self._inner.open(ctx))


def make():
    return Adapter()
{extra}
'''


def user_adapter(where: Path, mode: str = "", *, engine: str = "sim", name: str = "user",
                 extra: str = "", body: str | None = None) -> str:
    """Write a user's adapter module into `where`; its `module:attribute` spec."""
    module = f"user_adapter_{uuid.uuid4().hex[:12]}"
    text = body if body is not None else ADAPTER.format(
        mode=mode, mark=str(where / f"{module}.closed"), name=name, engine=engine,
        extra=textwrap.dedent(extra))
    (where / f"{module}.py").write_text(text, encoding="utf-8")
    return f"{module}:make"


def closed(where: Path, spec: str) -> bool:
    return (where / f"{spec.partition(':')[0]}.closed").exists()


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    return err


def _run(*args: str, report: Path, scenario: Path = SCENARIO) -> list[str]:
    return ["run", "--scenarios", str(scenario), "--schedules", "0", "--report-dir",
            str(report), "--quiet", *args]


# ---------------------------------------------------------------------------- unknown runs


def test_unknown_runs_exit_3_unless_allowed(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    spec = user_adapter(tmp_path, "finish")
    assert main(_run("--adapter", spec, report=tmp_path / "r")) == 3
    captured = capsys.readouterr()
    assert "1 run(s), 0 with violations, 1 unknown" in captured.out
    assert "the database went away" in captured.out
    assert "could not judge: 1 run(s) unknown" in captured.err
    assert (tmp_path / "r" / "index.html").exists()
    assert main(_run("--adapter", spec, "--allow-unknown", report=tmp_path / "r")) == 0


def test_violations_outrank_unknown_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    monkeypatch.chdir(tmp_path)
    spec = user_adapter(tmp_path, "finish")
    assert main(_run("--adapter", "naive", "--adapter", spec, report=tmp_path / "r",
                     scenario=NAIVE_FAILS)) == 1


def test_an_adapter_whose_open_fails_on_its_first_run_ends_the_suite_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = user_adapter(tmp_path, "open")
    code = main(["run", "--adapter", spec, "--scenarios", str(ROOT / "scenarios"),
                 "--schedules", "50", "--report-dir", str(tmp_path / "r"), "--quiet"])
    assert code == 2
    err = _err(capsys)
    assert f"adapter '{spec}' cannot run here: open() failed: ConnectionRefusedError: no " \
           "engine at 127.0.0.1:9" in err
    # It stopped at the first run instead of failing 15 scenarios and 50 schedules alike.
    assert len(list((tmp_path / "r" / "runs").glob("*/*"))) == 1
    assert (tmp_path / "r" / "index.html").exists()


def test_a_failing_preflight_is_exit_2_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = user_adapter(tmp_path, extra='''
        from harness.errors import ComponentUnavailable

        def _preflight(self):
            raise ComponentUnavailable("engine-server not found; run `make engine`")

        Adapter.preflight = _preflight
        ''')
    assert main(_run("--adapter", spec, report=tmp_path / "r")) == 2
    assert f"adapter '{spec}' cannot run here: engine-server not found; run `make engine`" \
        in _err(capsys)
    assert not (tmp_path / "r").exists()


def test_reference_restate_without_toxiproxy_is_exit_2_naming_the_make_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DURABLE_CHAOS_TOXIPROXY_BIN", str(tmp_path / "no-toxiproxy"))
    monkeypatch.delenv("DURABLE_CHAOS_RESTATE_INGRESS_URL", raising=False)
    monkeypatch.delenv("DURABLE_CHAOS_RESTATE_ADMIN_URL", raising=False)
    assert main(_run("--adapter", "reference-restate", report=tmp_path / "r")) == 2
    err = _err(capsys)
    assert "adapter 'reference-restate' cannot run here" in err
    assert "DURABLE_CHAOS_TOXIPROXY_BIN" in err and "toxiproxy" in err
    assert not (tmp_path / "r").exists()


def test_restate_urls_that_do_not_answer_are_exit_2_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for name in ("DURABLE_CHAOS_RESTATE_INGRESS_URL", "DURABLE_CHAOS_RESTATE_ADMIN_URL"):
        # Set, then deleted: monkeypatch then removes what main() sets there (use_restate),
        # which would otherwise leak into every later test's replay commands.
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    code = main(_run("--adapter", "reference-restate", "--restate-ingress-url",
                     f"http://127.0.0.1:{port}", "--restate-admin-url",
                     f"http://127.0.0.1:{port}", report=tmp_path / "r"))
    assert code == 2
    err = _err(capsys)
    assert f"--restate-ingress-url http://127.0.0.1:{port} does not answer" in err
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------------------- hangs


def test_a_run_blocked_inside_advance_ends_unknown_at_its_timeout_and_is_closed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = user_adapter(tmp_path, "block", engine="real")
    code = main(_run("--adapter", spec, "--run-timeout", "0.5", report=tmp_path / "r"))
    assert code == 3
    out = capsys.readouterr().out
    assert "timed out: the run passed its wall-clock limit of 0.5s" in out
    assert closed(tmp_path, spec)


def test_the_watchdog_leaves_a_run_that_finishes_in_time_alone() -> None:
    from harness.errors import RunTimeout
    from harness.watchdog import SIGNAL, Watchdog

    before = signal.getsignal(SIGNAL)
    with Watchdog(30.0) as dog:
        pass
    assert not dog.fired and signal.getsignal(SIGNAL) == before
    with pytest.raises(RunTimeout), Watchdog(0.05):
        threading_event_wait_forever()


def test_the_watchdog_interrupts_again_an_adapter_that_swallows_the_first_interrupt() -> None:
    import threading

    from harness.errors import RunTimeout
    from harness.watchdog import Watchdog

    swallowed = []
    with pytest.raises(RunTimeout), Watchdog(0.05):
        try:
            threading.Event().wait()
        except BaseException as exc:  # an adapter's over-broad cleanup, then it blocks again
            swallowed.append(exc)
            threading.Event().wait()
    assert len(swallowed) == 1 and isinstance(swallowed[0], RunTimeout)


def test_the_watchdog_interrupts_a_run_on_a_worker_thread() -> None:
    import threading
    import time

    from harness.errors import RunTimeout
    from harness.watchdog import Watchdog

    seen: list[str] = []

    def work() -> None:
        try:
            with Watchdog(0.1):
                while True:
                    time.sleep(0.01)
        except RunTimeout:
            seen.append("timed out")
        time.sleep(0.2)  # nothing lands after the block
        seen.append("went on")

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(10)
    assert seen == ["timed out", "went on"]


def threading_event_wait_forever() -> None:
    import threading

    threading.Event().wait()


# ---------------------------------------------------------------------------- steps


LATE_AND_DROPPED = """\
name = "late-and-dropped"

[[step]]
at = "0s"
do = "message"
session = "s1"
tools = ["send_email"]

[[step]]
at = "1m"
do = "clock-jump"
duration = "2d"

[[step]]
at = "10m"
do = "answer"
session = "s1"

[[step]]
at = "3d"
do = "message"
session = "s2"

[[step]]
at = "3d1m"
do = "answer"
session = "s2"

[[step]]
at = "3d2m"
do = "background"
session = "nobody"
"""


def test_late_and_dropped_steps_are_in_the_summary_and_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "late.toml"
    scenario.write_text(LATE_AND_DROPPED, encoding="utf-8")
    main(_run(report=tmp_path / "r", scenario=scenario))
    out = capsys.readouterr().out
    assert "steps not applied as written: 1 late, 2 dropped" in out
    assert "step 2 (answer at 10.0m, s1) applied 47.9h late" in out
    page = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    assert "step 2 (answer at 10.0m, s1) applied 47.9h late" in page
    assert "step 4 (answer at 3.00d, s2) dropped: no open card" in page
    assert "step 5 (background at 3.00d, nobody) dropped: unknown session" in page
    assert "Steps not applied as written" in page


def test_generated_steps_not_applied_are_counted_apart_from_the_scenario_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Random timing drops generated answers by the hundred in a default run: they must not
    # read as the scenario author's mistake (nor bury one).
    scenario = tmp_path / "late.toml"
    scenario.write_text(LATE_AND_DROPPED, encoding="utf-8")
    args = _run(report=tmp_path / "r", scenario=scenario)
    args[args.index("--schedules") + 1] = "30"
    main([*args, "--seed", "3"])
    out = capsys.readouterr().out
    assert "steps not applied as written: 1 late, 2 dropped; e.g. late-and-" in out
    [generated] = [line for line in out.splitlines()
                   if line.startswith("  generated steps not applied as written: ")]
    assert " dropped" in generated and "random timing" in generated


# ---------------------------------------------------------------------------- signals


@pytest.mark.parametrize(("sig", "status", "name"), [(signal.SIGINT, 130, "SIGINT"),
                                                     (signal.SIGTERM, 143, "SIGTERM")])
def test_a_signal_stops_the_suite_with_an_incomplete_report(
    tmp_path: Path, sig: signal.Signals, status: int, name: str
) -> None:
    report = tmp_path / "r"
    # SIGINT may be ignored by whoever started the tests (a background job); a user's
    # terminal delivers it, so the child gets the default disposition back.
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--scenarios", str(ROOT / "scenarios"),
         "--schedules", "1000000", "--report-dir", str(report)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # readiness: the first run finished
        assert first.startswith("[1/"), first
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == status, err
    assert "Traceback" not in err
    assert f"incomplete: stopped by {name}" in out
    page = (report / "index.html").read_text(encoding="utf-8")
    assert "<title>durable-chaos: INCOMPLETE" in page
    assert "PASS" not in page.split("</title>")[0]
    junit = (report / "junit.xml").read_text(encoding="utf-8")
    assert 'name="complete" value="false"' in junit


# ---------------------------------------------------------------------------- bad input


def _scenario(where: Path, body: str | bytes, name: str = "bad.toml") -> Path:
    path = where / name
    if isinstance(body, bytes):
        path.write_bytes(body)
    else:
        path.write_text(body, encoding="utf-8")
    return path


MESSAGE = '[[step]]\nat = "0s"\ndo = "message"\nsession = "s1"\n'


def _bad_scenario(body: str | bytes) -> object:
    return lambda where: ["--scenarios", str(_scenario(where, body))]


def _report_dir_file(where: Path) -> list[str]:
    (where / "taken").write_text("a file")
    return ["--report-dir", str(where / "taken")]


def _report_dir_under_file(where: Path) -> list[str]:
    (where / "taken").write_text("a file")
    return ["--report-dir", str(where / "taken" / "reports")]


def _report_dir_unwritable(where: Path) -> list[str]:
    if os.geteuid() == 0:  # root writes anywhere but where the kernel refuses
        return ["--report-dir", "/proc/durable-chaos-reports"]
    locked = where / "locked"
    locked.mkdir(mode=0o500)
    return ["--report-dir", str(locked / "reports")]


def _adapter_module(body: str) -> object:
    def make(where: Path) -> list[str]:
        return ["--adapter", user_adapter(where, body=body)]
    return make


def _adapter_mode(mode: str) -> object:
    return lambda where: ["--adapter", user_adapter(where, mode)]


BAD_INPUT = [
    # (case, arguments made in a temporary directory, what the one line must name)
    ("binary scenario file", _bad_scenario(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"),
     "bad.toml: field '-'"),
    ("non-UTF-8 scenario file", _bad_scenario(b'name = "caf\xe9"\n' + MESSAGE.encode()),
     "bad.toml: field '-': not UTF-8 text"),
    ("at = 1e400", _bad_scenario('[[step]]\nat = 1e400\ndo = "message"\nsession = "s1"\n'),
     "field 'step[0].at': expected a finite duration"),
    ("at = nan", _bad_scenario('[[step]]\nat = nan\ndo = "message"\nsession = "s1"\n'),
     "field 'step[0].at': expected a finite duration"),
    ("duration = inf", _bad_scenario(MESSAGE + '[[step]]\nat = "1m"\ndo = "gc-pause"\n'
                                     "duration = inf\n"),
     "field 'step[1].duration': expected a finite duration"),
    ("horizon = -inf", _bad_scenario("horizon = -inf\n" + MESSAGE),
     "field 'horizon': expected a finite duration"),
    ("at = 1e300 seconds", _bad_scenario('[[step]]\nat = 1e300\ndo = "message"\n'
                                         'session = "s1"\n'),
     "field 'step[0].at': at most 3650d"),
    ("a name of 300 characters", _bad_scenario(f'name = "{"n" * 300}"\n' + MESSAGE),
     "field 'name': 300 characters long, more than 100"),
    ("escape sequences in a name", _bad_scenario('name = "\\u001b[2J\\u001b[31mred"\n'
                                                 + MESSAGE),
     "field 'name': contains control characters"),
    ("--report-dir is a file", _report_dir_file, "is a file, not a directory"),
    ("--report-dir under a file", _report_dir_under_file, "is under the file"),
    ("--report-dir unwritable", _report_dir_unwritable, "cannot write there"),
    ("adapter module raises on import", _adapter_module("raise RuntimeError('no config')\n"),
     "raised RuntimeError: no config; fix the module"),
    ("adapter module with a syntax error", _adapter_module("def broken(:\n"),
     "has a syntax error"),
    ("adapter factory raises", _adapter_mode("factory"),
     "calling make() raised ValueError: missing ENGINE_URL"),
    ("adapter check_config() raises", _adapter_mode("check_config"),
     "check_config() raised KeyError: 'hand_off_after'; fix the adapter"),
    ("--time-budget 0", lambda where: ["--time-budget", "0"],
     "--time-budget: expected a positive duration"),
    ("--time-budget nan", lambda where: ["--time-budget", "nan"],
     "--time-budget: expected a positive duration"),
    ("--time-budget inf", lambda where: ["--time-budget", "inf"],
     "--time-budget: expected a positive duration"),
    ("--time-budget -5", lambda where: ["--time-budget", "-5"],
     "--time-budget: expected a positive duration"),
    ("--run-timeout 0", lambda where: ["--run-timeout", "0"],
     "--run-timeout: expected a positive duration"),
    ("--run-timeout soon", lambda where: ["--run-timeout", "soon"], "--run-timeout:"),
]


@pytest.mark.parametrize(("case", "make", "names"), BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_is_one_line_naming_the_cause_and_exit_2(
    case: str, make: object, names: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    args = make(tmp_path)  # type: ignore[operator]
    defaults = {"--scenarios": str(SCENARIO), "--report-dir": str(tmp_path / "r")}
    for option, value in defaults.items():
        if option not in args:
            args += [option, value]
    code = main(["run", "--schedules", "0", "--quiet", *args])
    err = _err(capsys)
    assert code == 2, err
    assert names in err
    assert "\x1b" not in err
    assert not (tmp_path / "r").exists()  # nothing ran, nothing half-written


def test_escape_sequences_in_an_adapter_name_are_escaped_on_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = user_adapter(tmp_path, name="\x1b[2Jevil\rname")
    assert main(_run("--adapter", spec, report=tmp_path / "r")) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out
    assert "\\x1b[2Jevil\\rname: 1 run(s)" in out


def test_a_scenario_naming_a_host_that_does_not_exist_exits_2_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = _scenario(tmp_path, MESSAGE + '[[step]]\nat = "1m"\ndo = "crash"\n'
                         'host = "no-such-host"\n')
    assert main(_run(report=tmp_path / "r", scenario=scenario)) == 2
    err = capsys.readouterr().err
    assert f"{scenario}: field 'step[1].host': no host 'no-such-host'" in err


EARLY_ANSWER = """\
[[step]]
at = "0s"
do = "message"
session = "s1"
tools = ["send_email"]

[[step]]
at = "1s"
do = "answer"
session = "s1"
"""


def test_an_early_answer_waits_for_its_card_on_a_real_engine_and_is_dropped_on_the_sim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The card shows once the model answered (2s in): at 1s there is none yet. A real
    # engine shows it from another process a moment later, so the answer waits for it; the
    # simulator keeps today's behaviour exactly (the answer is dropped, same history).
    monkeypatch.chdir(tmp_path)
    scenario = _scenario(tmp_path, EARLY_ANSWER)
    main(_run(report=tmp_path / "sim", scenario=scenario))
    assert "step 1 (answer at 1s, s1) dropped: no open card" in capsys.readouterr().out
    spec = user_adapter(tmp_path, engine="real")
    assert main(_run("--adapter", spec, report=tmp_path / "real", scenario=scenario)) == 0
    out = capsys.readouterr().out
    assert "steps not applied as written" not in out
    history = next((tmp_path / "real" / "runs").glob("*/*/history.jsonl")).read_text()
    assert '"kind":"op.answer"' in history and '"type":"ok"' in history


def test_nothing_to_run_is_not_green(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    code = main(["run", "--scenarios", "none", "--schedules", "0", "--report-dir",
                 str(tmp_path / "r"), "--quiet"])
    assert code == 3
    assert "could not judge: nothing ran" in capsys.readouterr().err
