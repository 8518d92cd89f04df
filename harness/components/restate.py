"""A real `restate-server` on 127.0.0.1, and a small client for its admin and ingress APIs.

The binary is the static one inside the npm package (`make restate`); the node wrapper in
`node_modules/.bin` would only add a node process to the group. Ready means a SQL query over
the partitions succeeds and ingress answers: `/health` answers before the partition stores
exist, and early queries then fail with "expecting a partition store" or "node lookup for
partition N failed".
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import httpx

from harness.components.binaries import RESTATE_SERVER
from harness.components.net import free_port, wait_until
from harness.components.procs import ProcessGroup, scratch_dir
from harness.errors import ComponentError, ComponentUnavailable

__all__ = [
    "AdminClient",
    "PinnedCount",
    "RestateError",
    "RestatePorts",
    "RestateServer",
    "RestateUnavailable",
    "RetryPolicy",
    "find_restate_server",
]

BIN_ENV = RESTATE_SERVER.env_var
_BIND_RETRIES = 3
_JSON_HEADERS = {"content-type": "application/json", "accept": "application/json"}

Duration = float | str
"""Seconds as a number, or a Restate duration string such as "500ms" or "2s"."""


class RestateUnavailable(ComponentUnavailable):
    """restate-server cannot be started here; the message says how to install it."""


class RestateError(ComponentError):
    """An admin or ingress request answered with an error status."""

    def __init__(self, method: str, url: str, status: int, body: str) -> None:
        self.method, self.url, self.status, self.body = method, url, status, body
        super().__init__(f"{method} {url} -> {status}: {body[:500]}")


def find_restate_server() -> Path:
    """$DURABLE_CHAOS_RESTATE_BIN, the repository's npm package, the components cache, PATH."""
    return RESTATE_SERVER.find(error=RestateUnavailable)


def _duration(value: Duration) -> str:
    if isinstance(value, str):
        return value
    return f"{round(value * 1000)}ms"


@dataclass(frozen=True)
class RetryPolicy:
    """`[default-retry-policy]`: exponential, then pause (or kill) after max_attempts.

    The defaults retry for about half a minute, so a test that kills a worker and restarts it
    sees the invocation continue, and one that never restarts it sees a pause soon enough.
    """

    initial_interval: Duration = 0.05
    max_interval: Duration = 0.5
    max_attempts: int = 60
    on_max_attempts: Literal["pause", "kill"] = "pause"


@dataclass(frozen=True)
class PinnedCount:
    """Invocations not completed and pinned to one deployment (whatever their status)."""

    deployment_id: str
    endpoint: str | None
    invocations: int


