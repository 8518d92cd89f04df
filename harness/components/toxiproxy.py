"""A Toxiproxy server (the Go binary `make toxiproxy` builds) and a typed client for its API.

The client speaks HTTP with httpx rather than through toxiproxy-python: that library keeps its
host and port in class-level state, returns None from `add_toxic` and lets 5xx answers pass
silently. Here every error status raises `ToxiproxyError`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import httpx

from harness.components.binaries import TOXIPROXY_SERVER
from harness.components.net import free_port, wait_until
from harness.components.procs import ProcessGroup
from harness.errors import ComponentError, ComponentUnavailable

__all__ = [
    "Proxy",
    "ToxiproxyClient",
    "ToxiproxyError",
    "ToxiproxyServer",
    "ToxiproxyUnavailable",
    "find_toxiproxy_server",
]

BIN_ENV = TOXIPROXY_SERVER.env_var
_BIND_RETRIES = 3

Stream = Literal["upstream", "downstream"]


class ToxiproxyUnavailable(ComponentUnavailable):
    """The Toxiproxy server binary is missing; the message says how to build it."""


class ToxiproxyError(ComponentError):
    """The Toxiproxy API answered with an error status."""

    def __init__(self, method: str, url: str, status: int, body: str) -> None:
        self.method, self.url, self.status, self.body = method, url, status, body
        super().__init__(f"{method} {url} -> {status}: {body[:500]}")


def find_toxiproxy_server() -> Path:
    """$DURABLE_CHAOS_TOXIPROXY_BIN, the repository's .tools/bin, the components cache, PATH."""
    return TOXIPROXY_SERVER.find(error=ToxiproxyUnavailable)


@dataclass(frozen=True)
class Proxy:
    name: str
    listen: str
    upstream: str
    enabled: bool

    @property
    def listen_port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Proxy:
        return cls(
            str(data["name"]), str(data["listen"]), str(data["upstream"]), bool(data["enabled"])
        )


