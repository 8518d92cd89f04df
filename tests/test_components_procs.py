"""ProcessGroup: pause/resume, group-wide stop and kill, death signal, cleanup handlers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.components.net import wait_until
from harness.components.procs import ProcessGroup, live_groups, stop_all

pytestmark = pytest.mark.real

PY = sys.executable
REPO = Path(__file__).resolve().parent.parent

# Prints a growing counter, one line per tick: progress is visible in the stdout log.
COUNTER = textwrap.dedent(
    """
    import sys, time
    i = 0
    while True:
        i += 1
        print(i, flush=True)
        time.sleep(0.005)
    """
)

# Starts a grandchild (in the same group), reports its pid, then waits.
WITH_GRANDCHILD = textwrap.dedent(
    """
    import subprocess, sys, time
    child = subprocess.Popen(["sleep", "1000"])
    print(child.pid, flush=True)
    time.sleep(1000)
    """
)


def _running(pid: int) -> bool:
    """True if `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2]


def _last_count(group: ProcessGroup) -> int:
    lines = group.read_stdout().split()
    return int(lines[-2]) if len(lines) >= 2 else 0  # the last line may be half-written


def _first_line(group: ProcessGroup) -> int | None:
    lines = group.read_stdout().splitlines()
    return int(lines[0]) if lines else None


def test_pause_stops_progress_and_resume_continues(tmp_path: Path) -> None:
    group = ProcessGroup([PY, "-c", COUNTER], name="counter", log_dir=tmp_path)
    try:
        wait_until(lambda: _last_count(group) or None, timeout=10, what="counter output")
        group.pause()
        wait_until(lambda: _state(group.pid) == "T" or None, timeout=5, what="group stopped")
        frozen = _last_count(group)
        # The process is in state T, so the counter cannot move; a short look confirms it.
        assert wait_until_changes(group, frozen, timeout=0.2) is None
        assert group.alive and group.paused
        group.resume()
        wait_until(lambda: _last_count(group) > frozen + 3 or None, timeout=5, what="progress")
    finally:
        group.stop(timeout=2)
    assert not group.alive
    assert group not in live_groups()


def wait_until_changes(group: ProcessGroup, value: int, *, timeout: float) -> int | None:
    try:
        return wait_until(
            lambda: _last_count(group) if _last_count(group) != value else None,
            timeout=timeout,
            what="counter change",
        )
    except TimeoutError:
        return None


def test_stop_kills_the_whole_group_including_grandchild(tmp_path: Path) -> None:
    group = ProcessGroup([PY, "-c", WITH_GRANDCHILD], name="parent", log_dir=tmp_path)
    grandchild = wait_until(lambda: _first_line(group), timeout=10, what="grandchild pid")
    assert grandchild in group.members() and group.pid in group.members()
    group.stop(timeout=2)
    assert not _running(grandchild)
    assert not _running(group.pid)
    assert group.members() == []
    assert group.returncode == -signal.SIGTERM


def test_stop_escalates_when_signals_are_ignored(tmp_path: Path) -> None:
    stubborn = textwrap.dedent(
        """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(1000)
        """
    )
    term_only = textwrap.dedent(
        """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(1000)
        """
    )
    hard = ProcessGroup([PY, "-c", stubborn], name="stubborn", log_dir=tmp_path)
    soft = ProcessGroup([PY, "-c", term_only], name="term_only", log_dir=tmp_path)
    for g in (hard, soft):
        wait_until(_said_ready(g), timeout=10, what=g.name)
    soft.pause()  # a paused group must still stop
    soft.stop(timeout=0.4)
    hard.stop(timeout=0.4)
    assert soft.returncode != -signal.SIGKILL  # SIGINT was enough (KeyboardInterrupt)
    assert hard.returncode == -signal.SIGKILL
    assert not soft.alive and not hard.alive


def _said_ready(group: ProcessGroup) -> Callable[[], bool | None]:
    return lambda: "ready" in group.read_stdout() or None


def test_kill_sigkills_group_and_reaps(tmp_path: Path) -> None:
    group = ProcessGroup([PY, "-c", WITH_GRANDCHILD], name="victim", log_dir=tmp_path)
    grandchild = wait_until(lambda: _first_line(group), timeout=10, what="grandchild pid")
    group.pause()
    assert group.kill() == -signal.SIGKILL
    assert not _running(grandchild)
    assert not group.alive


# A harness stand-in: starts a group, reports the child's pid, then blocks until killed.
HARNESS = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {repo!r})
    from harness.components.procs import ProcessGroup, install_cleanup_handlers
    if {install!r}:
        install_cleanup_handlers()
    group = ProcessGroup({argv!r}, name="sleeper", log_dir={log_dir!r})
    print(group.pid, flush=True)
    time.sleep(1000)
    """
)


def _start_harness(
    tmp_path: Path, *, install: bool, argv: list[str] | None = None
) -> tuple[subprocess.Popen[str], int]:
    argv = argv or ["sleep", "1000"]
    code = HARNESS.format(repo=str(REPO), install=install, argv=argv, log_dir=str(tmp_path))
    harness = subprocess.Popen(
        [PY, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert harness.stdout is not None
    line = harness.stdout.readline()  # blocks until the child is started
    return harness, int(line)


def test_child_dies_when_harness_is_sigkilled(tmp_path: Path) -> None:
    harness, child = _start_harness(tmp_path, install=False)
    try:
        assert _running(child)
        harness.kill()
        harness.wait(5)
        wait_until(lambda: (not _running(child)) or None, timeout=5, what="orphan death")
    finally:
        if _running(child):
            os.killpg(child, signal.SIGKILL)


def test_cleanup_handlers_stop_groups_on_sigterm(tmp_path: Path) -> None:
    marker = tmp_path / "got-term"
    # The child notes a SIGTERM; the death signal (SIGKILL) would leave no note.
    notes_term = textwrap.dedent(
        f"""
        import pathlib, signal, sys, time
        def on_term(signum, frame):
            pathlib.Path({str(marker)!r}).touch()
            sys.exit(0)
        signal.signal(signal.SIGTERM, on_term)
        print("ready", flush=True)
        time.sleep(1000)
        """
    )
    child_argv = [PY, "-c", notes_term]
    harness, child = _start_harness(tmp_path, install=True, argv=child_argv)
    try:
        log = tmp_path / "sleeper.stdout.log"
        wait_until(lambda: "ready" in log.read_text() or None, timeout=10, what="trap set")
        harness.send_signal(signal.SIGTERM)
        assert harness.wait(10) == -signal.SIGTERM
        assert marker.exists()
        assert not _running(child)
    finally:
        if _running(child):
            os.killpg(child, signal.SIGKILL)


def test_stop_all_stops_live_groups(tmp_path: Path) -> None:
    groups = [ProcessGroup(["sleep", "1000"], name=f"s{i}", log_dir=tmp_path) for i in range(3)]
    assert all(g in live_groups() for g in groups)
    stop_all(timeout=2)
    assert not any(g.alive for g in groups)
    assert not any(g in live_groups() for g in groups)


def test_a_zombie_owner_counts_as_gone_for_the_sweeps() -> None:
    """A worker killed with its parent is a zombie until something reaps it; the next run's
    sweeps must take its leftovers then, not after the reaping (seconds here)."""
    from harness.evidence import pid_alive

    child = subprocess.Popen([PY, "-c", "pass"])
    try:
        assert pid_alive(os.getpid())

        def exited_unreaped() -> bool | None:
            with open(f"/proc/{child.pid}/stat", encoding="ascii") as handle:
                return True if handle.read().rsplit(")", 1)[1].split()[0] == "Z" else None

        wait_until(exited_unreaped, timeout=10, what="the child to exit", interval=0.01)
        assert not pid_alive(child.pid)
    finally:
        child.wait()
    assert not pid_alive(child.pid)
