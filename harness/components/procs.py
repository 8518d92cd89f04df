"""Child processes the harness owns, each in its own session and process group.

Every real component (restate-server, Toxiproxy, hypercorn workers, Chromium) forks helpers or
threads of its own, so signals go to the whole group, never to the leader alone: a kill of the
leader only would leave a forked worker serving. A live-group registry lets the harness clean up
on exit; the signal handlers are opt-in (`install_cleanup_handlers`) because a library must not
take over SIGINT/SIGTERM behind its user's back.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType

from harness.evidence import pid_alive

__all__ = [
    "ProcessGroup",
    "group_members",
    "install_cleanup_handlers",
    "live_groups",
    "release_sysv_segments",
    "scratch_dir",
    "stop_all",
    "stop_groups",
    "sweep_stale",
]

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[[int, int], int] | None:
    # Resolved in the parent: the preexec hook runs between fork and exec, where loading a
    # library (allocations, locks held by other threads) is not safe.
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        libc = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong]
    prctl.restype = ctypes.c_int

    def call(option: int, arg: int) -> int:
        return int(prctl(option, arg))

    return call


_PRCTL = _load_prctl()


def _make_preexec(parent_pid: int) -> Callable[[], None] | None:
    prctl = _PRCTL
    if prctl is None:
        return None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
        # The parent may have died between fork and prctl; the death signal would then never
        # come, so check once by hand.
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def _group_members(pgid: int) -> list[int]:
    """Pids in process group `pgid` that are not zombies (Linux /proc; else a killpg probe)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    members: list[int] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) < 3:
            continue
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def group_members(pgid: int) -> list[int]:
    """Pids of process group `pgid` that are still running (not zombies)."""
    return _group_members(pgid)


