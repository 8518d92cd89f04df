"""One Temporal worker host: `python -m reference_impl.temporal.worker`.

Configured by the environment every worker host reads (`reference_impl.worker_common`:
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

from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkerDeploymentConfig

from contract.binding import App
from reference_impl.temporal.binding import (
    ACTIVITIES,
    HOST_ENV,
    TASK_QUEUE,
    WORKFLOWS,
    Bridged,
    WorkerRuntime,
    install,
)
from reference_impl.worker_common import build_from_env, timers_from_env

__all__ = ["DEPLOYMENT_ENV", "TARGET_ENV", "main"]

TARGET_ENV = "DURABLE_CHAOS_TEMPORAL"
DEPLOYMENT_ENV = "DURABLE_CHAOS_TEMPORAL_DEPLOYMENT"
READY = "durable-chaos temporal worker ready"


def build_app_from_env(loop: asyncio.AbstractEventLoop) -> App:
    """The app of `reference_impl.worker_common.build_from_env`, with its ports `Bridged`
    to `loop`."""
    return build_from_env(lambda port: Bridged(port, loop))


async def main() -> None:
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
