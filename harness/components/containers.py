"""The real components and worker hosts as containers (`--components containers`).

The same small interfaces as the process path (`PostgresServer`, `RestateServer`,
`ToxiproxyServer`, `WorkerProcess`), so the Restate runtime drives either without knowing
which: restate-server, PostgreSQL and Toxiproxy are started through testcontainers, and each
worker host of each deployment is its own container, so a GC pause is `docker pause` of the
whole host and a crash is `docker kill` followed by a new container of the same image.

Every container uses host networking and binds to 127.0.0.1, as the processes do: the engine
runs with `--bridge=none` (see `make docker`), and addresses stay the same on both paths.

The hosts of one deployment accept from one listening socket the harness owns (see
`SharedListener`): a socket cannot be handed to a container on its command line, so the
container's first process asks the harness for it over a Unix socket in a mounted directory
(SCM_RIGHTS), then becomes hypercorn serving `fd://N` (`harness.components.fdlaunch`).

Nothing is left behind. Every container carries the labels `durable-chaos.owner`
(host name and pid of the harness) and `durable-chaos.run`; each component removes its own
container when it stops, an exit handler removes whatever this process still owns, and the
first use of the engine in a process removes the containers of owners that are gone (a
harness killed with SIGKILL runs no exit handler). Testcontainers' own reaper is an image
pulled from a registry, so it is switched off (`TESTCONTAINERS_RYUK_DISABLED`).

Images come from `harness.components.images`.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import os
import shutil
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from harness.components import postgres as _pg
from harness.components.net import free_port, wait_until
from harness.components.procs import scratch_dir
from harness.components.restate import RestateServer
from harness.components.toxiproxy import ToxiproxyServer
from harness.components.workers import SharedListener, WorkerProcess
from harness.errors import ConfigError
from harness.evidence import pid_alive

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container

__all__ = [
    "ContainerPostgres",
    "ContainerRestate",
    "ContainerToxiproxy",
    "ContainerWorker",
    "docker_client",
    "owned_containers",
    "remove_owned",
    "sweep",
]

LABEL_OWNER = "durable-chaos.owner"
LABEL_RUN = "durable-chaos.run"
LABEL_ROLE = "durable-chaos.role"
_REPO_ROOT = Path(__file__).resolve().parents[2]
# `make docker` starts the project's own engine here; used when DOCKER_HOST is unset and the
# machine has no engine at the usual socket.
PROJECT_SOCKET = _REPO_ROOT / ".scratch" / "docker" / "docker.sock"
_SYSTEM_SOCKET = Path("/var/run/docker.sock")
_ENGINE_HINT = ("run `make docker` (installs Debian's docker.io and starts dockerd into "
                ".scratch/docker) or set DOCKER_HOST to a running engine")

_LOCK = threading.Lock()
_CLIENT: docker.DockerClient | None = None


def _owner() -> str:
    return f"{socket.gethostname()}.{os.getpid()}"


def docker_host() -> str:
    """$DOCKER_HOST, else the machine's engine socket, else the project's (`make docker`)."""
    from_env = os.environ.get("DOCKER_HOST")
    if from_env:
        return from_env
    for sock in (_SYSTEM_SOCKET, PROJECT_SOCKET):
        if sock.is_socket():
            return f"unix://{sock}"
    raise ConfigError(f"--components containers: no Docker engine (DOCKER_HOST is unset, and "
                      f"neither {_SYSTEM_SOCKET} nor {PROJECT_SOCKET} exists); {_ENGINE_HINT}")


def docker_client() -> docker.DockerClient:
    """The process's client of the engine; the first call sweeps what dead owners left."""
    global _CLIENT
    with _LOCK:
        if _CLIENT is not None:
            return _CLIENT
        host = docker_host()
        # testcontainers reads these when it first needs them: same engine, no reaper.
        os.environ["DOCKER_HOST"] = host
        os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
        try:
            import docker
            import docker.errors
        except ImportError:
            raise ConfigError("--components containers needs the Python packages docker and "
                              "testcontainers: `pip install -e '.[docker]'` (or `make "
                              "install`)") from None
        try:
            client = docker.DockerClient(base_url=host, version="auto", timeout=60)
            client.ping()
        except docker.errors.DockerException as exc:
            raise ConfigError(f"--components containers: the Docker engine at {host} does not "
                              f"answer ({exc}); {_ENGINE_HINT}") from None
        _CLIENT = client
    sweep(client)
    atexit.register(remove_owned)
    return client