class ToxiproxyClient:
    """Sync client for one Toxiproxy server's HTTP API."""

    def __init__(self, api_url: str, *, timeout: float = 10.0) -> None:
        self.api_url = api_url.rstrip("/")
        self._http = httpx.Client(base_url=self.api_url, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ToxiproxyClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        response = self._http.request(method, path, json=body)
        if response.status_code >= 400:
            raise ToxiproxyError(method, self.api_url + path, response.status_code, response.text)
        if not response.content:
            return None
        if "json" in response.headers.get("content-type", ""):
            return response.json()
        return response.text

    def version(self) -> str:
        data = self._request("GET", "/version")
        # 2.x answers JSON ({"version": ...}) or plain text, depending on the release.
        return str(data["version"]) if isinstance(data, dict) else str(data).strip()

    # -- proxies --------------------------------------------------------------------------

    def create_proxy(
        self, name: str, listen_port: int, upstream: str, *, listen_host: str = "127.0.0.1"
    ) -> Proxy:
        """A proxy listening on listen_host:listen_port, forwarding to upstream ("host:port")."""
        data = self._request(
            "POST",
            "/proxies",
            {
                "name": name,
                "listen": f"{listen_host}:{listen_port}",
                "upstream": upstream,
                "enabled": True,
            },
        )
        return Proxy.from_json(data)

    def proxies(self) -> dict[str, Proxy]:
        data: dict[str, dict[str, Any]] = self._request("GET", "/proxies")
        return {name: Proxy.from_json(p) for name, p in data.items()}

    def get_proxy(self, name: str) -> Proxy:
        return Proxy.from_json(self._request("GET", f"/proxies/{name}"))

    def delete_proxy(self, name: str) -> None:
        self._request("DELETE", f"/proxies/{name}")

    def down(self, name: str) -> None:
        """Disable the proxy: it closes its listener and live connections (refused)."""
        self._request("POST", f"/proxies/{name}", {"enabled": False})

    def up(self, name: str) -> None:
        self._request("POST", f"/proxies/{name}", {"enabled": True})

    # -- toxics ---------------------------------------------------------------------------

    def add_toxic(
        self,
        name: str,
        toxic_type: str,
        attributes: dict[str, int | float],
        *,
        stream: Stream = "downstream",
        toxicity: float = 1.0,
        toxic_name: str | None = None,
    ) -> str:
        """Add a toxic to proxy `name`; returns the toxic's name."""
        data = self._request(
            "POST",
            f"/proxies/{name}/toxics",
            {
                "name": toxic_name or f"{toxic_type}_{stream}",
                "type": toxic_type,
                "stream": stream,
                "toxicity": toxicity,
                "attributes": attributes,
            },
        )
        return str(data["name"])

    def add_latency(
        self, name: str, ms: int, *, jitter_ms: int = 0, stream: Stream = "downstream"
    ) -> str:
        """Delay data by `ms` (± jitter) in one direction."""
        return self.add_toxic(name, "latency", {"latency": ms, "jitter": jitter_ms}, stream=stream)

    def add_timeout(self, name: str, ms: int, *, stream: Stream = "downstream") -> str:
        """Stop all data and close the connection after `ms` (0: hold it open forever)."""
        return self.add_toxic(name, "timeout", {"timeout": ms}, stream=stream)

    def add_reset_peer(self, name: str, ms: int = 0, *, stream: Stream = "downstream") -> str:
        """Reset connections (TCP RST) after `ms`, 0 meaning at once."""
        return self.add_toxic(name, "reset_peer", {"timeout": ms}, stream=stream)

    def toxics(self, name: str) -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = self._request("GET", f"/proxies/{name}/toxics")
        return data

    def remove_toxic(self, name: str, toxic_name: str) -> None:
        self._request("DELETE", f"/proxies/{name}/toxics/{toxic_name}")

    def remove_toxics(self, name: str) -> None:
        for toxic in self.toxics(name):
            self.remove_toxic(name, str(toxic["name"]))

    def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        self._request("POST", "/reset")


class ToxiproxyServer:
    """`toxiproxy-server -host 127.0.0.1 -port P` in its own process group.

    >>> with ToxiproxyServer() as toxi:
    ...     toxi.client.create_proxy("pg", free_port(), f"127.0.0.1:{pg.port}")
    """

    def __init__(
        self,
        *,
        binary: Path | None = None,
        port: int | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        startup_timeout: float = 15.0,
    ) -> None:
        self.binary = binary
        self.port = port or 0
        self._fixed_port = port is not None
        self.log_dir = log_dir
        self.startup_timeout = startup_timeout
        self._group: ProcessGroup | None = None
        self._client: ToxiproxyClient | None = None
        self._external_url: str | None = None
        self.startup_seconds: float | None = None

    @classmethod
    def external(cls, api_url: str) -> ToxiproxyServer:
        """A server the user runs: start and stop do nothing."""
        server = cls()
        server._external_url = api_url.rstrip("/")
        return server

    @property
    def api_url(self) -> str:
        if self._external_url is not None:
            return self._external_url
        if not self.port:
            raise RuntimeError("ToxiproxyServer is not started")
        return f"http://127.0.0.1:{self.port}"

    @property
    def client(self) -> ToxiproxyClient:
        if self._client is None:
            self._client = ToxiproxyClient(self.api_url)
        return self._client

    @property
    def process(self) -> ProcessGroup | None:
        return self._group

    def start(self) -> ToxiproxyServer:
        if self._external_url is not None or self._group is not None:
            return self
        binary = self.binary or find_toxiproxy_server()
        started = time.monotonic()
        for attempt in range(_BIND_RETRIES):
            if not self._fixed_port:
                self.port = free_port()
            group = ProcessGroup(
                [str(binary), "-host", "127.0.0.1", "-port", str(self.port)],
                name="toxiproxy-server",
                log_dir=self.log_dir,
            )
            self._group = group
            died = self._wait_ready(group)
            if died is None:
                self.startup_seconds = time.monotonic() - started
                return self
            self._group = None
            bind_conflict = "address already in use" in died.lower()
            if not bind_conflict or self._fixed_port or attempt + 1 == _BIND_RETRIES:
                raise RuntimeError(f"toxiproxy-server exited with {group.returncode}:\n{died}")
        raise AssertionError("unreachable")

    def _wait_ready(self, group: ProcessGroup) -> str | None:
        """None once `GET /version` answers; the log tail if the server died first."""
        died: list[str] = []

        def probe() -> bool | None:
            if not group.alive:
                died.append(group.log_tail())
                return True
            with httpx.Client(timeout=2.0) as http:
                return True if http.get(f"{self.api_url}/version").status_code == 200 else None

        try:
            wait_until(probe, timeout=self.startup_timeout, what="toxiproxy-server")
        except TimeoutError as exc:
            group.kill()
            self._group = None
            raise TimeoutError(f"{exc}\n{group.log_tail()}") from None
        if died:
            group.kill()
            return died[0]
        return None

    def stop(self, timeout: float = 5.0) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._group is not None:
            self._group.stop(timeout)
            self._group = None

    def __enter__(self) -> ToxiproxyServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
