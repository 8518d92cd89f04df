"""A real Toxiproxy server in front of a local TCP echo server."""

from __future__ import annotations

import os
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from harness.components.net import wait_until
from harness.components.toxiproxy import (
    BIN_ENV,
    ToxiproxyError,
    ToxiproxyServer,
    ToxiproxyUnavailable,
    find_toxiproxy_server,
)

pytestmark = pytest.mark.real


def _missing(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: real components must be installed)")
    pytest.skip(reason)


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


class _EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture(scope="module")
def echo_port() -> Iterator[int]:
    server = _EchoServer(("127.0.0.1", 0), _Echo)
    # serve_forever checks for shutdown every poll_interval (0.5 s by default).
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def toxiproxy() -> Iterator[ToxiproxyServer]:
    try:
        binary = find_toxiproxy_server()
    except ToxiproxyUnavailable as exc:
        _missing(str(exc))
    with ToxiproxyServer(binary=binary) as server:
        yield server
    assert server.process is None


@pytest.fixture
def proxy_port(toxiproxy: ToxiproxyServer, echo_port: int) -> Iterator[int]:
    proxy = toxiproxy.client.create_proxy("echo", 0, f"127.0.0.1:{echo_port}")
    try:
        yield proxy.listen_port
    finally:
        toxiproxy.client.delete_proxy("echo")


def _round_trip(port: int, payload: bytes = b"ping", timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(payload)
        received = b""
        while len(received) < len(payload):
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        return received


def _timed_round_trip(port: int) -> float:
    start = time.monotonic()
    assert _round_trip(port) == b"ping"
    return time.monotonic() - start


def test_version_and_proxy_round_trip(toxiproxy: ToxiproxyServer, proxy_port: int) -> None:
    assert toxiproxy.client.version().startswith("v2.")
    assert _round_trip(proxy_port) == b"ping"
    assert toxiproxy.client.proxies()["echo"].enabled


def test_latency_adds_delay(toxiproxy: ToxiproxyServer, proxy_port: int) -> None:
    toxiproxy.client.add_latency("echo", 200)
    assert _timed_round_trip(proxy_port) >= 0.19
    toxiproxy.client.remove_toxics("echo")
    assert toxiproxy.client.toxics("echo") == []
    # No upper bound on the time without the toxic: on a loaded machine even loopback can
    # take that long, and a flaky test blocks every landing.
    assert _round_trip(proxy_port) == b"ping"


def test_down_refuses_and_up_restores(toxiproxy: ToxiproxyServer, proxy_port: int) -> None:
    toxiproxy.client.down("echo")
    with pytest.raises(ConnectionRefusedError):
        _round_trip(proxy_port)
    toxiproxy.client.up("echo")
    assert wait_until(lambda: _round_trip(proxy_port), timeout=5, what="proxy up") == b"ping"


def test_reset_peer_resets_connections(toxiproxy: ToxiproxyServer, proxy_port: int) -> None:
    toxiproxy.client.add_reset_peer("echo")
    with pytest.raises(ConnectionResetError):
        _round_trip(proxy_port)
    toxiproxy.client.reset()  # removes every toxic
    assert _round_trip(proxy_port) == b"ping"


def test_timeout_closes_without_data(toxiproxy: ToxiproxyServer, proxy_port: int) -> None:
    toxiproxy.client.add_timeout("echo", 100)
    assert _round_trip(proxy_port) == b""  # closed after 100 ms, nothing echoed
    toxiproxy.client.remove_toxics("echo")
    assert _round_trip(proxy_port) == b"ping"


def test_api_errors_raise(toxiproxy: ToxiproxyServer, proxy_port: int) -> None:
    with pytest.raises(ToxiproxyError) as info:
        toxiproxy.client.create_proxy("echo", proxy_port, "127.0.0.1:1")
    assert info.value.status == 409
    with pytest.raises(ToxiproxyError):
        toxiproxy.client.down("no-such-proxy")


def test_missing_binary_names_the_make_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BIN_ENV, "/nonexistent/toxiproxy-server")
    with pytest.raises(ToxiproxyUnavailable, match=BIN_ENV):
        find_toxiproxy_server()
    monkeypatch.delenv(BIN_ENV)
    monkeypatch.setattr("harness.components.binaries._REPO_ROOT", Path("/nonexistent"))
    monkeypatch.setenv("XDG_CACHE_HOME", "/nonexistent")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ToxiproxyUnavailable, match="make toxiproxy"):
        find_toxiproxy_server()
