"""liveness: the Controller keeps its FIFO in worker memory, not in durable state.

Messages that found the session busy are queued in the memory of the worker process that
handled them instead of the virtual object's state. When the turn ends, the controller's
`turnDone` (or `turnWaiting`) runs on whichever worker the engine picks: another host of the
deployment, a new deployment after a redeploy, or (on real workers) the same host after a
crash: its memory holds no queue, and the queued messages never start their turns.
"""

from __future__ import annotations

from typing import Any

from contract.binding import App
from contract.ports import Ports
from harness.adapters.sim import SimAdapter
from reference_impl.app import build_app
from tests.planted._plant import CtxProxy, replace_handler, with_ctx

INVARIANT = "liveness"
_KEY = "queue"


def build(ports: Ports, version: str = "v1") -> App:
    # (host, session) -> queue: each worker process of this deployment has its own memory.
    memory: dict[tuple[str, str], Any] = {}

    class _QueueInMemory(CtxProxy):
        def _slot(self) -> tuple[str, str]:
            return self._ctx.host(), self._ctx.key()

        async def get(self, name: str) -> Any:
            if name == _KEY:
                return memory.get(self._slot())
            return await self._ctx.get(name)

        def set(self, name: str, value: Any) -> None:
            if name == _KEY:
                memory[self._slot()] = value
            else:
                self._ctx.set(name, value)

        def clear(self, name: str) -> None:
            if name == _KEY:
                memory.pop(self._slot(), None)
            else:
                self._ctx.clear(name)

    app = build_app(ports, version)
    for handler in ("onMessage", "turnWaiting", "turnDone", "toolFinished", "cancel"):
        app = replace_handler(app, "Controller", handler, with_ctx(_QueueInMemory))
    return app


ADAPTER = SimAdapter("planted-queue-in-memory", "controller FIFO kept in worker memory", build)
