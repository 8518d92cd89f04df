"""A throwaway PostgreSQL server from the machine's own binaries.

`initdb` once per process into a template directory, copied for each server (initdb is most
of a cold start); the postmaster runs in the foreground as a `ProcessGroup` on 127.0.0.1 and a
free port (the Unix socket goes into the temp dir too, so nothing touches /var/run/postgresql),
ready once `SELECT 1` succeeds, stopped fast (then immediate, then SIGKILL of its group) and
removed. Being a child of the harness in its own group, it dies with the harness: if the
harness is killed, the death signal kills the postmaster and its backends exit on their own
when they see it gone (`pg_ctl start` would have left a daemon behind).

PostgreSQL refuses to run as root, so when we are root initdb and the postmaster run as the
`postgres` user, which owns the temp dirs.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from harness.components.net import free_port, wait_until
from harness.components.procs import ProcessGroup, release_sysv_segments, scratch_dir
from harness.errors import ComponentUnavailable

__all__ = ["PostgresBinaries", "PostgresServer", "PostgresUnavailable", "find_binaries",
           "server_user"]

_VERSIONED_BIN_GLOB = "/usr/lib/postgresql/*/bin"
_INSTALL_HINT = "install them with `apt-get install postgresql-15`"
_SERVER_USER = "postgres"
_BIND_RETRIES = 3


class PostgresUnavailable(ComponentUnavailable):
    """PostgreSQL cannot be started on this machine; the message says what is missing."""


@dataclass(frozen=True)
class PostgresBinaries:
    initdb: Path
    pg_ctl: Path

    @property
    def postgres(self) -> Path:
        """The server itself, next to initdb."""
        return self.initdb.parent / "postgres"


def find_binaries(search_path: str | None = None) -> PostgresBinaries:
    """initdb, pg_ctl (and postgres beside them) from PATH, else from the newest
    `/usr/lib/postgresql/*/bin`.

    Debian installs the server tools only in the versioned directory, off PATH.
    """
    initdb = shutil.which("initdb", path=search_path)
    pg_ctl = shutil.which("pg_ctl", path=search_path)
    if initdb and pg_ctl:
        found = PostgresBinaries(Path(initdb), Path(pg_ctl))
        if os.access(found.postgres, os.X_OK):
            return found
    for bin_dir in sorted(glob.glob(_VERSIONED_BIN_GLOB), key=_version_key, reverse=True):
        candidate = PostgresBinaries(Path(bin_dir, "initdb"), Path(bin_dir, "pg_ctl"))
        if all(os.access(p, os.X_OK)
               for p in (candidate.initdb, candidate.pg_ctl, candidate.postgres)):
            return candidate
    raise PostgresUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl) were not found on PATH nor in "
        f"{_VERSIONED_BIN_GLOB}; {_INSTALL_HINT}"
    )


def _version_key(bin_dir: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", Path(bin_dir).parent.name)) or (0,)


class PostgresServer:
    """A PostgreSQL server for one test session.

    >>> with PostgresServer() as pg:
    ...     psycopg.connect(pg.conninfo)

    The superuser is `postgres` with trust authentication, the database is `postgres`.
    `settings` are passed to the server as `-c name=value`.
    """

    def __init__(
        self,
        *,
        settings: Mapping[str, str] | None = None,
        startup_timeout: float = 60.0,
        binaries: PostgresBinaries | None = None,
    ) -> None:
        self.settings = dict(settings or {})
        self.startup_timeout = startup_timeout
        self._binaries = binaries
        self.host = "127.0.0.1"
        self.port = 0
        self.user = _SERVER_USER
        self.dbname = "postgres"
        self._base_dir: Path | None = None
        self._group: ProcessGroup | None = None

    @property
    def base_dir(self) -> Path:
        if self._base_dir is None:
            raise RuntimeError("PostgresServer is not started")
        return self._base_dir

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def log_file(self) -> Path:
        """The postmaster's log (its stderr)."""
        return self.base_dir / "postgres.stderr.log"

    @property
    def process(self) -> ProcessGroup | None:
        """The postmaster's process group while it runs."""
        return self._group

    @property
    def conninfo(self) -> str:
        """A libpq key/value connection string."""
        return f"host={self.host} port={self.port} user={self.user} dbname={self.dbname}"

    @property
    def dsn(self) -> str:
        """The same server as a `postgresql://` URL."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.dbname}"

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        binaries = self._binaries or find_binaries()
        user = server_user()
        self._base_dir = scratch_dir("pg-")
        try:
            _chown(self._base_dir, user)
            template = _template(binaries, user)
            # cp -a keeps the owner (the server user) and the 0700 mode PostgreSQL insists on.
            _check_run(["cp", "-a", str(template), str(self.data_dir)], what="copying the "
                       "initdb template", timeout=self.startup_timeout)
            self._start_server(binaries, user)
        except BaseException:
            self.stop()
            raise

    def _start_server(self, binaries: PostgresBinaries, user: str | None) -> None:
        # free_port only says the port was free a moment ago; another process may take it
        # before the postmaster binds, so a bind failure is retried on a new port.
        for attempt in range(1, _BIND_RETRIES + 1):
            self.port = free_port()
            argv = [str(binaries.postgres), "-D", str(self.data_dir), "-h", self.host,
                    "-p", str(self.port), "-k", str(self.base_dir)]
            # Dynamic shared memory as files in the data directory, which goes with it: POSIX
            # segments in /dev/shm would outlive a postmaster that was killed.
            settings = {"dynamic_shared_memory_type": "mmap", **self.settings}
            for name, value in settings.items():
                argv += ["-c", f"{name}={value}"]
            group = ProcessGroup(argv, name="postgres", log_dir=self.base_dir,
                                 cwd=self.base_dir, user=user)
            self._group = group
            died: list[str] = []

            def probe(group: ProcessGroup = group, died: list[str] = died) -> bool | None:
                if not group.alive:
                    died.append(self._read_log())
                    return True
                return True if self._probe() else None

            try:
                wait_until(probe, timeout=self.startup_timeout,
                           what=f"PostgreSQL on {self.host}:{self.port}")
            except TimeoutError as exc:
                raise PostgresUnavailable(f"{exc}\n{self._read_log()[-2000:]}") from None
            if not died:
                return
            group.kill()
            self._group = None
            if attempt == _BIND_RETRIES or "could not bind" not in died[0]:
                raise PostgresUnavailable(
                    f"postgres exited with {group.returncode} before accepting connections:"
                    f"\n{died[0][-2000:]}")

    def stop(self) -> None:
        """Stop the server (fast, then immediate, then SIGKILL) and remove its directory."""
        base_dir, self._base_dir = self._base_dir, None
        group, self._group = self._group, None
        try:
            if group is not None:
                _stop_postmaster(group)
        finally:
            if base_dir is not None:
                # A postmaster that had to be killed left its SysV segment behind.
                release_sysv_segments(base_dir)
                shutil.rmtree(base_dir, ignore_errors=True)

    def _probe(self) -> bool:
        import psycopg

        with psycopg.connect(self.conninfo, connect_timeout=2) as conn:
            row = conn.execute("SELECT 1").fetchone()
        return row == (1,)

    def _read_log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except (OSError, RuntimeError):
            return ""


def _stop_postmaster(group: ProcessGroup) -> None:
    # Signals go to the postmaster only: it shuts its children down in order (SIGINT = fast
    # shutdown, SIGQUIT = immediate); the group's SIGKILL is the last resort.
    for sig, grace in ((signal.SIGINT, 10.0), (signal.SIGQUIT, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            if group.returncode is None:
                os.kill(group.pid, sig)
        deadline = time.monotonic() + grace
        while group.alive and time.monotonic() < deadline:
            time.sleep(0.02)
        if not group.alive:
            break
    group.kill()


def server_user() -> str | None:
    """The user PostgreSQL runs as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(_SERVER_USER)
    except KeyError:
        raise PostgresUnavailable(
            f"running as root, and PostgreSQL refuses to run as root, but there is no "
            f"{_SERVER_USER!r} user to run it as; create it (`useradd --system "
            f"{_SERVER_USER}`) or {_INSTALL_HINT}"
        ) from None
    return _SERVER_USER