def owned_containers(client: docker.DockerClient, owner: str | None = None) -> list[Container]:
    """Containers of this harness (every owner, or one)."""
    label = LABEL_OWNER if owner is None else f"{LABEL_OWNER}={owner}"
    found: list[Container] = client.containers.list(all=True, filters={"label": label})
    return found


def _remove(container: Container) -> None:
    import docker.errors

    with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
        container.reload()
        if container.status == "paused":
            container.unpause()
    with contextlib.suppress(docker.errors.NotFound):
        # v=True: the anonymous volumes an official image declares go with it.
        container.remove(force=True, v=True)


def sweep(client: docker.DockerClient) -> int:
    """Remove the containers of harness processes on this machine that are gone."""
    host = socket.gethostname()
    removed = 0
    for container in owned_containers(client):
        owner = container.labels.get(LABEL_OWNER, "")
        name, _, pid = owner.rpartition(".")
        if name != host or not pid.isdigit() or int(pid) == os.getpid() or pid_alive(int(pid)):
            continue
        _remove(container)
        removed += 1
    return removed


def remove_owned() -> None:
    """Remove every container this process still owns (the exit handler)."""
    client = _CLIENT
    if client is None:
        return
    with contextlib.suppress(Exception):
        for container in owned_containers(client, _owner()):
            _remove(container)


def _labels(role: str, run: str) -> dict[str, str]:
    return {LABEL_OWNER: _owner(), LABEL_RUN: run, LABEL_ROLE: role}


def _image(kind: str) -> str:
    from harness.components.images import find_image

    return find_image(docker_client(), kind)


def _official(image: str) -> bool:
    from harness.components.images import OFFICIAL

    return image in OFFICIAL.values()


def _running(container: Container) -> bool:
    import docker.errors

    try:
        container.reload()
    except docker.errors.NotFound:
        return False
    return container.status in ("running", "paused", "created", "restarting")


def _exit_code(container: Container) -> int | None:
    import docker.errors

    try:
        container.reload()
    except docker.errors.NotFound:
        return None
    state = container.attrs.get("State", {})
    return None if state.get("Running") else int(state.get("ExitCode", 0))


def _logs(container: Container, chars: int = 2000) -> str:
    with contextlib.suppress(Exception):
        text: str = container.logs().decode(errors="replace")
        return text[-chars:]
    return ""


