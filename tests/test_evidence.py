"""harness.evidence on its own: names that are never paths, unique run directories, the
report directory's lock, atomic writes (a SIGKILL while writing included), signals held off
while the report is written, and the sweeps of a killed run's scratch and temporary files.
(The same rules through the CLI: tests/test_hostile.py.)"""

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
    sweep_temp_files,
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


# A process rewriting a large report (index.html, junit.xml) in a loop through the atomic
# writer; it marks where it is by creating files (`reached-*`), and, when asked, stops
# inside a write (the temporary file written and fsynced, not yet in place) until killed.
WRITER = r"""
import itertools, os, signal, sys
from pathlib import Path
from harness import evidence

out, stop_in = Path(sys.argv[1]), sys.argv[2]
writing = [""]
fsync = os.fsync

def fsync_then_maybe_stop(fd):
    fsync(fd)
    if writing[0] == stop_in:
        (out / f"reached-in-{stop_in}").touch()
        while True:
            signal.pause()  # the kill comes here

evidence.os.fsync = fsync_then_maybe_stop
for i in itertools.count(1):
    writing[0] = f"{i}-index"
    evidence.atomic_write_text(out / "index.html", f"<!doctype html><html><!--v{i}-->"
                               + "<p>run</p>" * 200_000 + f"<!--v{i}--></html>\n")
    writing[0] = f"{i}-junit"
    evidence.atomic_write_text(out / "junit.xml", f'<?xml version="1.0"?><testsuites name="v{i}">'
                               + '<testsuite name="s" tests="1"><testcase name="c"/></testsuite>'
                               * 20_000 + f"<!--v{i}--></testsuites>\n")
    (out / f"reached-after-{i}").touch()
"""


def _version_of_page(path: Path) -> int:
    import re

    text = path.read_text(encoding="utf-8")
    head = re.match(r"<!doctype html><html><!--v(\d+)-->", text)
    tail = re.search(r"<!--v(\d+)--></html>\n\Z", text)
    assert head and tail and head.group(1) == tail.group(1), f"{path} is not whole"
    return int(head.group(1))


def _version_of_junit(path: Path) -> int:
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()  # raises on a torn file
    assert len(root) == 20_000, f"{path} is not whole"
    return int(root.get("name", "v0")[1:])


def _kill_when(out: Path, stop_in: str, marker: str) -> None:
    """Start the writer in its own process group, wait for `marker` to appear, SIGKILL the
    group."""
    import time

    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(out), stop_in],
                            cwd=Path(__file__).resolve().parents[1], start_new_session=True)
    try:
        give_up = time.monotonic() + 120
        while not (out / marker).exists():
            assert proc.poll() is None, f"the writer ended with {proc.returncode}"
            assert time.monotonic() < give_up, f"{marker} never appeared"
            time.sleep(0.005)  # polling for the marker, not waiting a fixed time
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for reached in out.glob("reached-*"):
        reached.unlink()


def test_a_kill_while_writing_the_report_leaves_each_file_whole_and_the_sweep_clears_it(
        tmp_path: Path) -> None:
    out = tmp_path / "report"
    out.mkdir()
    # Inside the write of index.html v2: it stays v1, whole; its temporary file is left.
    _kill_when(out, "2-index", "reached-in-2-index")
    assert (_version_of_page(out / "index.html"), _version_of_junit(out / "junit.xml")) == (1, 1)
    assert len(list(out.glob(".index.html.*.tmp"))) == 1
    # Inside the write of junit.xml v3: index.html is v3 already, junit.xml stays v2.
    _kill_when(out, "3-junit", "reached-in-3-junit")
    assert (_version_of_page(out / "index.html"), _version_of_junit(out / "junit.xml")) == (3, 2)
    assert len(list(out.glob(".junit.xml.*.tmp"))) == 1
    # Wherever the kill lands while it writes freely (after its fourth report): old or new.
    _kill_when(out, "never", "reached-after-4")
    assert _version_of_page(out / "index.html") in (4, 5)
    assert _version_of_junit(out / "junit.xml") in (4, 5)
    assert list(out.glob(".*.tmp"))  # the killed writers' temporary files are there
    mine = out / f".junit.xml.{os.getpid()}.tmp"  # a live writer's: kept
    mine.write_text("being written")
    # The next run locks the directory and sweeps what the killed writers left.
    with ReportLock(out):
        assert sorted(p.name for p in out.glob(".*.tmp")) == [mine.name]
    assert _version_of_page(out / "index.html") in (4, 5)


def test_the_temp_sweep_removes_only_a_dead_writer_s_temporary_files(tmp_path: Path) -> None:
    dead = tmp_path / ".index.html.999999999.tmp"
    live = tmp_path / f".index.html.{os.getpid()}.tmp"
    other = tmp_path / "index.html.999999999.tmp"  # not the atomic writer's (no dot first)
    for path in (dead, live, other):
        path.write_text("x")
    assert sweep_temp_files(tmp_path) == 1
    assert not dead.exists() and live.exists() and other.exists()