class ProcessGroup:
    """A child started in a new session (so its own process group), with logs in `log_dir`.

    On Linux the child also gets PR_SET_PDEATHSIG=SIGKILL, so it dies if the harness is killed
    with SIGKILL (no atexit then). The death signal fires when the *thread* that started the
    child exits, so start long-lived groups from a thread that outlives them (the main thread),
    or pass `die_with_parent=False`. Without `log_dir`, logs go to a fresh temp dir that is
    kept for post-mortems. Grandchildren do not inherit it; they go with the group on `stop`/`kill`.
    `user` runs the child as that user (its primary group, no supplementary groups); the death
    signal is set after the switch, since a change of credentials clears it.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        name: str | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = True,
        cwd: str | os.PathLike[str] | None = None,
        pass_fds: Sequence[int] = (),
        die_with_parent: bool = True,
        user: str | None = None,
    ) -> None:
        if not argv:
            raise ValueError("argv is empty")
        self.argv: tuple[str, ...] = tuple(str(a) for a in argv)
        self.name: str = name or Path(self.argv[0]).name
        self.log_dir: Path = (
            Path(log_dir)
            if log_dir is not None
            else Path(tempfile.mkdtemp(prefix=f"durable-chaos-{self.name}-"))
        )
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.stdout_path: Path = self.log_dir / f"{self.name}.stdout.log"
        self.stderr_path: Path = self.log_dir / f"{self.name}.stderr.log"
        full_env: dict[str, str] = dict(os.environ) if inherit_env else {}
        if env:
            full_env.update(env)
        self._owner_pid = os.getpid()
        self._paused = False
        # Popen switches user and group before it calls preexec_fn, which then sets the death
        # signal under the new credentials.
        uid = gid = None
        groups: list[int] | None = None
        if user is not None:
            import pwd

            entry = pwd.getpwnam(user)
            uid, gid, groups = entry.pw_uid, entry.pw_gid, []
        with open(self.stdout_path, "ab") as out, open(self.stderr_path, "ab") as err:
            self._popen: subprocess.Popen[bytes] = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=full_env,
                cwd=cwd,
                start_new_session=True,
                pass_fds=tuple(pass_fds),
                preexec_fn=_make_preexec(self._owner_pid) if die_with_parent else None,
                user=uid,
                group=gid,
                extra_groups=groups,
            )
        _register(self)

    # -- identity and state -------------------------------------------------------------

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def pgid(self) -> int:
        # start_new_session makes the child a session and group leader: pgid == pid.
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    @property
    def alive(self) -> bool:
        """True while any member of the group (leader or a descendant) is still running."""
        return self._popen.poll() is None or bool(_group_members(self.pgid))

    @property
    def paused(self) -> bool:
        return self._paused

    def members(self) -> list[int]:
        """Pids still running in the group."""
        return _group_members(self.pgid)

    def read_stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def read_stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def log_tail(self, chars: int = 2000) -> str:
        """The end of stderr and stdout, for error messages."""
        parts = []
        for path in (self.stderr_path, self.stdout_path):
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace")
                if text.strip():
                    parts.append(f"--- {path.name} ---\n{text[-chars:]}")
        return "\n".join(parts) or "(no output)"

    # -- signals ------------------------------------------------------------------------

    def signal(self, sig: int) -> bool:
        """Send `sig` to the whole group; False if the group is already gone."""
        if self._popen.poll() is not None and not self.members():
            # The group id is free for reuse once the last member is gone: never signal it.
            return False
        try:
            os.killpg(self.pgid, sig)
        except ProcessLookupError:
            return False
        return True

    def pause(self) -> None:
        """SIGSTOP the group: it keeps its sockets open but makes no progress."""
        self.signal(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self._paused = False

    def kill(self, timeout: float = 10.0) -> int | None:
        """SIGKILL the group and reap the leader; returns the leader's exit status."""
        self.signal(signal.SIGKILL)
        self._paused = False
        code = self._reap(timeout)
        self._wait_members_gone(timeout)
        _unregister(self)
        return code

    def stop(self, timeout: float = 5.0, *, term_grace: float | None = None) -> int | None:
        """SIGTERM, then SIGINT, then SIGKILL, waiting for the group to exit between them.

        `timeout` is the budget for the graceful signals together: SIGTERM gets `term_grace`
        (half by default), SIGINT the rest; the final SIGKILL is waited for on top of it.
        Returns the leader's exit status.
        """
        _stop_groups([self], _phases(timeout, term_grace))
        return self._popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the leader to exit (raises subprocess.TimeoutExpired)."""
        code = self._popen.wait(timeout)
        if not self.members():
            _unregister(self)
        return code

    # -- internals ----------------------------------------------------------------------

    def _reap(self, timeout: float) -> int | None:
        try:
            return self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def _wait_members_gone(self, timeout: float) -> bool:
        # Orphaned grandchildren are reparented and reaped by init (or a subreaper), which we
        # do not control: poll /proc until they are gone.
        deadline = time.monotonic() + timeout
        interval = 0.005
        while self.members():
            if time.monotonic() >= deadline:
                return False
            time.sleep(interval)
            interval = min(interval * 2, 0.1)
        return True

    # -- context manager ----------------------------------------------------------------

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "alive" if self._popen.poll() is None else f"exited {self._popen.returncode}"
        return f"<ProcessGroup {self.name} pid={self.pid} {state}>"


def _phases(timeout: float, term_grace: float | None) -> list[tuple[signal.Signals, float]]:
    # SIGINT after SIGTERM: hypercorn with `--workers 0` ignores SIGTERM while a client
    # (Restate) holds a connection open, but exits on SIGINT.
    timeout = max(timeout, 0.0)
    term = timeout / 2 if term_grace is None else min(max(term_grace, 0.0), timeout)
    return [(signal.SIGTERM, term), (signal.SIGINT, timeout - term)]


def _stop_groups(
    groups: Iterable[ProcessGroup], phases: Sequence[tuple[signal.Signals, float]]
) -> None:
    """Escalate TERM, INT, KILL over several groups at once, so they stop in parallel."""
    targets = list(groups)
    pending = [g for g in targets if g.alive]
    if pending:
        for sig, step in phases:
            for group in pending:
                group.signal(sig)
                # A stopped process does not act on TERM/INT until it is continued; it may
                # have been stopped by someone else, so continue it whatever `paused` says.
                group.resume()
            deadline = time.monotonic() + step
            pending = _wait_groups_gone(pending, deadline)
            if not pending:
                break
        for group in pending:
            group.signal(signal.SIGKILL)
        _wait_groups_gone(pending, time.monotonic() + 10.0)
    for group in targets:
        if group._popen.poll() is None:
            group._reap(1.0)
        if not group.alive:
            _unregister(group)


def _wait_groups_gone(groups: list[ProcessGroup], deadline: float) -> list[ProcessGroup]:
    interval = 0.005
    while True:
        # poll() reaps the leader: a zombie leader would otherwise count as alive forever.
        for group in groups:
            group._popen.poll()
        groups = [g for g in groups if g.alive]
        if not groups or time.monotonic() >= deadline:
            return groups
        time.sleep(min(interval, max(deadline - time.monotonic(), 0.0)))
        interval = min(interval * 2, 0.05)


# -- registry and cleanup -------------------------------------------------------------------

_LOCK = threading.Lock()
_LIVE: dict[int, ProcessGroup] = {}


def _register(group: ProcessGroup) -> None:
    with _LOCK:
        _LIVE[group.pid] = group


def _unregister(group: ProcessGroup) -> None:
    with _LOCK:
        _LIVE.pop(group.pid, None)


def live_groups() -> list[ProcessGroup]:
    """Groups started by this process that have not been stopped yet."""
    with _LOCK:
        return [g for g in _LIVE.values() if g._owner_pid == os.getpid()]


def stop_groups(
    groups: Iterable[ProcessGroup], timeout: float = 5.0, *, term_grace: float | None = None
) -> None:
    """`ProcessGroup.stop` for several groups at once: they stop in parallel."""
    _stop_groups(groups, _phases(timeout, term_grace))


def stop_all(timeout: float = 3.0) -> None:
    """Stop every live group this process started (TERM, INT, KILL, all in parallel)."""
    groups = live_groups()
    if groups:
        _stop_groups(groups, _phases(timeout, None))


atexit.register(stop_all)

_installed = False


def install_cleanup_handlers() -> None:
    """Stop all live groups on SIGTERM and SIGINT, then defer to the previous handler.

    Call from the main thread (Python only delivers signals there). Idempotent.
    """
    global _installed
    if _installed:
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(sig)
        signal.signal(sig, _make_handler(sig, previous))
    _installed = True


_Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


def _make_handler(
    sig: signal.Signals, previous: _Handler
) -> Callable[[int, FrameType | None], None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        stop_all()
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_IGN:
            return
        else:
            # Default disposition: die of the same signal, so the exit status tells the truth.
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)

    return handler


# -- scratch directories ----------------------------------------------------------------------

_SHM = Path("/dev/shm")
_SCRATCH_MARK = "durable-chaos-"


def _scratch_root() -> Path:
    # Data directories of throwaway servers (PostgreSQL's ~1000 files) are many small writes:
    # on a virtual disk a copy takes seconds, on tmpfs a few hundred milliseconds.
    if _SHM.is_dir() and os.access(_SHM, os.W_OK | os.X_OK):
        return _SHM
    return Path(tempfile.gettempdir())


def scratch_dir(prefix: str) -> Path:
    """A fresh directory for a throwaway server's data, on tmpfs when the machine has one.

    Its name carries this process's pid, so directories left by a harness that was killed
    (no cleanup ran) are removed by the next one that asks for a directory.
    """
    root = _scratch_root()
    _sweep(root)
    return Path(tempfile.mkdtemp(prefix=f"{_SCRATCH_MARK}{os.getpid()}-{prefix}", dir=root))


def _sweep(root: Path) -> None:
    import shutil

    for entry in root.glob(f"{_SCRATCH_MARK}*"):
        owner = entry.name[len(_SCRATCH_MARK):].split("-", 1)[0]
        if not owner.isdigit() or int(owner) == os.getpid() or pid_alive(int(owner)):
            continue
        release_sysv_segments(entry)
        shutil.rmtree(entry, ignore_errors=True)


def sweep_stale(root: Path, prefix: str) -> None:
    """Remove `root/prefix<pid>-*` entries whose owner pid is gone (a harness that was killed
    ran no cleanup)."""
    import shutil

    for entry in root.glob(f"{prefix}*"):
        owner = entry.name[len(prefix):].split("-", 1)[0]
        if not owner.isdigit() or int(owner) == os.getpid() or pid_alive(int(owner)):
            continue
        shutil.rmtree(entry, ignore_errors=True)


_SYSV_SHM = Path("/proc/sysvipc/shm")
_IPC_RMID = 0


def _attached(shmid: int) -> int | None:
    """How many processes attach SysV segment `shmid` (None: no such segment)."""
    try:
        lines = _SYSV_SHM.read_text().splitlines()
    except OSError:
        return None
    header = lines[0].split() if lines else []
    if "shmid" not in header or "nattch" not in header:
        return None
    at_id, at_n = header.index("shmid"), header.index("nattch")
    for line in lines[1:]:
        cols = line.split()
        if len(cols) > max(at_id, at_n) and cols[at_id] == str(shmid):
            return int(cols[at_n])
    return None


def release_sysv_segments(directory: Path) -> list[int]:
    """Remove the SysV shared-memory segments that a killed PostgreSQL left, for the data
    directories under `directory`; returns their ids.

    PostgreSQL keeps a small SysV segment beside its mmap'd memory (it detects a second
    postmaster on the same data directory with it) and removes it on a clean shutdown only:
    after a SIGKILL it outlives everything, since a segment is not a file. Its id is on line
    7 of `postmaster.pid`; a segment still attached by some process is left alone.
    """
    import ctypes
    import ctypes.util

    released: list[int] = []
    for pid_file in [*directory.glob("postmaster.pid"), *directory.glob("*/postmaster.pid")]:
        try:
            lines = pid_file.read_text().splitlines()
        except OSError:
            continue
        parts = lines[6].split() if len(lines) > 6 else []
        if len(parts) != 2 or not parts[1].isdigit():
            continue
        shmid = int(parts[1])
        if _attached(shmid) != 0:
            continue
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        if libc.shmctl(shmid, _IPC_RMID, None) == 0:
            released.append(shmid)
    return released
