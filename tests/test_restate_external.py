"""The harness against a Restate server it did not start (a user's own).

The test starts a restate-server itself and points the harness at it through the environment
(`DURABLE_CHAOS_RESTATE_INGRESS_URL` / `..._ADMIN_URL`, what `--restate-ingress-url` /
`--restate-admin-url` set). The harness starts only PostgreSQL, Toxiproxy, the world and its
workers, registers its deployments on that server, and removes what it left there: its
deployments, the state of its virtual objects, its unfinished invocations. The same scenario
runs twice on the same server, with the same session keys: the second run sees nothing of
the first.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from restate_fixtures import (
    Capturing,
    failing,
    groups_gone,
    of,
    require_real_stack,
    run,
    scenario,
)

from harness.adapters.restate import ADMIN_ENV, INGRESS_ENV
from harness.components.net import wait_until
from harness.components.restate import RestateServer

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def users_restate() -> Iterator[RestateServer]:
    require_real_stack()
    server = RestateServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_runs_on_a_restate_server_it_did_not_start(
    users_restate: RestateServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(INGRESS_ENV, users_restate.ingress_url)
    monkeypatch.setenv(ADMIN_ENV, users_restate.admin_url)
    admin = users_restate.admin
    server = users_restate.process
    assert server is not None
    adapter = Capturing()
    for _ in range(2):
        outcome = run(adapter, scenario("01-answered-in-2-minutes.toml", horizon="1h"))
        assert outcome.error is None, outcome.error
        assert failing(outcome) == {}, failing(outcome)
    for runtime in adapter.opened:
        history = runtime.history
        assert runtime.restate.process is None
        assert [r.data["external"] for r in of(history, "restate.started")] == [True]
        cleaned = of(history, "restate.cleaned")
        assert [r.data["when"] for r in cleaned] == ["before the run", "after the run"]
        # The run left virtual-object state on the server (its Controller, its tool call),
        # and took it away.
        assert cleaned[1].data["objects_cleared"] >= 1, cleaned[1]
        assert server.pgid not in runtime.process_groups()
        groups_gone(runtime.process_groups())
    # What the runs registered is gone from the server; the server itself still runs.
    ours = {r.deployment for rt in adapter.opened
            for r in rt.history.of_kind("deployment.registered")}
    assert len(ours) == 2

    def deployments_gone() -> bool | None:
        left = {str(d["id"]) for d in admin.deployments()}
        return True if not ours & left else None

    wait_until(deployments_gone, timeout=15, what="the runs' deployments to be removed")
    assert admin.query("SELECT count(*) AS n FROM state")[0].get("n", 0) == 0
    busy = admin.query("SELECT count(*) AS n FROM sys_invocation WHERE status <> 'completed'")
    assert busy[0].get("n", 0) == 0
    assert server.alive and users_restate.admin.health()
