"""The same user services on a real restate-server: the SDK's own ASGI app on hypercorn.

`served(app_spec, env=...)` starts a restate-server (`harness.components.restate`), one
hypercorn worker process serving the user's `restate.app(...)` (`module:attribute`, the
object they deploy), registers it, and yields the server; everything is stopped by process
group on exit. It is the first piece of the real half of the kit: a chaos adapter on it
(clock, turns, faults and releases, as `harness.observers` does for other engines) is not
built yet (docs/restate-sdk.md, "Real Restate").
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from harness.components.net import free_port, wait_until
from harness.components.procs import ProcessGroup
from harness.components.restate import RestateServer

__all__ = ["served"]


def _listening(port: int) -> bool | None:
    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True


@contextmanager
def served(app_spec: str, *, env: Mapping[str, str] | None = None,
           cwd: str | Path | None = None) -> Iterator[RestateServer]:
    """A restate-server with `app_spec` served and registered (see the module doc)."""
    port = free_port()
    # `--workers 0`: hypercorn serves in this process group's only process, so a stop of
    # the group stops the server (a forked worker would outlive its master).
    worker = ProcessGroup([sys.executable, "-m", "hypercorn", app_spec, "--workers", "0",
                           "--bind", f"127.0.0.1:{port}"], name="sdk-worker",
                          env=dict(env or {}), cwd=cwd)
    try:
        with RestateServer() as restate:
            wait_until(lambda: _listening(port), timeout=30, what=f"worker of {app_spec}")
            restate.admin.register_deployment(f"http://127.0.0.1:{port}")
            yield restate
    finally:
        worker.stop()
