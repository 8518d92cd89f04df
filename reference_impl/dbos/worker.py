"""A DBOS worker process: `python -m reference_impl.dbos.worker`.

One process is one host of one application version. It serves the reference app (or the
naive variant) through the DBOS binding, with the same world clients, thread-log store,
fault-point hook and configuration as every worker host (`reference_impl.worker_common`,
whose environment variables it reads), plus:

- `DURABLE_CHAOS_DBOS_URL`: DBOS's system database (`postgresql://...`), where the
  workflows, their steps, the queues and the virtual-object state live;
- `DURABLE_CHAOS_VERSION`: the application version DBOS records on every workflow this
  process runs (a redeploy is a process of a new version);
- `DURABLE_CHAOS_HOST`: the host name, also DBOS's executor id, so a restarted host
  recovers exactly the workflows it was running;
- `DURABLE_CHAOS_READY_FILE`: written once DBOS is launched and the queues are served.

SIGTERM and SIGINT end the process at once (`os._exit`): a DBOS process waiting in `recv`
does not return from `DBOS.destroy()`, and what is in flight is recovered by the next
process of this host, as after a crash.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from types import FrameType

from dbos import DBOS

from reference_impl.dbos.binding import DbosEngine, install
from reference_impl.dbos.names import APP_NAME, OBJECTS_QUEUE, SERVICES_QUEUE
from reference_impl.dbos.state import StateStore
from reference_impl.worker_common import build_from_env, host_from_env, timers_from_env

__all__ = ["main"]

# Real seconds between two looks at a queue: each hop of a call or send waits up to this.
QUEUE_POLL = 0.1


def _exit(signum: int, frame: FrameType | None) -> None:
    os._exit(0)


def main() -> None:
    version = os.environ.get("DURABLE_CHAOS_VERSION", "v1")
    host = host_from_env()
    url = os.environ["DURABLE_CHAOS_DBOS_URL"]
    state = StateStore(url)
    state.ensure_schema()
    install(DbosEngine(build_from_env(), host, state, timers_from_env()))
    DBOS(config={
        "name": APP_NAME, "system_database_url": url, "application_version": version,
        "executor_id": host, "notification_listener_polling_interval_sec": 0.1,
    })
    DBOS.launch()
    DBOS.register_queue(OBJECTS_QUEUE, partition_concurrency=1,
                        polling_interval_sec=QUEUE_POLL)
    DBOS.register_queue(SERVICES_QUEUE, polling_interval_sec=QUEUE_POLL)
    signal.signal(signal.SIGTERM, _exit)
    signal.signal(signal.SIGINT, _exit)
    ready = os.environ.get("DURABLE_CHAOS_READY_FILE")
    if ready:
        Path(ready).write_text(str(os.getpid()))
    threading.Event().wait()


if __name__ == "__main__":
    main()
