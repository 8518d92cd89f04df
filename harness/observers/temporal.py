"""Temporal's own state as the checkers' records: workflows, their pinned version, drainage.

Each poll lists the namespace's workflows (visibility, plus the ids the adapter `watch`es,
since visibility may lag a moment behind a start) and describes each open one:

- the deployment a workflow is pinned to is `versioning_info.deployment_version` (a PINNED
  workflow keeps it until it completes; an AUTO_UPGRADE one moves, which is recorded as
  `invocation.repinned`); its id is `DEPLOYMENT:BUILD_ID`;
- a RUNNING workflow with neither a pending workflow task nor a pending activity waits on a
  timer or a signal: `suspended`. With work pending it is `running`. Any closed status is
  `completed` (its detail: completed, failed, canceled, terminated, timed_out, ...);
- deployments are `DescribeWorkerDeployment`'s version summaries; the one in the routing
  config's `current_deployment_version` is current.

An AUTO_UPGRADE workflow is not an invocation pinned to anything: Temporal sends each of its
workflow tasks to the current version. It is left out of the invocations (a long-lived one,
idle between signals, would otherwise read as suspended for days); whether it has work
pending is kept in `unpinned_busy()`, for an adapter that needs to know when all is quiet.
A workflow once described as AUTO_UPGRADE stays so: a workflow task that the SDK's core
completes on its own (the heartbeat of a long local activity) carries no behavior, and the
server then shows the worker's default (PINNED) until the next task the workflow completes.

Drainage is judged from the workflows themselves (no open workflow pinned to the version),
not from the server's `drainage_info`, which it refreshes every few minutes by default.

Needs `temporalio` (`durable-chaos[temporal]`). The client lives on the observer's thread,
on an event loop of its own.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
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

__all__ = ["TemporalObserver"]


class TemporalObserver(EngineObserver):
    """Observe the workflows of `namespace` on the Temporal server at `target_host`
    (`host:port`) and the versions of worker deployment `deployment_name`."""

    def __init__(self, history: History, *, target_host: str, deployment_name: str,
                 namespace: str = "default", interval: float = 0.1,
                 turn_of: TurnOf | None = None, world: World | None = None,
                 on_turn_end: TurnEnd | None = None,
                 workflow_ids: Iterable[str] = ()) -> None:
        super().__init__(history, interval=interval, turn_of=turn_of, world=world,
                         on_turn_end=on_turn_end)
        self.target_host = target_host
        self.deployment_name = deployment_name
        self.namespace = namespace
        self._watched: list[str] = list(workflow_ids)
        self._watch_lock = threading.Lock()
        self._closed: dict[str, InvocationState] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._unpinned: dict[str, bool] = {}  # AUTO_UPGRADE workflow -> has work pending
        self._auto: set[str] = set()  # workflows once described as AUTO_UPGRADE

    def watch(self, workflow_id: str) -> None:
        """Describe this workflow from the next poll on, even before visibility lists it."""
        with self._watch_lock:
            if workflow_id not in self._watched:
                self._watched.append(workflow_id)

    def unpinned_busy(self) -> list[str]:
        """AUTO_UPGRADE workflows that were running with work pending at the last poll."""
        with self._watch_lock:
            return sorted(w for w, busy in self._unpinned.items() if busy)

    def snapshot(self) -> Snapshot:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(self._snapshot())

    def close_engine(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None
        self._client = None

    async def _snapshot(self) -> Snapshot:
        from temporalio.api.enums.v1 import VersioningBehavior
        from temporalio.client import Client, WorkflowExecutionStatus

        if self._client is None:
            self._client = await Client.connect(self.target_host, namespace=self.namespace)
        client = self._client
        with self._watch_lock:
            ids = list(self._watched)
        async for wf in client.list_workflows(""):
            if wf.id not in ids:
                ids.append(wf.id)
        invocations: list[InvocationState] = []
        for wf_id in ids:
            done = self._closed.get(wf_id)
            if done is not None:
                invocations.append(done)
                continue
            try:
                desc = await client.get_workflow_handle(wf_id).describe()
            except Exception:  # started a moment from now, or not yet visible: next poll
                continue
            raw = desc.raw_description
            info = raw.workflow_execution_info
            deployment = None
            if wf_id in self._auto or (
                    info.HasField("versioning_info") and info.versioning_info.behavior
                    == VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE):
                self._auto.add(wf_id)
                with self._watch_lock:
                    self._unpinned[wf_id] = desc.status == WorkflowExecutionStatus.RUNNING and (
                        raw.HasField("pending_workflow_task") or len(raw.pending_activities) > 0)
                continue
            if desc.status == WorkflowExecutionStatus.RUNNING and (
                    (info.history_length <= 3 and not info.HasField("versioning_info"))
                    or (info.versioning_info.HasField("version_transition")
                    and not info.versioning_info.behavior)):
                # Its first workflow task has not run: which behavior it has is not known yet.
                with self._watch_lock:
                    self._unpinned[wf_id] = True
                continue
            with self._watch_lock:
                self._unpinned.pop(wf_id, None)
            if info.HasField("versioning_info"):
                version = info.versioning_info.deployment_version
                if version.build_id:
                    deployment = f"{version.deployment_name}:{version.build_id}"
            status: Status
            detail = None
            if desc.status == WorkflowExecutionStatus.RUNNING:
                busy = raw.HasField("pending_workflow_task") or len(raw.pending_activities) > 0
                status = "running" if busy else "suspended"
            else:
                status = "completed"
                detail = desc.status.name.lower() if desc.status is not None else None
                if detail == "completed":
                    detail = "succeeded"
            state = InvocationState(wf_id, status, deployment, target=desc.workflow_type,
                                    detail=detail)
            if status == "completed":
                self._closed[wf_id] = state
            invocations.append(state)
        return Snapshot(tuple(invocations), tuple(await self._read_deployments(client)))

    async def _read_deployments(self, client: Any) -> list[DeploymentState]:
        from temporalio.api.workflowservice.v1 import DescribeWorkerDeploymentRequest

        try:
            resp = await client.workflow_service.describe_worker_deployment(
                DescribeWorkerDeploymentRequest(namespace=self.namespace,
                                                deployment_name=self.deployment_name))
        except Exception as exc:
            if "not found" in str(exc).lower():  # no worker of it has polled yet
                return []
            raise
        info = resp.worker_deployment_info
        current = info.routing_config.current_deployment_version.build_id
        out = []
        for summary in info.version_summaries:
            build = summary.deployment_version.build_id
            out.append(DeploymentState(f"{self.deployment_name}:{build}", build,
                                       current=bool(current) and build == current))
        return out
