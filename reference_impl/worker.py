"""The ASGI app a Restate worker process serves: `hypercorn reference_impl.worker:app
--workers 0`.

Configured by the environment every worker host reads (`reference_impl.worker_common`:
version, variant, world and observer URLs, PostgreSQL conninfo, config, host name, timers
URL), set by the harness's Restate adapter. With `DURABLE_CHAOS_TIMERS_URL` unset, Restate's
own timers and the wall clock are used.
"""

from __future__ import annotations

from reference_impl.restate_binding import asgi_app
from reference_impl.worker_common import (
    HarnessStore,
    TimerClient,
    WorldClient,
    build_from_env,
    timers_from_env,
)

# HarnessStore and WorldClient lived here before `worker_common`; kept importable from here.
__all__ = ["HarnessStore", "TimerClient", "WorldClient", "app", "build_from_env",
           "timers_from_env"]

app = asgi_app(build_from_env(), timers=timers_from_env())
