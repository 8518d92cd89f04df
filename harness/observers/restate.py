"""Restate's own state as the checkers' records: `sys_invocation` and `sys_deployment`.

Each poll is two SQL introspection queries on the admin API (`POST /query`):

- `sys_invocation`: an invocation is pinned to `pinned_deployment_id` (set once it first ran)
  until it completes, whatever its status. Status: pending, ready -> `pending`;
  running, backing-off -> `running`; suspended -> `suspended`; paused -> `paused`;
  completed -> `completed`. A `scheduled` one (a send with a delay, not yet due) is left
  out until it is due: it is a timer, not work, as on the simulator, which creates a
  delayed send's invocation when it is delivered (a hand-off design's 8-day expiry would
  otherwise read as a session busy for 8 days). An invocation that vanishes from
  `sys_invocation` (its retention ran out) is recorded as completed;
- `sys_deployment`: every registered deployment; the newest (`created_at`) is current, since
  Restate routes new invocations to the latest deployment of a service.

Over the bidirectional protocol a waiting invocation reads `running` until the server's
inactivity timeout suspends it; the pinning checker judges the deployment anyway (pinned
is pinned, suspended or not), and with the world and `turn_of` given, an invocation whose
turn has an open card is recorded suspended at once (it waits on a person). A message to a
virtual object that is busy waits in its inbox as `pending`: its turn starts when its
handler does, not when the message arrives (see `harness.observers.base`).

Only the standard library is used (urllib), so the observer needs no extra.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from typing import Any

from harness.history import History
from harness.observers.base import (
    DeploymentState,
    EngineObserver,
    InvocationState,
    Snapshot,
    Status,
    TurnEnd,
    TurnOf,
)
from harness.world import World

__all__ = ["RestateObserver"]

_STATUS: dict[str, Status] = {
    "pending": "pending", "scheduled": "pending", "ready": "pending",
    "running": "running", "backing-off": "running", "suspended": "suspended",
    "paused": "paused", "completed": "completed",
}
_INVOCATIONS = ("SELECT id, target, target_service_key, status, pinned_deployment_id "
                "FROM sys_invocation")
_DEPLOYMENTS = "SELECT id, endpoint, created_at FROM sys_deployment"


class RestateObserver(EngineObserver):
    """Observe the Restate server whose admin API is at `admin_url` (`http://host:9070`).

    `version_of(deployment_id, endpoint)` names a deployment's version in the records
    (default: its endpoint); `services` limits the invocations to those targets' services.
    """

    def __init__(self, history: History, *, admin_url: str, interval: float = 0.1,
                 turn_of: TurnOf | None = None, world: World | None = None,
                 on_turn_end: TurnEnd | None = None,
                 version_of: Callable[[str, str], str] | None = None,
                 services: frozenset[str] | None = None) -> None:
        super().__init__(history, interval=interval, turn_of=turn_of, world=world,
                         on_turn_end=on_turn_end)
        self.admin_url = admin_url.rstrip("/")
        self.version_of = version_of or (lambda dep, endpoint: endpoint)
        self.services = services
        self._open: set[str] = set()

    def query(self, sql: str) -> list[dict[str, Any]]:
        request = urllib.request.Request(
            f"{self.admin_url}/query", json.dumps({"query": sql}).encode(),
            {"content-type": "application/json", "accept": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            rows: list[dict[str, Any]] = json.loads(response.read())["rows"]
        return rows

    def snapshot(self) -> Snapshot:
        rows = self.query(_INVOCATIONS)
        deployments = sorted(self.query(_DEPLOYMENTS),
                             key=lambda d: (str(d.get("created_at")), str(d["id"])))
        invocations = []
        seen: set[str] = set()
        for row in rows:
            target = str(row.get("target", ""))
            if self.services is not None and target.split("/")[0] not in self.services:
                continue
            if row.get("status") == "scheduled":
                continue  # a delayed send not yet due (see the module doc)
            inv = str(row["id"])
            seen.add(inv)
            status = _STATUS.get(str(row.get("status")), "running")
            invocations.append(InvocationState(
                inv, status, row.get("pinned_deployment_id"), target=target,
                key=row.get("target_service_key")))
        invocations += [InvocationState(inv, "completed", None, detail="purged")
                        for inv in sorted(self._open - seen)]
        self._open = {i.id for i in invocations if i.status != "completed"}
        latest = deployments[-1]["id"] if deployments else None
        return Snapshot(tuple(invocations), tuple(
            DeploymentState(str(d["id"]), self.version_of(str(d["id"]), str(d.get("endpoint"))),
                            current=d["id"] == latest) for d in deployments))