@contextlib.contextmanager
def _uninterrupted() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block is done. Around the start of a container and
    the line that keeps it: an interrupt that landed between the engine creating the
    container and the component holding it would leave a container no `stop` knows of, and
    the worker process that a SIGTERM ends exits without running exit handlers."""
    if threading.current_thread() is not threading.main_thread():
        # Python runs signal handlers in the main thread only: they never interrupt this one.
        yield
        return
    # The handlers are deferred, not the signals masked: a mask is per thread, and a signal
    # sent to the process goes to any thread that does not mask it (a watchdog, a test
    # runner's), whose arrival still runs the Python handler here at the next bytecode.
    came: list[int] = []

    def defer(signum: int, frame: object) -> None:
        came.append(signum)

    previous = {s: signal.signal(s, defer) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        for deferred in dict.fromkeys(came):
            signal.raise_signal(deferred)  # now to the handler it was meant for


def _start(image: str, role: str, run: str, *, command: Sequence[str],
           volumes: Mapping[Path, str] = {}, env: Mapping[str, str] | None = None,
           name: str | None = None, **kwargs: Any) -> Container:
    """A started container with host networking and our labels (testcontainers'
    `DockerContainer`, unwrapped). Call it inside `_uninterrupted`, with the assignment that
    keeps the container."""
    docker_client()  # engine check, sweep and environment for testcontainers
    from testcontainers.core.config import testcontainers_config
    from testcontainers.core.container import DockerContainer

    # The reaper (Ryuk) is pulled from a registry; this module removes its own containers.
    # Set on the configuration, not only in the environment: testcontainers reads the
    # variable once, and a process that asked before `docker_client` set it keeps the reaper.
    testcontainers_config.ryuk_disabled = True

    container = DockerContainer(image)
    container.with_command(list(command))
    container.with_name(name or f"dc-{run}-{role}-{uuid.uuid4().hex[:6]}")
    for key, value in (env or {}).items():
        container.with_env(key, value)
    for host_path, mode in volumes.items():
        container.with_volume_mapping(str(host_path), str(host_path), mode)
    container.with_kwargs(network_mode="host", labels=_labels(role, run), **kwargs)
    started: Container = container.start().get_wrapped_container()
    return started


def _stop_container(container: Container | None, sig: str, timeout: float) -> None:
    """`sig`, then SIGKILL after `timeout`, then remove (the container's logs go with it)."""
    import docker.errors

    if container is None:
        return
    with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
        container.reload()
        if container.status == "paused":
            container.unpause()
        if container.status in ("running", "paused"):
            container.kill(signal=sig)
            deadline = time.monotonic() + timeout
            while _running(container) and time.monotonic() < deadline:
                time.sleep(0.02)
    _remove(container)


# -- components ---------------------------------------------------------------------------------


class ContainerPostgres(_pg.PostgresServer):
    """`PostgresServer` in a container: the data directory is made on the host from the same
    initdb template as the process path and mounted; the server runs as the same user."""

    def __init__(self, *, run: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run = run or uuid.uuid4().hex[:12]
        self._container: Container | None = None
        self.startup_seconds: float | None = None

    @property
    def container(self) -> Container | None:
        return self._container

    def start(self) -> None:
        started = time.monotonic()
        image = _image("postgres")
        self._base_dir = scratch_dir("pg-")
        try:
            self.port = free_port()
            settings = {"dynamic_shared_memory_type": "mmap", "jit": "off",
                        "unix_socket_directories": "", **self.settings}
            args = ["-h", self.host, "-p", str(self.port)]
            for name, value in settings.items():
                args += ["-c", f"{name}={value}"]
            if _official(image):
                with _uninterrupted():
                    self._container = _start(image, "postgres", self.run,
                                             command=["postgres", *args],
                                             env={"POSTGRES_HOST_AUTH_METHOD": "trust"})
            else:
                user = _pg.server_user()
                binaries = _pg.find_binaries()
                _pg._chown(self._base_dir, user)
                template = _pg._template(binaries, user)
                _pg._check_run(["cp", "-a", str(template), str(self.data_dir)],
                               what="copying the initdb template", timeout=self.startup_timeout)
                uid = os.stat(self.data_dir).st_uid
                gid = os.stat(self.data_dir).st_gid
                with _uninterrupted():
                    self._container = _start(image, "postgres", self.run,
                                             command=["-D", str(self.data_dir), *args],
                                             volumes={self._base_dir: "rw"},
                                             user=f"{uid}:{gid}")

            def probe() -> bool | None:
                if self._container is not None and _exit_code(self._container) is not None:
                    raise _pg.PostgresUnavailable(
                        f"postgres container exited:\n{_logs(self._container)}")
                return True if self._probe() else None

            try:
                wait_until(lambda: _fatal(probe), timeout=self.startup_timeout,
                           what=f"PostgreSQL container on {self.host}:{self.port}")
            except TimeoutError as exc:
                raise _pg.PostgresUnavailable(f"{exc}\n{_logs(self._container)}") from None
            _reraise()
            self.startup_seconds = time.monotonic() - started
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        container, self._container = self._container, None
        base_dir, self._base_dir = self._base_dir, None
        try:
            _stop_container(container, "SIGINT", 10.0)  # SIGINT: fast shutdown
        finally:
            if base_dir is not None:
                shutil.rmtree(base_dir, ignore_errors=True)


_FATAL = threading.local()


def _fatal(probe: Any) -> bool | None:
    """Run a readiness probe for `wait_until`, except that a component that died ends the
    wait at once (re-raised by `_reraise`) instead of being retried until the timeout."""
    try:
        result: bool | None = probe()
        return result
    except (_pg.PostgresUnavailable, _Died) as exc:
        _FATAL.error = exc
        return True


def _reraise() -> None:
    error = getattr(_FATAL, "error", None)
    _FATAL.error = None
    if error is not None:
        raise error


class _Died(RuntimeError):
    pass


@dataclass
class ContainerRestate(RestateServer):
    """`RestateServer` in a container: the same generated config, mounted at its own path."""

    run: str = ""
    _container: Container | None = field(default=None, init=False, repr=False)

    @property
    def container(self) -> Container | None:
        return self._container

    def start(self) -> ContainerRestate:
        if self._external or self._container is not None:
            return self
        started = time.monotonic()
        image = _image("restate")
        self._base_dir = scratch_dir("restate-")
        from harness.components.restate import RestatePorts

        self.ports = RestatePorts.free()
        self._admin_url = f"http://127.0.0.1:{self.ports.admin}"
        self._ingress_url = f"http://127.0.0.1:{self.ports.ingress}"
        env = {"DO_NOT_TRACK": "1", "NO_COLOR": "1"}
        try:
            if _official(image):
                # The official image reads the same settings from the environment.
                env |= {"RESTATE_BIND_ADDRESS": f"127.0.0.1:{self.ports.node}",
                        "RESTATE_ADVERTISED_ADDRESS": f"http://127.0.0.1:{self.ports.node}/",
                        "RESTATE_ADMIN__BIND_ADDRESS": f"127.0.0.1:{self.ports.admin}",
                        "RESTATE_INGRESS__BIND_ADDRESS": f"127.0.0.1:{self.ports.ingress}"}
            config = self._base_dir / "restate.toml"
            config.write_text(self.config_toml())
            with _uninterrupted():
                self._container = _start(image, "restate", self.run or uuid.uuid4().hex[:12],
                                         command=["--config-file", str(config), "--no-logo"],
                                         volumes={self._base_dir: "rw"}, env=env,
                                         working_dir=str(self._base_dir))
            self._wait_container()
            self.startup_seconds = time.monotonic() - started
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_container(self) -> None:
        container = self._container
        assert container is not None
        probe_client = httpx.Client(timeout=2.0)

        def probe() -> bool | None:
            if _exit_code(container) is not None:
                raise _Died(f"restate-server container exited:\n{_logs(container)}")
            response = probe_client.post(
                f"{self.admin_url}/query",
                json={"query": "SELECT count(*) AS n FROM sys_invocation"},
                headers={"content-type": "application/json", "accept": "application/json"})
            if response.status_code != 200:
                return None
            ingress = probe_client.get(f"{self.ingress_url}/restate/health")
            return True if ingress.status_code == 200 else None

        try:
            wait_until(lambda: _fatal(probe), timeout=self.startup_timeout,
                       what="restate-server container")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n{_logs(container)}") from None
        finally:
            probe_client.close()
        _reraise()

    def stop(self, timeout: float = 5.0) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        if self._external:
            return
        container, self._container = self._container, None
        try:
            _stop_container(container, "SIGTERM", timeout)
        finally:
            if self._base_dir is not None:
                shutil.rmtree(self._base_dir, ignore_errors=True)
            self._base_dir = None


class ContainerToxiproxy(ToxiproxyServer):
    """`ToxiproxyServer` in a container (host network: its proxies listen on 127.0.0.1)."""

    def __init__(self, *, run: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run = run or uuid.uuid4().hex[:12]
        self._container: Container | None = None

    @property
    def container(self) -> Container | None:
        return self._container

    def start(self) -> ContainerToxiproxy:
        if self._external_url is not None or self._container is not None:
            return self
        started = time.monotonic()
        image = _image("toxiproxy")
        if not self._fixed_port:
            self.port = free_port()
        with _uninterrupted():
            container = self._container = _start(
                image, "toxiproxy", self.run,
                command=["-host", "127.0.0.1", "-port", str(self.port)])

        def probe() -> bool | None:
            if _exit_code(container) is not None:
                raise _Died(f"toxiproxy-server container exited:\n{_logs(container)}")
            with httpx.Client(timeout=2.0) as http:
                return True if http.get(f"{self.api_url}/version").status_code == 200 else None

        try:
            wait_until(lambda: _fatal(probe), timeout=self.startup_timeout,
                       what="toxiproxy-server container")
            _reraise()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def stop(self, timeout: float = 5.0) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        container, self._container = self._container, None
        _stop_container(container, "SIGTERM", timeout)


# -- the listening socket of a deployment, handed to its containers -----------------------------


class _SocketBroker:
    """A Unix socket server that hands a registered listening socket to whoever asks for it
    by port (one per harness process, started on first use)."""

    def __init__(self) -> None:
        self.dir = scratch_dir("sockets-")
        self.path = self.dir / "listeners.sock"
        self._listeners: dict[int, SharedListener] = {}
        self._lock = threading.Lock()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        self._server.listen(64)
        atexit.register(shutil.rmtree, self.dir, True)
        threading.Thread(target=self._serve, name="listener-broker", daemon=True).start()

    def register(self, listener: SharedListener) -> None:
        with self._lock:
            self._listeners[listener.port] = listener

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with conn, contextlib.suppress(OSError, ValueError, RuntimeError):
                port = int(conn.recv(32).decode().strip() or 0)
                with self._lock:
                    listener = self._listeners.get(port)
                if listener is None:
                    conn.sendall(b"unknown port")
                    continue
                conn.sendmsg([b"ok"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                        array.array("i", [listener.fileno()]))])


_BROKER: _SocketBroker | None = None


def _broker() -> _SocketBroker:
    global _BROKER
    with _LOCK:
        if _BROKER is None:
            _BROKER = _SocketBroker()
        return _BROKER


# -- worker hosts -------------------------------------------------------------------------------


class _ContainerState:
    """What the runtime reads of a worker's "process": its exit status."""

    def __init__(self, worker: ContainerWorker) -> None:
        self._worker = worker

    @property
    def returncode(self) -> int | None:
        container = self._worker.container
        return None if container is None else _exit_code(container)


class ContainerWorker(WorkerProcess):
    """A worker host as its own container (image `worker`): same arguments as `WorkerProcess`.

    The checkout (with its venv) is mounted read-only at its own path and the worker runs the
    venv's interpreter, so the code under test is the code of the process path. `pause` is
    `docker pause`, `kill` is `docker kill`, `start` after a kill runs a new container of the
    same image on the same port and listening socket. The container's init (`--init`) keeps
    the worker from being PID 1, which ignores the signals a worker sends itself at a fault
    point (SIGSTOP, SIGKILL); `resume` unpauses and sends SIGCONT, which the init passes on.
    """

    def __init__(self, app: str, *, run: str = "", **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.run = run or uuid.uuid4().hex[:12]
        self._container: Container | None = None
        self._incarnation = 0

    @property
    def container(self) -> Container | None:
        return self._container

    @property
    def process(self) -> Any:
        if self._container is None:
            raise RuntimeError("ContainerWorker is not started")
        return _ContainerState(self)

    @property
    def pid(self) -> int:
        container = self._container
        if container is None:
            raise RuntimeError("ContainerWorker is not started")
        container.reload()
        return int(container.attrs["State"]["Pid"])

    @property
    def alive(self) -> bool:
        return self._container is not None and _running(self._container)

    def _mounts(self) -> dict[Path, str]:
        mounts: dict[Path, str] = {_REPO_ROOT: "ro", Path(sys.prefix): "ro"}
        for entry in self.pythonpath:
            mounts.setdefault(Path(entry), "ro")
        broker = _broker()
        mounts[broker.dir] = "ro"
        # Nested mounts: keep the outermost.
        return {p: m for p, m in mounts.items()
                if not any(o != p and p.is_relative_to(o) for o in mounts)}

    def spawn(self) -> ContainerWorker:
        if self.alive:
            return self
        image = _image("worker")
        if not self.port:
            self.port = free_port()
        if self._container is not None:  # the crashed incarnation, whose exit was read
            self._keep_log(self._container)
            _remove(self._container)
            self._container = None
        env = dict(self.env)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in [*self.pythonpath, env.get("PYTHONPATH", "")] if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
        argv = self.argv()  # [python, -m, hypercorn, ..., --bind fd://N?, ...]
        command = [arg for arg in argv[1:]]
        listen: list[str] = []
        if self.listener is not None:
            _broker().register(self.listener)
            # The launcher fetches the socket from the broker and puts its fd in place of
            # the placeholder before it becomes hypercorn.
            command = [a.replace(f"fd://{self.listener.fileno()}", "fd://{fd}")
                       for a in command]
            listen = [str(_broker().path), str(self.listener.port)]
        python = str(Path(sys.prefix) / "bin" / "python")
        self._incarnation += 1
        self._spawned_at = time.monotonic()
        with _uninterrupted():
            self._container = _start(
                image, "worker", self.run,
                command=["-m", "harness.components.fdlaunch", *listen, "--", *command],
                volumes=self._mounts(), env=env, entrypoint=[python],
                working_dir=str(self.cwd or _REPO_ROOT), init=True,
                name=f"dc-{self.run}-{self.name}-{self._incarnation}".replace(".", "-"))
        return self

    def wait_ready(self) -> ContainerWorker:
        container = self._container
        if container is None:
            raise RuntimeError("ContainerWorker is not started")
        url = self.url + self.health_path

        def probe() -> bool | None:
            if _exit_code(container) is not None:
                raise _Died(f"worker container {self.name} exited before serving:\n"
                            f"{_logs(container)}")
            with httpx.Client(timeout=2.0) as client:
                client.get(url)
            return True

        try:
            wait_until(lambda: _fatal(probe), timeout=self.startup_timeout,
                       what=f"worker container {self.app}")
            _reraise()
        except BaseException:
            self.kill()
            raise
        self.startup_seconds = time.monotonic() - self._spawned_at
        return self

    def _keep_log(self, container: Container) -> None:
        """The container's output, appended to the host's log file in `log_dir` (the
        container and its own log go when it is removed)."""
        if self.log_dir is None:
            return
        with contextlib.suppress(OSError), (self.log_dir / f"{self.name}.log").open("a") as fh:
            fh.write(f"--- container {container.name}\n{_logs(container, 200_000)}")

    def pause(self) -> None:
        if self._container is not None:
            self._container.pause()

    def resume(self) -> None:
        import docker.errors

        container = self._container
        if container is None:
            return
        with contextlib.suppress(docker.errors.APIError):
            container.reload()
            if container.status == "paused":
                container.unpause()
            # A worker that stopped itself at a fault point (SIGSTOP) is continued too.
            container.kill(signal="SIGCONT")

    def kill(self) -> int | None:
        import docker.errors

        container = self._container
        if container is None:
            return None
        with contextlib.suppress(docker.errors.APIError):
            container.reload()
            if container.status in ("running", "paused"):
                container.kill()
        wait_until(lambda: True if not _running(container) else None, timeout=10.0,
                   what=f"the kill of {self.name}")
        return _exit_code(container)

    def stop(self, timeout: float = 5.0, *, term_grace: float = 0.3) -> int | None:
        """SIGINT (hypercorn ignores SIGTERM while Restate holds a connection), then
        SIGKILL; the container is removed, after its log is kept beside the others."""
        container, self._container = self._container, None
        if container is None:
            return None
        code: int | None = None
        try:
            _stop_container_keep(container, timeout)
            code = _exit_code(container)
            self._keep_log(container)
        finally:
            _remove(container)
        return code


def _stop_container_keep(container: Container, timeout: float) -> None:
    import docker.errors

    with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
        container.reload()
        if container.status == "paused":
            container.unpause()
        if container.status in ("running", "paused"):
            container.kill(signal="SIGCONT")
            container.kill(signal="SIGINT")
            deadline = time.monotonic() + timeout
            while _running(container) and time.monotonic() < deadline:
                time.sleep(0.02)
            if _running(container):
                container.kill()


def stop_workers(workers: Sequence[ContainerWorker], timeout: float = 5.0) -> None:
    """Stop several worker containers at once (each in its own thread)."""
    threads = [threading.Thread(target=w.stop, args=(timeout,), daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 15)