def _chown(path: Path, user: str | None) -> None:
    if user is not None:
        info = pwd.getpwnam(user)
        os.chown(path, info.pw_uid, info.pw_gid)


def _check_run(argv: Sequence[str], *, what: str, timeout: float,
               user: str | None = None, cwd: Path | None = None) -> None:
    try:
        result = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True,
                                timeout=timeout, check=False, user=user,
                                extra_groups=[] if user is not None else None)
    except subprocess.TimeoutExpired as exc:
        raise PostgresUnavailable(f"{what} did not finish in {exc.timeout:.0f}s") from exc
    if result.returncode != 0:
        detail = "\n".join(part.strip() for part in (result.stdout, result.stderr) if part)
        raise PostgresUnavailable(f"{what} failed (exit {result.returncode}):\n{detail}")


_TEMPLATE_LOCK = threading.Lock()
_TEMPLATES: dict[tuple[str, str | None], Path] = {}


def _template(binaries: PostgresBinaries, user: str | None) -> Path:
    """A data directory made by initdb once per process (and per binaries and user)."""
    key = (str(binaries.initdb), user)
    with _TEMPLATE_LOCK:
        found = _TEMPLATES.get(key)
        if found is not None and found.is_dir():
            return found
        root = scratch_dir("pg-template-")
        atexit.register(shutil.rmtree, root, True)
        _chown(root, user)
        data = root / "data"
        _check_run([str(binaries.initdb), "-D", str(data), "-U", _SERVER_USER,
                    "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync"],
                   what="initdb", timeout=120.0, user=user, cwd=root)
        _TEMPLATES[key] = data
        return data
