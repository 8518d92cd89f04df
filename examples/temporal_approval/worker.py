"""One worker of one version: `python -m examples.temporal_approval.worker TARGET BUILD_ID`."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta

from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import Worker, WorkerDeploymentConfig

from examples.temporal_approval.agent import ACTIVITIES, TASK_QUEUE, ApprovalAgent

DEPLOYMENT = "approval-agent"


async def main(target: str, build_id: str) -> None:
    client = await Client.connect(target)
    worker = Worker(client, task_queue=TASK_QUEUE, workflows=[ApprovalAgent],
                    activities=ACTIVITIES, deployment_config=WorkerDeploymentConfig(
                        version=WorkerDeploymentVersion(DEPLOYMENT, build_id),
                        use_worker_versioning=True,
                        default_versioning_behavior=VersioningBehavior.PINNED),
                    # A crashed worker's sticky tasks go back to the queue after 1 s, not 10.
                    sticky_queue_schedule_to_start_timeout=timedelta(seconds=1))
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
