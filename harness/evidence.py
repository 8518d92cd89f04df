"""What a run leaves on disk is never overwritten, mixed or lost.

- A name (scenario, adapter, run) is never a path: `slug` makes it one safe directory name
  (no separator, never `.` or `..`), and `claim_run_dir` makes it unique by creating the
  directory exclusively (`name`, `name-2`, ...), which holds across worker processes too.
- One report directory serves one run at a time: `ReportLock` takes an advisory lock on
  `DIR/.durable-chaos.lock` (released by the kernel when its holder dies, so a killed run
  leaves no stale lock); a second run exits 2 naming the holder. Rejected: a subdirectory per
  run (every CI job and bookmark reads `DIR/index.html`).
- Files a person or CI reads (`index.html`, `junit.xml`) are written by `atomic_write_text`:
  a temporary file beside it, fsynced, then `os.replace`, so a kill or an interrupt while
  writing leaves the previous file whole or the new one whole. The temporary file names its
  writer (`.index.html.PID.tmp`); a SIGKILL leaves it behind, and the next run to lock the
  directory removes those of writers that are gone (`sweep_temp_files`).
- A write that fails (a full disk, a read-only directory) is `OutputUnwritable`, naming the
  path: the run could not be judged, exit 3, never a traceback.
- Scratch directories (`durable-chaos-batch-PID-*`) belong to a live process; `sweep_scratch`
  removes those of processes that are gone (a run killed with SIGKILL).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from harness.errors import OutputUnwritable, UsageError

__all__ = [
    "LOCK_NAME", "SCRATCH_PREFIX", "ReportLock", "atomic_write_text", "claim_run_dir",
    "make_scratch", "pid_alive", "signals_deferred", "slug", "sweep_scratch",
    "sweep_temp_files",
]

LOCK_NAME = ".durable-chaos.lock"
SCRATCH_PREFIX = "durable-chaos-batch-"
# A directory name has a limit (255 bytes on most filesystems); room is left for "-N".
MAX_SLUG = 100


def slug(text: str) -> str:
    """`text` as one safe directory name: never empty, `.`, `..` or hidden."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-.")[:MAX_SLUG]
    return cleaned.strip("-.") or "run"


def claim_run_dir(report_dir: Path, adapter: str, name: str) -> Path:
    """A directory of its own for one run under `report_dir/runs/ADAPTER/`, created now."""
    parent = report_dir / "runs" / slug(adapter)
    stem = slug(name)
    try:
        parent.mkdir(parents=True, exist_ok=True)
        for number in range(1, 1_000_000):
            candidate = parent / (stem if number == 1 else f"{stem}-{number}")
            try:
                candidate.mkdir()
            except FileExistsError:
                continue
            return candidate
    except OSError as exc:
        raise OutputUnwritable(str(exc.filename or parent), exc.strerror or str(exc)) \
            from None
    raise OutputUnwritable(str(parent), "a million runs of one name")


TEMP_SUFFIX = ".tmp"
# `atomic_write_text`'s temporary file: `.NAME.PID.tmp`, PID its writer's.
_TEMP_NAME = re.compile(r"\..+\.(\d+)" + re.escape(TEMP_SUFFIX))


def write_text(path: Path, text: str) -> None:
    """A plain write whose failure names the path (`OutputUnwritable`)."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputUnwritable(str(path), exc.strerror or str(exc)) from None


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` so that a reader, or a kill, sees the old file or the new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}{TEMP_SUFFIX}")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        with contextlib.suppress(OSError):
            directory = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise OutputUnwritable(str(path), exc.strerror or str(exc)) from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


@contextlib.contextmanager
def signals_deferred() -> Iterator[list[int]]:
    """SIGINT and SIGTERM wait until the block ends (the report being written): a second
    Ctrl-C must not leave half a report. Yields the signals that arrived; outside the main
    thread nothing changes."""
    arrived: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        arrived.append(signum)

    previous: dict[signal.Signals, Any] = {}
    try:
        for which in (signal.SIGINT, signal.SIGTERM):
            previous[which] = signal.signal(which, note)
    except ValueError:  # not the main thread
        for which, handler in previous.items():
            signal.signal(which, handler)
        previous = {}
    try:
        yield arrived
    finally:
        for which, handler in previous.items():
            signal.signal(which, handler)


class ReportLock:
    """An exclusive lock on a report directory for the life of one run (see module doc)."""

    def __init__(self, report_dir: Path, option: str = "--report-dir") -> None:
        self.path = report_dir / LOCK_NAME
        self.option = option
        self._handle: TextIO | None = None

    def acquire(self) -> None:
        import fcntl

        try:
            handle = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the run
        except OSError as exc:
            raise UsageError(f"{self.option} {self.path.parent}: cannot write there "
                             f"({exc.strerror or exc}); give a directory you can write to") \
                from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = " ".join(handle.read().split())[:200] or "another process"
            handle.close()
            raise UsageError(f"{self.option} {self.path.parent}: in use by another run "
                             f"({holder}); wait for it to end or give another directory") \
                from None
        with contextlib.suppress(OSError):
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()} since {time.strftime('%H:%M:%S')}\n")
            handle.flush()
        self._handle = handle
        # The directory is ours now: what a killed writer left half-written goes.
        sweep_temp_files(self.path.parent)

    def release(self) -> None:
        if self._handle is not None:
            with contextlib.suppress(OSError):
                self._handle.truncate(0)
            self._handle.close()  # closing the descriptor releases the lock
            self._handle = None

    def __enter__(self) -> ReportLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def make_scratch() -> Path:
    """A scratch directory that names its owner, for `sweep_scratch`."""
    return Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))


def pid_alive(pid: int) -> bool:
    """Whether process `pid` still runs: what every sweep of a dead owner's leftovers asks.

    A zombie counts as gone: a worker killed with its parent stays a zombie until something
    reaps it (an init that reaps late, seconds here), and its leftovers are already
    unowned. Another user's process counts as alive (not ours to judge)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc (not Linux): os.kill said it exists


def sweep_temp_files(directory: Path) -> int:
    """Remove the temporary files `atomic_write_text` left in `directory` when its writer
    was killed before it could clean up (SIGKILL); how many were removed. A live writer's
    are kept: it is writing them."""
    removed = 0
    try:
        entries = list(directory.iterdir())
    except OSError:
        return 0
    for entry in entries:
        match = _TEMP_NAME.fullmatch(entry.name)
        if match is None or pid_alive(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):
            if entry.is_file() and not entry.is_symlink():
                entry.unlink()
                removed += 1
    return removed


def sweep_scratch(root: Path | None = None) -> int:
    """Remove scratch directories whose owner is gone; how many were removed. A directory
    without an owner's pid (made by an older version or a Ray node) goes after an hour."""
    base = Path(root or tempfile.gettempdir())
    removed = 0
    try:
        entries = list(base.glob(f"{SCRATCH_PREFIX}*"))
    except OSError:
        return 0
    for entry in entries:
        rest = entry.name[len(SCRATCH_PREFIX):]
        owner, _, _ = rest.partition("-")
        try:
            if owner.isdigit():
                stale = not pid_alive(int(owner))
            else:
                stale = time.time() - entry.stat().st_mtime > 3600
            if stale and entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
                removed += 1
        except OSError:
            continue
    return removed
