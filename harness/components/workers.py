"""An ASGI app (a restate-sdk endpoint, usually) served by hypercorn in its own process group.

`--workers 0` keeps hypercorn in a single process: with workers it forks a child and a kill of
the master leaves the child serving. Ready means the port answers an HTTP request (a
restate-sdk endpoint answers `GET /health` with 200; any HTTP status counts, so other ASGI apps
work too). A worker is a deployment: kill it and restart it on the same port to model a crash.

Several workers can serve one endpoint (one deployment, several hosts): `SharedListener` is
a listening socket the harness owns and hands to each of them (`listen_fd`, hypercorn's
`--bind fd://N`); they all accept from its one queue, so a worker that is paused or dead takes
no new connection and the others take them all, as behind a load balancer. Each such worker
also listens on a port of its own, where its readiness is checked.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import httpx

from harness.components.net import free_port, wait_until
from harness.components.procs import ProcessGroup

__all__ = ["SharedListener", "WorkerProcess"]


class SharedListener:
    """A listening TCP socket on 127.0.0.1 that several worker processes accept from."""

    def __init__(self, backlog: int = 128) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(backlog)
        self._sock: socket.socket | None = sock
        self.port = int(sock.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fileno(self) -> int:
        if self._sock is None:
            raise RuntimeError("SharedListener is closed")
        return self._sock.fileno()

    def close(self) -> None:
        """Stop listening: new connections are refused (workers keep their own copies open
        until they exit)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __repr__(self) -> str:
        return f"<SharedListener {self.url}{' closed' if self._sock is None else ''}>"


class WorkerProcess:
    """`hypercorn APP --workers 0 --bind 127.0.0.1:PORT`, started and stopped by process group.

    `app` is "package.module:attribute". `pythonpath` entries are prepended to PYTHONPATH so
    a test can serve a module from its own directory. `graceful_timeout` is hypercorn's wait
    for open requests after SIGTERM/SIGINT; Restate holds a request open for as long as an
    invocation runs, so the default is short.
    """

    def __init__(
        self,
        app: str,
        *,
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        pythonpath: Sequence[str | os.PathLike[str]] = (),
        cwd: str | os.PathLike[str] | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        name: str | None = None,
        health_path: str = "/health",
        graceful_timeout: int = 1,
        startup_timeout: float = 30.0,
        python: str = sys.executable,
        extra_args: Sequence[str] = (),
        listener: SharedListener | None = None,
    ) -> None:
        if ":" not in app:
            raise ValueError(f"app must be 'package.module:attribute', got {app!r}")
        self.app = app
        self.port = port or 0
        self.env = dict(env or {})
        self.pythonpath = [str(p) for p in pythonpath]
        self.cwd = cwd
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.name = name or "worker-" + app.split(":")[0].rsplit(".", 1)[-1]
        self.health_path = health_path
        self.graceful_timeout = graceful_timeout
        self.startup_timeout = startup_timeout
        self.python = python
        self.extra_args = list(extra_args)
        self.listener = listener
        self._group: ProcessGroup | None = None
        self._spawned_at = 0.0
        self.startup_seconds: float | None = None

    @property
    def url(self) -> str:
        """The endpoint's base URL, what Restate registers as a deployment."""
        if not self.port:
            raise RuntimeError("WorkerProcess is not started")
        return f"http://127.0.0.1:{self.port}"

    @property
    def process(self) -> ProcessGroup:
        if self._group is None:
            raise RuntimeError("WorkerProcess is not started")
        return self._group

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self._group is not None and self._group.alive

    def argv(self) -> list[str]:
        shared = [] if self.listener is None else ["--bind", f"fd://{self.listener.fileno()}"]
        return [
            self.python,
            "-m",
            "hypercorn",
            self.app,
            "--workers",
            "0",
            *shared,
            "--bind",
            f"127.0.0.1:{self.port}",
            "--graceful-timeout",
            str(self.graceful_timeout),
            *self.extra_args,
        ]

    def start(self) -> WorkerProcess:
        """Start (or restart, on the same port) and wait until the port answers HTTP."""
        if self._group is not None and self._group.alive:
            return self
        self.spawn()
        return self.wait_ready()

    def spawn(self) -> WorkerProcess:
        """Start the process without waiting for it (see `wait_ready`): several workers then
        start in parallel."""
        if self._group is not None and self._group.alive:
            return self
        if not self.port:
            self.port = free_port()
        env = dict(self.env)
        paths = [*self.pythonpath, env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))]
        env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        # Unbuffered, so the log files show what the worker printed before a kill -9.
        env.setdefault("PYTHONUNBUFFERED", "1")
        self._spawned_at = time.monotonic()
        fds = () if self.listener is None else (self.listener.fileno(),)
        self._group = ProcessGroup(
            self.argv(), name=self.name, log_dir=self.log_dir, env=env, cwd=self.cwd,
            pass_fds=fds,
        )
        return self

    def wait_ready(self) -> WorkerProcess:
        """Wait until the worker's own port answers HTTP (kills it if it never does)."""
        group = self.process
        try:
            self._wait_ready(group)
        except BaseException:
            group.kill()
            raise
        self.startup_seconds = time.monotonic() - self._spawned_at
        return self

    def _wait_ready(self, group: ProcessGroup) -> None:
        url = self.url + self.health_path
        died: list[str] = []

        def probe() -> bool | None:
            if not group.alive:
                died.append(group.log_tail())
                return True
            with httpx.Client(timeout=2.0) as client:
                client.get(url)  # any HTTP answer means the app is being served
            return True

        try:
            wait_until(probe, timeout=self.startup_timeout, what=f"worker {self.app}")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n{group.log_tail()}") from None
        if died:
            raise RuntimeError(
                f"worker {self.app} exited with {group.returncode} before serving:\n{died[0]}"
            )

    def restart(self, *, kill: bool = True) -> WorkerProcess:
        """Crash (SIGKILL, the default) or stop the worker, then start it on the same port."""
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start()

    def pause(self) -> None:
        self.process.pause()

    def resume(self) -> None:
        self.process.resume()

    def kill(self) -> int | None:
        """SIGKILL the group: a crash, with no graceful shutdown."""
        if self._group is None:
            return None
        return self._group.kill()

    def stop(self, timeout: float = 5.0, *, term_grace: float = 0.3) -> int | None:
        """TERM, then INT, then KILL.

        With Restate connected (even idle), hypercorn ignores SIGTERM but exits on SIGINT in
        about 0.1 s, so TERM only gets a short `term_grace` before INT.
        """
        if self._group is None:
            return None
        return self._group.stop(timeout, term_grace=term_grace)

    def __enter__(self) -> WorkerProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<WorkerProcess {self.app} port={self.port} group={self._group!r}>"
