"""One Temporal worker host: `python -m reference_impl.temporal.worker`.

Configured by the same environment variables as the Restate worker (`reference_impl.worker`:
version, variant, world URL, observer URL, PostgreSQL conninfo, config, host name, timers
URL), plus:

- `DURABLE_CHAOS_TEMPORAL`: the Temporal frontend, `host:port`;
- `DURABLE_CHAOS_TEMPORAL_DEPLOYMENT`: the worker deployment name (default "durable-chaos");
  its build id is `DURABLE_CHAOS_VERSION`.

The worker polls the task queue as version `DEPLOYMENT:VERSION` with worker versioning on;
each workflow class declares its own behavior (PINNED turns, AUTO_UPGRADE objects, see
`binding`). It prints one line "durable-chaos temporal worker ready" once it polls.
"""

from __future__ import annotations

import asyncio
import os
import threading
from datetime import timedelta
from typing import Any, cast

from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkerDeploymentConfig

from reference_impl.app import build_app
from reference_impl.binding import App
from reference_impl.naive import build_naive_app
from reference_impl.ports import Ports
from reference_impl.temporal.binding import (
    ACTIVITIES,
    HOST_ENV,
    TASK_QUEUE,
    WORKFLOWS,
    Bridged,
    WorkerRuntime,
    install,
)
from reference_impl.threadlog_pg import PostgresThreadLogStore

__all__ = ["DEPLOYMENT_ENV", "TARGET_ENV", "main"]

TARGET_ENV = "DURABLE_CHAOS_TEMPORAL"
DEPLOYMENT_ENV = "DURABLE_CHAOS_TEMPORAL_DEPLOYMENT"
READY = "durable-chaos temporal worker ready"


def build_app_from_env(loop: asyncio.AbstractEventLoop) -> App:
    """The app of `reference_impl.worker.build_from_env`, with its ports `Bridged`."""
    # The Restate worker module has the HTTP ports, the store wrapper and the fault-point
    # hook; one definition serves both engines.
    from reference_impl import faultpoints
    from reference_impl.worker import HarnessStore, WorldClient, _config

    version = os.environ.get("DURABLE_CHAOS_VERSION", "v1")
    variant = os.environ.get("DURABLE_CHAOS_VARIANT", "reference")
    world_url = os.environ.get("DURABLE_CHAOS_WORLD_URL", "http://127.0.0.1:8765")
    observer_url = os.environ.get("DURABLE_CHAOS_OBSERVER_URL", world_url)
    conninfo = os.environ.get("DURABLE_CHAOS_PG", "host=127.0.0.1 user=postgres dbname=postgres")
    host = os.environ.get(HOST_ENV, f"{version}-pid{os.getpid()}")
    world = WorldClient(world_url, observer_url, host)
    store = HarnessStore(PostgresThreadLogStore(
        conninfo,
        idle_in_transaction_timeout_ms=int(os.environ.get("DURABLE_CHAOS_PG_IDLE_MS", "2000")),
        lock_timeout_ms=int(os.environ.get("DURABLE_CHAOS_PG_LOCK_MS", "1000")),
    ), world)

    def hook(point: str) -> None:
        world.fault_point(point)

    faultpoints.install(hook)
    w = cast(Any, Bridged(world, loop))
    ports = Ports(w, w, w, w, w, w, cast(Any, Bridged(store, loop)), world, _config())
    if variant == "naive":
        return build_naive_app(ports, version)
    if variant != "reference":
        raise ValueError(f"DURABLE_CHAOS_VARIANT must be 'reference' or 'naive', got {variant!r}")
    return build_app(ports, version)


async def main() -> None:
    from reference_impl.worker import timers_from_env

    version = os.environ.get("DURABLE_CHAOS_VERSION", "v1")
    deployment = os.environ.get(DEPLOYMENT_ENV, "durable-chaos")
    client = await Client.connect(os.environ.get(TARGET_ENV, "127.0.0.1:7233"))
    # Bridged port calls run on a loop of their own: the worker's loop waits on the
    # workflow thread that waits on them.
    bridge = asyncio.new_event_loop()
    threading.Thread(target=bridge.run_forever, name="bridge", daemon=True).start()
    install(WorkerRuntime(build_app_from_env(bridge), timers_from_env(),
                          client, os.environ.get(HOST_ENV, f"{version}-pid{os.getpid()}")))
    worker = Worker(
        client, task_queue=TASK_QUEUE, workflows=WORKFLOWS, activities=ACTIVITIES,
        workflow_runner=UnsandboxedWorkflowRunner(),
        deployment_config=WorkerDeploymentConfig(
            version=WorkerDeploymentVersion(deployment, version), use_worker_versioning=True,
            default_versioning_behavior=VersioningBehavior.PINNED),
        # A crashed or frozen worker's sticky tasks go back to the queue after 1 s, not 10.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        max_concurrent_local_activities=50)
    async with worker:
        print(READY, flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
