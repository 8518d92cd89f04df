"""Generated schedules fanned out over processes (`durable-chaos run --workers N`).

What is pinned: the seed alone decides which schedules run and their verdicts whatever N (the
same runs, the same first failure, the same shrunk schedule for N=1 and N=2); the histories
of failing runs come back from the workers into the report directory; a time budget and
Ctrl-C stop every worker and leave a report marked incomplete (exit 130 on Ctrl-C); a real
engine keeps one worker unless asked; bad options exit 2 with one line.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import fanout
from harness.adapters import load_adapter
from harness.cli import main
from harness.fanout import BATCH, batch_seed, default_workers, plan
from harness.outcome import RunOutcome, SuiteOutcome
from harness.suite import run_suite

ROOT = Path(__file__).resolve().parents[1]
# With batches of SMALL_BATCH schedules, seed 19 of this planted bug fails first in batch 1
# (the 4th schedule of the second batch): with two workers, batch 1 can finish before batch
# 0, and batches 2 and 3 are already running when it does. (Seeds 9, 10, then 13 did so until
# the generator learnt new windows: the cancel, background and hand-off ones moved the first
# failure of seed 10 past batch 3, and the malformed requests and outliving calls that of
# seed 13 into batch 0.)
BUG = "tests.planted.unfenced_append:ADAPTER"
SEED = 19
SMALL_BATCH = 5


def _verdicts(runs: tuple[RunOutcome, ...]) -> list[tuple[str, str, tuple[tuple[str, object],
                                                                          ...]]]:
    return [(r.name, r.schedule_toml, tuple((x.checker, x.valid) for x in r.results))
            for r in runs]


def _suite(workers: int, report_dir: Path) -> SuiteOutcome:
    return run_suite([BUG], [], schedules=4 * SMALL_BATCH, seed=SEED, report_dir=report_dir,
                     progress=False, workers=workers)


def test_the_seed_alone_decides_schedules_and_verdicts_whatever_the_workers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Small batches: the generator finds this bug within a few dozen schedules, so with
    # batches of BATCH it would always fail in batch 0.
    monkeypatch.setattr(fanout, "BATCH", SMALL_BATCH)
    one = _suite(1, tmp_path / "one")
    two = _suite(2, tmp_path / "two")

    # The search stops at the first failure in batch order: batch 0 whole, then batch 1 up
    # to its failure; what batches 2 and 3 ran is not reported.
    assert SMALL_BATCH < len(one.runs) < 2 * SMALL_BATCH
    assert one.runs[-1].failed and not any(r.failed for r in one.runs[:-1])
    assert _verdicts(two.runs) == _verdicts(one.runs)
    # Shrunk once, to the same minimal schedule.
    assert len(one.shrunk) == len(two.shrunk) == 1
    assert two.shrunk[0].schedule_toml == one.shrunk[0].schedule_toml
    assert one.shrunk[0].failed
    assert one.complete and two.complete
    assert multiprocessing.active_children() == []

    # The failing run's history came back from its worker into the report directory.
    for suite, where in ((one, "one"), (two, "two")):
        failing = suite.runs[-1]
        assert failing.history_path is not None
        history = Path(failing.history_path)
        assert history.is_relative_to(tmp_path / where) and history.stat().st_size > 0
        assert "schedule.toml" in failing.replay_command
    one_history = Path(one.runs[-1].history_path or "").read_bytes()
    assert Path(two.runs[-1].history_path or "").read_bytes() == one_history
    junit = (tmp_path / "two" / "junit.xml").read_text(encoding="utf-8")
    assert "<failure" in junit


def test_batches_do_not_depend_on_the_number_of_schedules_or_workers() -> None:
    short, long = plan("reference", 120, 7), plan("reference", 1000, 7)
    assert [j.count for j in short] == [BATCH, BATCH, 20]
    assert [j.seed for j in short] == [j.seed for j in long[:3]]
    assert len({j.seed for j in long}) == len(long)
    # Stable across processes (not Python's salted hash).
    assert batch_seed(7, 0) == 842801076


def test_a_time_budget_stops_every_worker_and_marks_the_report_incomplete(
        tmp_path: Path) -> None:
    suite = run_suite(["reference"], [], schedules=100_000, seed=0, time_budget=1.0,
                      report_dir=tmp_path, progress=False, workers=2)
    assert not suite.complete
    assert len(suite.runs) < 100_000  # how many fit in the second depends on the load
    assert multiprocessing.active_children() == []
    assert 'class="incomplete"' in (tmp_path / "index.html").read_text(encoding="utf-8")


def test_a_real_engine_keeps_one_worker_unless_asked() -> None:
    sim = load_adapter("reference")
    real = load_adapter("reference-restate")
    assert default_workers([sim], None) == (os.cpu_count() or 1)
    assert default_workers([real], None) == 1
    assert default_workers([real], 3) == 3


@pytest.mark.parametrize(("args", "says"), [
    (["--workers", "0"], "--workers: expected at least 1 worker, got 0"),
    (["--workers", "two"], "--workers: expected an integer, got 'two'"),
    (["--ray", " "], "--ray: expected a Ray address"),
])
def test_bad_fan_out_options_exit_2_with_one_line(
        args: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--scenarios", "none", "--report-dir", str(tmp_path / "r"), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert says in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_ctrl_c_stops_every_worker_and_writes_the_report(tmp_path: Path) -> None:
    report = tmp_path / "report"
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--scenarios", "none", "--schedules",
         "100000", "--workers", "2", "--report-dir", str(report)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        assert proc.stderr is not None
        # Ready: the first progress line (a batch came back from a worker).
        line = proc.stderr.readline()
        assert line.startswith("["), line
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends: the whole process group
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        assert 'class="incomplete"' in (report / "index.html").read_text(encoding="utf-8")
        assert "Incomplete" in (report / "junit.xml").read_text(encoding="utf-8")
        # No worker outlives the parent: the process group empties.
        give_up = time.monotonic() + 30
        while time.monotonic() < give_up:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            pytest.fail("a worker outlived the interrupted run")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_one_timer_thread_serves_every_run_limit() -> None:
    """A simulated run takes about a millisecond: a timer thread started per run (and per
    close) cost a third of that, so every watchdog shares one thread."""
    import threading

    from harness.watchdog import Watchdog

    def timer_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "durable-chaos-watchdog"}

    # Threads of the name that were there before do not count: a test that ran the harness
    # in-process under pytester may have left another copy of the module with its own thread.
    before = timer_threads()
    seen: set[threading.Thread] = set()
    for _ in range(20):
        with Watchdog(60.0):
            seen |= timer_threads()
    assert seen and len(seen - before) <= 1


def test_a_forked_worker_gets_its_own_timer_thread() -> None:
    """The fan-out forks its workers: a child whose copy of the timer lock was held at the
    fork would hang at its first run limit, so the timers start afresh in the child."""
    import threading

    from harness import watchdog

    with watchdog.Watchdog(60.0):
        pass
    held = watchdog._TIMERS._cond.acquire()  # as if the timer thread held it at the fork
    try:
        pid = os.fork()
        if pid == 0:  # the child: one run limit, then out
            code = 1
            try:
                done = threading.Event()

                def arm() -> None:
                    with watchdog.Watchdog(60.0):
                        done.set()

                threading.Thread(target=arm, daemon=True).start()
                code = 0 if done.wait(10) else 1
            finally:
                os._exit(code)
    finally:
        if held:
            watchdog._TIMERS._cond.release()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def test_a_killed_worker_makes_its_run_unknown_and_the_suite_goes_on(tmp_path: Path) -> None:
    """A worker killed in the middle of a batch loses only the run it held: that run is
    unknown, naming the signal, a fresh worker takes the next batch, and the suite ends
    (here by its time budget) with exit 3 and a report that names the lost run. A worker
    killed before its batch's first run started loses nothing: the batch is sent again
    (then the suite exits 0; which one happens is a race with the kill)."""
    report = tmp_path / "report"
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--scenarios", "none", "--schedules",
         "100000", "--workers", "2", "--time-budget", "12", "--report-dir", str(report)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # ready: a batch came back
        assert line.startswith("["), line
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        give_up = time.monotonic() + 10
        workers: list[int] = []
        while len(workers) < 2 and time.monotonic() < give_up:
            workers = [p for p in _children(proc.pid)
                       if _cmdline(p) == cmdline]
        assert len(workers) == 2, workers
        os.kill(workers[0], signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode in (0, 3), err
        assert "time budget spent" in err
        page = (report / "index.html").read_text(encoding="utf-8")
        if proc.returncode == 3:
            assert "unknown: 1 run(s)" in out and "killed by SIGKILL" in out
            assert "killed by SIGKILL" in page
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    give_up = time.monotonic() + 30
    while time.monotonic() < give_up:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("a worker outlived the suite")
