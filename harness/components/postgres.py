"""A throwaway PostgreSQL server from the machine's own binaries.

`initdb` into a temp dir, `pg_ctl start` on 127.0.0.1 and a free port (the Unix socket goes
into the temp dir too, so nothing touches /var/run/postgresql), ready once `SELECT 1`
succeeds, stopped fast (then immediate, then SIGKILL of the postmaster) and removed.

PostgreSQL refuses to run as root, so when we are root both tools run as the `postgres` user,
which owns the temp dir.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from harness.components.net import free_port, wait_until

__all__ = ["PostgresBinaries", "PostgresServer", "PostgresUnavailable", "find_binaries"]

_VERSIONED_BIN_GLOB = "/usr/lib/postgresql/*/bin"
_INSTALL_HINT = "install them with `apt-get install postgresql-15`"
_SERVER_USER = "postgres"
_BIND_RETRIES = 3
# `su -c` takes one shell string; the command is quoted into this slot by `_as_server_user`.
_SU_MARK = "\0command"


class PostgresUnavailable(RuntimeError):
    """PostgreSQL cannot be started on this machine; the message says what is missing."""


@dataclass(frozen=True)
class PostgresBinaries:
    initdb: Path
    pg_ctl: Path


def find_binaries(search_path: str | None = None) -> PostgresBinaries:
    """initdb and pg_ctl from PATH, else from the newest `/usr/lib/postgresql/*/bin`.

    Debian installs the server tools only in the versioned directory, off PATH.
    """
    initdb = shutil.which("initdb", path=search_path)
    pg_ctl = shutil.which("pg_ctl", path=search_path)
    if initdb and pg_ctl:
        return PostgresBinaries(Path(initdb), Path(pg_ctl))
    for bin_dir in sorted(glob.glob(_VERSIONED_BIN_GLOB), key=_version_key, reverse=True):
        candidate = PostgresBinaries(Path(bin_dir, "initdb"), Path(bin_dir, "pg_ctl"))
        if all(os.access(p, os.X_OK) for p in (candidate.initdb, candidate.pg_ctl)):
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
        self._postmaster_pid: int | None = None

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
        return self.base_dir / "server.log"

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
        run_as = self._run_as_prefix()
        self._base_dir = Path(tempfile.mkdtemp(prefix="durable-chaos-pg-"))
        try:
            if run_as:
                info = pwd.getpwnam(_SERVER_USER)
                os.chown(self._base_dir, info.pw_uid, info.pw_gid)
            self._run(
                [
                    *run_as,
                    str(binaries.initdb),
                    "-D",
                    str(self.data_dir),
                    "-U",
                    self.user,
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--no-locale",
                    "--no-sync",
                ],
                what="initdb",
            )
            self._start_server(binaries, run_as)
            self._postmaster_pid = self._read_postmaster_pid()
            wait_until(
                self._probe,
                timeout=self.startup_timeout,
                what=f"PostgreSQL on {self.host}:{self.port}",
            )
        except BaseException:
            self.stop()
            raise

    def _start_server(self, binaries: PostgresBinaries, run_as: Sequence[str]) -> None:
        # free_port only says the port was free a moment ago; another process may take it
        # before the postmaster binds, so a bind failure is retried on a new port.
        for attempt in range(1, _BIND_RETRIES + 1):
            self.port = free_port()
            options = f"-h {self.host} -p {self.port} -k {self.base_dir}"
            for name, value in self.settings.items():
                options += f" -c {name}={value}"
            try:
                self._run(
                    [
                        *run_as,
                        str(binaries.pg_ctl),
                        "-D",
                        str(self.data_dir),
                        "-l",
                        str(self.log_file),
                        "-o",
                        options,
                        "-w",
                        "-t",
                        str(int(self.startup_timeout)),
                        "start",
                    ],
                    what="pg_ctl start",
                )
                return
            except PostgresUnavailable:
                log = self._read_log()
                if attempt == _BIND_RETRIES or "could not bind" not in log:
                    raise

    def stop(self) -> None:
        """Stop the server (fast, then immediate, then SIGKILL) and remove its directory."""
        base_dir, self._base_dir = self._base_dir, None
        if base_dir is None:
            return
        try:
            data_dir = base_dir / "data"
            if (data_dir / "postmaster.pid").exists():
                self._stop_server(data_dir)
        finally:
            shutil.rmtree(base_dir, ignore_errors=True)
            self._postmaster_pid = None

    def _stop_server(self, data_dir: Path) -> None:
        binaries = self._binaries or find_binaries()
        run_as = self._run_as_prefix()
        for mode in ("fast", "immediate"):
            result = subprocess.run(
                _as_server_user(
                    [
                        *run_as,
                        str(binaries.pg_ctl),
                        "-D",
                        str(data_dir),
                        "-m",
                        mode,
                        "-w",
                        "-t",
                        "20",
                        "stop",
                    ]
                ),
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            if result.returncode == 0:
                return
        pid = _pid_from_file(data_dir / "postmaster.pid") or self._postmaster_pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _probe(self) -> bool:
        import psycopg

        with psycopg.connect(self.conninfo, connect_timeout=2) as conn:
            row = conn.execute("SELECT 1").fetchone()
        return row == (1,)

    def _run_as_prefix(self) -> list[str]:
        """What to put before a command so that it runs as the server user ([] if not root)."""
        if os.geteuid() != 0:
            return []
        try:
            pwd.getpwnam(_SERVER_USER)
        except KeyError:
            raise PostgresUnavailable(
                f"running as root, and PostgreSQL refuses to run as root, but there is no "
                f"{_SERVER_USER!r} user to run it as; create it (`useradd --system "
                f"{_SERVER_USER}`) or {_INSTALL_HINT}"
            ) from None
        runuser = shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin")
        if runuser:
            return [runuser, "-u", _SERVER_USER, "--"]
        su = shutil.which("su") or shutil.which("su", path="/usr/bin:/bin")
        if su:
            return [su, _SERVER_USER, "-s", "/bin/sh", "-c", _SU_MARK]
        raise PostgresUnavailable(
            f"running as root and neither `runuser` nor `su` is available to start PostgreSQL "
            f"as {_SERVER_USER!r}; install them with `apt-get install util-linux`"
        )

    def _run(self, argv: list[str], *, what: str) -> None:
        try:
            result = subprocess.run(
                _as_server_user(argv),
                cwd=self.base_dir,  # readable by the server user, unlike the caller's cwd
                capture_output=True,
                text=True,
                timeout=self.startup_timeout + 30,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise PostgresUnavailable(f"{what} did not finish in {exc.timeout:.0f}s") from exc
        if result.returncode != 0:
            detail = "\n".join(
                part.strip() for part in (result.stdout, result.stderr, self._read_log()) if part
            )
            raise PostgresUnavailable(f"{what} failed (exit {result.returncode}):\n{detail}")

    def _read_log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except (OSError, RuntimeError):
            return ""

    def _read_postmaster_pid(self) -> int | None:
        return _pid_from_file(self.data_dir / "postmaster.pid")


def _as_server_user(argv: list[str]) -> list[str]:
    if _SU_MARK not in argv:
        return argv
    slot = argv.index(_SU_MARK)
    return [*argv[:slot], shlex.join(argv[slot + 1 :])]


def _pid_from_file(path: Path) -> int | None:
    try:
        first = path.read_text().split("\n", 1)[0].strip()
    except OSError:
        return None
    return int(first) if first.isdigit() else None
