"""A real restate-server with a restate-sdk worker: register, invoke, introspect, stop."""

from __future__ import annotations

import os
import socket
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from harness.components.net import wait_until
from harness.components.procs import live_groups
from harness.components.restate import (
    BIN_ENV,
    RestateServer,
    RestateUnavailable,
    RetryPolicy,
    find_restate_server,
)
from harness.components.workers import WorkerProcess

pytestmark = pytest.mark.real

# Written to a temp dir and served by hypercorn. The awakeable id leaves the handler through
# a file (inside ctx.run, so a replay does not rewrite it) for the test to resolve.
SERVICE = textwrap.dedent(
    """
    import os
    import restate

    greeter = restate.Service("Greeter")

    @greeter.handler()
    async def greet(ctx: restate.Context, name: str) -> str:
        return f"hello {name}"

    counter = restate.VirtualObject("Counter")

    @counter.handler()
    async def add(ctx: restate.ObjectContext, n: int) -> int:
        total = (await ctx.get("total", type_hint=int) or 0) + n
        ctx.set("total", total)
        return total

    waiter = restate.Service("Waiter")

    def note(awakeable_id: str) -> None:
        with open(os.environ["AWAKEABLE_FILE"], "w") as f:
            f.write(awakeable_id)

    @waiter.handler()
    async def wait(ctx: restate.Context, tag: str) -> str:
        awakeable_id, promise = ctx.awakeable(type_hint=str)
        await ctx.run_typed("note", note, awakeable_id=awakeable_id)
        return f"{tag}:{await promise}"

    app = restate.app(services=[greeter, counter, waiter])
    """
)


def _missing(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: real components must be installed)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def restate_bin() -> Path:
    try:
        return find_restate_server()
    except RestateUnavailable as exc:
        _missing(str(exc))


@pytest.fixture
def service_dir(tmp_path: Path) -> Path:
    (tmp_path / "chaos_test_service.py").write_text(SERVICE)
    return tmp_path


@pytest.fixture
def server(restate_bin: Path, tmp_path: Path) -> Iterator[RestateServer]:
    with RestateServer(binary=restate_bin, log_dir=tmp_path / "logs") as srv:
        yield srv


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_register_invoke_introspect_and_stop(restate_bin: Path, service_dir: Path) -> None:
    awakeable_file = service_dir / "awakeable"
    server = RestateServer(binary=restate_bin, log_dir=service_dir / "logs").start()
    worker = WorkerProcess(
        "chaos_test_service:app",
        pythonpath=[service_dir],
        env={"AWAKEABLE_FILE": str(awakeable_file)},
        log_dir=service_dir / "logs",
    ).start()
    groups = [server.process, worker.process]
    try:
        admin = server.admin
        deployment = admin.register_deployment(worker.url)
        assert admin.register_deployment(worker.url) == deployment  # idempotent
        assert admin.invoke("Greeter", "greet", arg="bob") == "hello bob"
        assert admin.invoke("Counter", "add", "k", 3) == 3
        assert admin.invoke("Counter", "add", "k", 4) == 7

        invocation = admin.send("Waiter", "wait", arg="t")
        awakeable = wait_until(
            lambda: awakeable_file.read_text() if awakeable_file.exists() else None,
            timeout=10,
            what="awakeable id",
        )
        [row] = admin.deployments()
        assert row["id"] == deployment
        assert row["endpoint"].rstrip("/") == worker.url
        [pinned] = admin.pinned_counts()
        assert (pinned.deployment_id, pinned.invocations) == (deployment, 1)
        [waiting] = admin.invocations("status <> 'completed'")
        assert waiting["id"] == invocation and waiting["pinned_deployment_id"] == deployment

        admin.resolve_awakeable(awakeable, "yes")
        assert admin.attach(invocation) == "t:yes"
        [pinned] = admin.pinned_counts()
        assert pinned.invocations == 0
        assert admin.query("SELECT 1 AS one") == [{"one": 1}]

        worker.stop()
        admin.delete_deployment(deployment)
        assert admin.deployments() == []
    finally:
        worker.stop()
        server.stop()
    for group in groups:
        assert group is not None and not group.alive and group.members() == []
        assert group not in live_groups()
    assert not _port_open(server.ports.admin) and not _port_open(worker.port)


def test_worker_crash_and_restart_on_same_port(server: RestateServer, service_dir: Path) -> None:
    with WorkerProcess(
        "chaos_test_service:app", pythonpath=[service_dir], log_dir=service_dir / "logs"
    ) as worker:
        server.admin.register_deployment(worker.url)
        assert server.admin.invoke("Counter", "add", "c", 1) == 1
        port, pid = worker.port, worker.pid
        worker.restart(kill=True)
        assert worker.port == port and worker.pid != pid
        # Same endpoint, same deployment: state lives in Restate, not in the worker.
        assert server.admin.invoke("Counter", "add", "c", 1) == 2
        worker.pause()
        worker.resume()
        assert server.admin.invoke("Greeter", "greet", arg="again") == "hello again"


def test_external_server_is_not_started_or_stopped(server: RestateServer) -> None:
    external = RestateServer.external(server.ingress_url + "/", server.admin_url)
    with external:
        assert external.process is None
        assert external.ingress_url == server.ingress_url
        assert external.admin.query("SELECT count(*) AS n FROM sys_deployment") == [{"n": 0}]
    assert server.process is not None and server.process.alive


def test_config_has_test_knobs(tmp_path: Path) -> None:
    server = RestateServer(
        inactivity_timeout=0.25,
        abort_timeout="3s",
        retry_policy=RetryPolicy(initial_interval="10ms", max_attempts=3, on_max_attempts="kill"),
        extra_config='[worker]\ncleanup-interval = "1m"\n',
    )
    toml = server.config_toml()
    for line in (
        'inactivity-timeout = "250ms"',
        'abort-timeout = "3s"',
        'initial-interval = "10ms"',
        "max-attempts = 3",
        'on-max-attempts = "kill"',
        "disable-telemetry = true",
        'listen-mode = "tcp"',
        '[worker]\ncleanup-interval = "1m"',
    ):
        assert line in toml


def test_missing_binary_names_the_make_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BIN_ENV, "/nonexistent/restate-server")
    with pytest.raises(RestateUnavailable, match=BIN_ENV):
        find_restate_server()
    monkeypatch.delenv(BIN_ENV)
    monkeypatch.setattr("harness.components.binaries._REPO_ROOT", Path("/nonexistent"))
    monkeypatch.setenv("XDG_CACHE_HOME", "/nonexistent")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(RestateUnavailable, match="make restate"):
        find_restate_server()