class AdminClient:
    """Sync client for the admin API (port 9070 by default) and the ingress (8080)."""

    def __init__(self, admin_url: str, ingress_url: str, *, timeout: float = 30.0) -> None:
        self.admin_url = admin_url.rstrip("/")
        self.ingress_url = ingress_url.rstrip("/")
        self._http = httpx.Client(timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _request(
        self,
        method: str,
        url: str,
        *,
        body: Any = None,
        content: bytes | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        if content is None and body is not None:
            content = json.dumps(body).encode()
        response = self._http.request(
            method,
            url,
            content=content,
            params=params,
            headers={**_JSON_HEADERS, **(headers or {})},
        )
        if response.status_code >= 400:
            raise RestateError(method, url, response.status_code, response.text)
        return response

    @staticmethod
    def _json(response: httpx.Response) -> Any:
        return response.json() if response.content else None

    # -- admin ----------------------------------------------------------------------------

    def query(self, sql: str) -> list[dict[str, Any]]:
        """Rows of an introspection query (`sys_invocation`, `sys_deployment`, ...).

        Null fields are left out of the rows by the server: use `row.get(...)`.
        """
        response = self._request("POST", f"{self.admin_url}/query", body={"query": sql})
        rows: list[dict[str, Any]] = response.json()["rows"]
        return rows

    def register_deployment(self, uri: str, *, force: bool = False) -> str:
        """Register (or re-register) the endpoint at `uri`; returns the deployment id.

        Idempotent for the same uri and services; `force` replaces a deployment at the same
        uri whose services changed.
        """
        body: dict[str, Any] = {"uri": uri}
        if force:
            body["force"] = True
        data = self._json(self._request("POST", f"{self.admin_url}/deployments", body=body))
        return str(data["id"])

    def deployments(self) -> list[dict[str, Any]]:
        """`sys_deployment` rows (id, endpoint, created_at), oldest first."""
        return self.query("SELECT id, endpoint, created_at FROM sys_deployment ORDER BY created_at")

    def delete_deployment(self, deployment_id: str) -> None:
        # Without force the server refuses (501) to delete any deployment.
        self._request(
            "DELETE",
            f"{self.admin_url}/deployments/{_quote(deployment_id)}",
            params={"force": "true"},
        )

    def pinned_counts(self) -> list[PinnedCount]:
        """Per deployment, how many invocations are not completed and pinned to it.

        Every registered deployment appears, with 0 when nothing is pinned to it. Invocations
        that have not started an attempt yet (no pinned deployment) are not counted.
        """
        rows = self.query(
            "SELECT d.id AS deployment_id, d.endpoint AS endpoint, COUNT(i.id) AS n "
            "FROM sys_deployment d LEFT JOIN sys_invocation i "
            "ON i.pinned_deployment_id = d.id AND i.status <> 'completed' "
            "GROUP BY d.id, d.endpoint ORDER BY d.id"
        )
        return [
            PinnedCount(str(r["deployment_id"]), r.get("endpoint"), int(r.get("n", 0)))
            for r in rows
        ]

    def invocations(self, where: str = "true") -> list[dict[str, Any]]:
        """A few useful `sys_invocation` columns, filtered by a SQL condition."""
        return self.query(
            "SELECT id, target, status, pinned_deployment_id, retry_count, created_at "
            f"FROM sys_invocation WHERE {where} ORDER BY created_at"
        )

    def kill_invocation(self, invocation_id: str) -> None:
        """Terminate an invocation at once (no compensation, its callers get an error)."""
        self._request("PATCH", f"{self.admin_url}/invocations/{_quote(invocation_id)}/kill")

    def clear_state(self, service: str, key: str) -> None:
        """Replace the K/V state of virtual object `service`/`key` with nothing.

        Applied asynchronously by the server (202).
        """
        self._request("POST", f"{self.admin_url}/services/{_quote(service)}/state",
                      body={"object_key": key, "new_state": {}})

    def resume_invocation(self, invocation_id: str, *, deployment: str = "latest") -> None:
        """Resume a paused invocation, optionally moving it to another deployment."""
        self._request(
            "PATCH",
            f"{self.admin_url}/invocations/{_quote(invocation_id)}/resume",
            params={"deployment": deployment},
        )

    # -- ingress --------------------------------------------------------------------------

    def _target(self, service: str, handler: str, key: str | None) -> str:
        parts = [service] if key is None else [service, key]
        return "/".join(_quote(p) for p in [*parts, handler])

    def invoke(
        self,
        service: str,
        handler: str,
        key: str | None = None,
        arg: Any = None,
        *,
        idempotency_key: str | None = None,
    ) -> Any:
        """Call a handler through ingress and wait for its JSON result."""
        headers = {"idempotency-key": idempotency_key} if idempotency_key else None
        url = f"{self.ingress_url}/{self._target(service, handler, key)}"
        return self._json(self._request("POST", url, body=arg, headers=headers))

    def send(
        self,
        service: str,
        handler: str,
        key: str | None = None,
        arg: Any = None,
        *,
        delay: Duration | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """One-way call through ingress; returns the invocation id."""
        headers = {"idempotency-key": idempotency_key} if idempotency_key else None
        params = {"delay": _duration(delay)} if delay is not None else None
        url = f"{self.ingress_url}/{self._target(service, handler, key)}/send"
        data = self._json(self._request("POST", url, body=arg, params=params, headers=headers))
        return str(data["invocationId"])

    def attach(self, invocation_id: str) -> Any:
        """Wait for an invocation's result."""
        url = f"{self.ingress_url}/restate/invocation/{_quote(invocation_id)}/attach"
        return self._json(self._request("GET", url))

    def resolve_awakeable(self, awakeable_id: str, value: Any = None) -> None:
        url = f"{self.ingress_url}/restate/awakeables/{_quote(awakeable_id)}/resolve"
        self._request("POST", url, body=value)

    def reject_awakeable(self, awakeable_id: str, reason: str) -> None:
        url = f"{self.ingress_url}/restate/awakeables/{_quote(awakeable_id)}/reject"
        self._request("POST", url, content=reason.encode(), headers={"content-type": "text/plain"})

    def health(self) -> bool:
        try:
            return self._http.get(f"{self.ingress_url}/restate/health").status_code == 200
        except httpx.HTTPError:
            return False


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


@dataclass
class RestatePorts:
    node: int = 0
    admin: int = 0
    ingress: int = 0

    @classmethod
    def free(cls) -> RestatePorts:
        return cls(free_port(), free_port(), free_port())


@dataclass
class RestateServer:
    """A restate-server for one test (or session), in its own base dir and process group.

    >>> with RestateServer() as restate:
    ...     restate.admin.register_deployment(worker.url)

    Test-friendly defaults: suspension after 1 s without progress (`inactivity_timeout`),
    abort of an unresponsive attempt 5 s later (`abort_timeout`), fast retries, and 4
    partitions (the default 24 only slows startup on a small machine).

    `http2_keep_alive_interval` / `http2_keep_alive_timeout` (the invoker's HTTP/2 pings to
    deployments, 40 s / 20 s by default) bound how long Restate keeps using a connection to a
    worker that stopped answering (a SIGSTOPped process still has its socket open, so nothing
    else tells Restate it is gone): only once the ping times out does it drop the connection,
    and its retries open a new one, which another process serving the same endpoint accepts.
    """

    inactivity_timeout: Duration = 1.0
    abort_timeout: Duration = 5.0
    http2_keep_alive_interval: Duration | None = None
    http2_keep_alive_timeout: Duration | None = None
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    num_partitions: int = 4
    extra_config: str = ""
    """Raw TOML appended after the generated tables: start it with a `[table]` header."""
    startup_timeout: float = 30.0
    binary: Path | None = None
    log_dir: Path | None = None
    node_name: str = "durable-chaos"

    _ingress_url: str | None = field(default=None, init=False, repr=False)
    _admin_url: str | None = field(default=None, init=False, repr=False)
    _external: bool = field(default=False, init=False, repr=False)
    _group: ProcessGroup | None = field(default=None, init=False, repr=False)
    _base_dir: Path | None = field(default=None, init=False, repr=False)
    _admin: AdminClient | None = field(default=None, init=False, repr=False)
    ports: RestatePorts = field(default_factory=RestatePorts, init=False)
    startup_seconds: float | None = field(default=None, init=False)

    @classmethod
    def external(cls, ingress_url: str, admin_url: str) -> RestateServer:
        """A server the user runs: start and stop do nothing."""
        server = cls()
        server._external = True
        server._ingress_url = ingress_url.rstrip("/")
        server._admin_url = admin_url.rstrip("/")
        return server

    # -- addresses and client -------------------------------------------------------------

    @property
    def ingress_url(self) -> str:
        if self._ingress_url is None:
            raise RuntimeError("RestateServer is not started")
        return self._ingress_url

    @property
    def admin_url(self) -> str:
        if self._admin_url is None:
            raise RuntimeError("RestateServer is not started")
        return self._admin_url

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.admin_url, self.ingress_url)
        return self._admin

    @property
    def process(self) -> ProcessGroup | None:
        return self._group

    @property
    def base_dir(self) -> Path | None:
        return self._base_dir

    # -- lifecycle ------------------------------------------------------------------------

    def config_toml(self) -> str:
        base_dir = self._base_dir or Path("restate-data")
        retry = self.retry_policy
        lines = [
            f"node-name = {_toml_str(self.node_name)}",
            f"base-dir = {_toml_str(str(base_dir / 'data'))}",
            "disable-telemetry = true",
            'listen-mode = "tcp"',
            f'bind-address = "127.0.0.1:{self.ports.node}"',
            f'advertised-address = "http://127.0.0.1:{self.ports.node}/"',
            f"default-num-partitions = {int(self.num_partitions)}",
            "",
            "[admin]",
            f'bind-address = "127.0.0.1:{self.ports.admin}"',
            "",
            "[ingress]",
            f'bind-address = "127.0.0.1:{self.ports.ingress}"',
            "",
            "[worker.invoker]",
            f"inactivity-timeout = {_toml_str(_duration(self.inactivity_timeout))}",
            f"abort-timeout = {_toml_str(_duration(self.abort_timeout))}",
            *_optional("http2-keep-alive-interval", self.http2_keep_alive_interval),
            *_optional("http2-keep-alive-timeout", self.http2_keep_alive_timeout),
            "",
            "[default-retry-policy]",
            f"initial-interval = {_toml_str(_duration(retry.initial_interval))}",
            f"max-interval = {_toml_str(_duration(retry.max_interval))}",
            f"max-attempts = {int(retry.max_attempts)}",
            f"on-max-attempts = {_toml_str(retry.on_max_attempts)}",
            "",
            self.extra_config,
        ]
        return "\n".join(lines) + "\n"

    def start(self) -> RestateServer:
        if self._external or self._group is not None:
            return self
        binary = self.binary or find_restate_server()
        self._base_dir = scratch_dir("restate-")
        log_dir = self.log_dir or self._base_dir
        started = time.monotonic()
        for attempt in range(_BIND_RETRIES):
            self.ports = RestatePorts.free()
            config = self._base_dir / "restate.toml"
            config.write_text(self.config_toml())
            group = ProcessGroup(
                [str(binary), "--config-file", str(config), "--no-logo"],
                name="restate-server",
                log_dir=log_dir,
                env={"DO_NOT_TRACK": "1", "NO_COLOR": "1"},
                cwd=self._base_dir,
            )
            self._group = group
            self._admin_url = f"http://127.0.0.1:{self.ports.admin}"
            self._ingress_url = f"http://127.0.0.1:{self.ports.ingress}"
            try:
                self._wait_ready(group)
            except _BindConflict:
                # Another process took one of our "free" ports between probe and bind. The
                # next attempt gets a fresh data dir: the node records its address there.
                group.kill()
                self._group = None
                shutil.rmtree(self._base_dir / "data", ignore_errors=True)
                if attempt + 1 == _BIND_RETRIES:
                    raise
                continue
            except BaseException:
                self.stop()
                raise
            self.startup_seconds = time.monotonic() - started
            return self
        raise AssertionError("unreachable")

    def _wait_ready(self, group: ProcessGroup) -> None:
        probe_client = httpx.Client(timeout=2.0)

        def probe() -> bool | None:
            if not group.alive:
                log = group.log_tail()
                if "Address in use" in log or "address already in use" in log.lower():
                    raise _BindConflict(log)
                raise _Died(f"restate-server exited with {group.returncode}:\n{log}")
            response = probe_client.post(
                f"{self.admin_url}/query",
                json={"query": "SELECT count(*) AS n FROM sys_invocation"},
                headers=_JSON_HEADERS,
            )
            if response.status_code != 200:
                return None
            ingress = probe_client.get(f"{self.ingress_url}/restate/health")
            return True if ingress.status_code == 200 else None

        try:
            _wait_fatal(probe, timeout=self.startup_timeout, what="restate-server")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n{group.log_tail()}") from None
        finally:
            probe_client.close()

    def stop(self, timeout: float = 5.0) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        if self._external:
            return
        if self._group is not None:
            self._group.stop(timeout)
            self._group = None
        if self._base_dir is not None:
            # Logs go with it unless `log_dir` put them elsewhere.
            shutil.rmtree(self._base_dir, ignore_errors=True)
        self._base_dir = None

    def __enter__(self) -> RestateServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class _BindConflict(Exception):
    pass


class _Died(RuntimeError):
    pass


def _wait_fatal(probe: Callable[[], bool | None], *, timeout: float, what: str) -> None:
    """wait_until, except that _BindConflict and _Died end the wait at once."""
    fatal: list[BaseException] = []

    def guarded() -> bool | None:
        try:
            result: bool | None = probe()
            return result
        except (_BindConflict, _Died) as exc:
            fatal.append(exc)
            return True

    wait_until(guarded, timeout=timeout, what=what)
    if fatal:
        raise fatal[0]


def _optional(name: str, value: Duration | None) -> list[str]:
    return [] if value is None else [f"{name} = {_toml_str(_duration(value))}"]


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string
