"""harness.evidence on its own: names that are never paths, unique run directories, the
report directory's lock, atomic writes, signals held off while the report is written, and the
sweep of a killed run's scratch. (The same rules through the CLI: tests/test_hostile.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import OutputUnwritable, UsageError
from harness.evidence import (
    ReportLock,
    atomic_write_text,
    claim_run_dir,
    signals_deferred,
    slug,
    sweep_scratch,
)


@pytest.mark.parametrize("name", ["..", ".", "../..", "/", "a/../../b", "..\\x", "", " ",
                                  ".hidden", "-", "\x00", "é", "a" * 300])
def test_a_name_is_one_safe_directory_name(name: str) -> None:
    made = slug(name)
    assert made and "/" not in made and "\\" not in made and not made.startswith(".")
    assert made not in (".", "..") and len(made) <= 100


def test_run_directories_are_unique_and_inside_the_report(tmp_path: Path) -> None:
    dirs = [claim_run_dir(tmp_path, "..", name) for name in ["a b", "a-b", "a/b", "a-b", ".."]]
    assert len(set(dirs)) == 5
    assert all(tmp_path / "runs" in d.parents for d in dirs)


def test_an_atomic_write_that_fails_leaves_the_old_file_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "index.html"
    page.write_text("old, whole")

    def fail(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OutputUnwritable, match=r"index\.html: No space left on device"):
        atomic_write_text(page, "new" * 1000)
    assert page.read_text() == "old, whole"
    assert [p.name for p in tmp_path.iterdir()] == ["index.html"]


def test_an_interrupt_while_writing_leaves_the_old_file_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "index.html"
    page.write_text("old, whole")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text(page, "new")
    assert page.read_text() == "old, whole"
    assert [p.name for p in tmp_path.iterdir()] == ["index.html"]


def test_signals_wait_until_the_report_is_written() -> None:
    with signals_deferred() as arrived:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        reached = True  # neither signal raised inside the block
    assert reached and sorted(arrived) == [signal.SIGINT, signal.SIGTERM]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_holder_of_a_report_dir_is_told_who_holds_it(tmp_path: Path) -> None:
    with ReportLock(tmp_path), pytest.raises(
            UsageError, match=rf"in use by another run \(pid {os.getpid()} "):
        ReportLock(tmp_path).acquire()
    ReportLock(tmp_path).acquire()  # released


def test_a_lock_of_a_killed_holder_is_free(tmp_path: Path) -> None:
    code = (f"import os; from pathlib import Path; from harness.evidence import ReportLock; "
            f"ReportLock(Path({str(tmp_path)!r})).acquire(); os._exit(9)")
    proc = subprocess.run([sys.executable, "-c", code], check=False)
    assert proc.returncode == 9
    with ReportLock(tmp_path):
        pass


def test_the_sweep_removes_scratch_of_dead_owners_only(tmp_path: Path) -> None:
    dead = tmp_path / "durable-chaos-batch-999999999-x"
    mine = tmp_path / f"durable-chaos-batch-{os.getpid()}-x"
    other = tmp_path / "not-ours"
    for path in (dead, mine, other):
        path.mkdir()
    assert sweep_scratch(tmp_path) == 1
    assert not dead.exists() and mine.is_dir() and other.is_dir()
