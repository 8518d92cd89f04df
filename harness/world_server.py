"""The harness's World over HTTP, for real worker processes.

A small threaded HTTP server on 127.0.0.1 serves the same `World` the simulator uses: the
fake model provider (its faults included, "500 after the completion was produced and billed"
among them), the outbox, the ledger, identity and catalog, the approval cards, the observer
(observations go into the run's history) and the fault points of the reference code.

Every request runs its world coroutine on its own event loop in the request's thread, holding
one lock on the world except while the world sleeps (latency), so deliveries are checked and
recorded atomically and history records are added one at a time.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Callable, Coroutine
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from harness.history import History, RecordType
from harness.world import World
from reference_impl.ports import ProviderError

__all__ = ["WorldServer"]

_NAMED: Final = ("session", "turn", "tool_call", "epoch", "key")

Observe = Callable[[dict[str, Any]], None]
FaultPoint = Callable[[str, str, int], str | None]


class WorldServer:
    """`World` endpoints on http://127.0.0.1:PORT (port 0: any free port)."""

    def __init__(
        self,
        history: History,
        *,
        now: Callable[[], float],
        model_latency: float = 0.05,
        effect_latency: float = 0.02,
        provider_timeout: float = 3.0,
        deployment_of: Callable[[str], str | None] | None = None,
        on_fault_point: FaultPoint | None = None,
        port: int = 0,
    ) -> None:
        self.lock = threading.RLock()
        self.history = history
        self.deployment_of = deployment_of or (lambda host: None)
        self.on_fault_point = on_fault_point
        self.world = World(history, now=now, sleep=self._sleep, model_latency=model_latency,
                           effect_latency=effect_latency)
        self.world.provider.timeout = provider_timeout
        server = _QuietServer(("127.0.0.1", port), _make_handler(self))
        server.daemon_threads = True
        self._server = server
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> WorldServer:
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever,
                                            kwargs={"poll_interval": 0.05},
                                            name="world-server", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    async def _sleep(self, seconds: float) -> None:
        # Called with the lock held by this request's thread: let others in while we sleep.
        self.lock.release()
        try:
            await asyncio.sleep(seconds)
        finally:
            self.lock.acquire()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        with self.lock:
            return asyncio.run(coro)

    # -- endpoints ------------------------------------------------------------------------

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        w = self.world
        if path == "/model/complete":
            try:
                return 200, self.run(w.provider.complete(
                    session=body["session"], turn=body["turn"], step=int(body["step"]),
                    messages=list(body["messages"]), idempotency_key=body["idempotency_key"]))
            except ProviderError as exc:
                return 500, {"error": str(exc)}
        if path == "/email":
            return 200, self.run(w.outbox.send_email(**body))
        if path == "/charge":
            return 200, self.run(w.ledger.charge(**body))
        if path == "/has_access":
            return 200, {"ok": self.run(w.directory.has_access(body["user"], body["tool"]))}
        if path == "/lookup":
            spec = self.run(w.directory.lookup(body["name"]))
            return 200, {"spec": None if spec is None else {
                "name": spec.name, "needs_approval": spec.needs_approval, "effect": spec.effect}}
        if path == "/cards/show":
            self.run(w.cards.show_card(**body))
            return 200, {}
        if path == "/cards/close":
            self.run(w.cards.close_card(**body))
            return 200, {}
        if path == "/observe":
            self.observe(body)
            return 200, {}
        if path == "/faultpoint":
            return 200, {"action": self.fault_point(body)}
        return 404, {"error": f"no endpoint {path}"}

    def observe(self, body: dict[str, Any]) -> None:
        fields = dict(body.get("fields") or {})
        named = {name: fields.pop(name) for name in _NAMED if name in fields}
        if named.get("epoch") is not None:
            named["epoch"] = int(named["epoch"])
        host = str(body.get("host") or "") or None
        # "info": an operation whose outcome the worker could not know (a connection lost
        # after the request went out); everything else is an event.
        record_type: RecordType = "info" if body.get("type") == "info" else "event"
        with self.lock:
            self.history.add(str(body["kind"]), record_type,
                             data={"event_id": body.get("event_id"), **fields},
                             host=host, deployment=self.deployment_of(host or ""), **named)

    def fault_point(self, body: dict[str, Any]) -> str | None:
        point, host, pid = str(body["point"]), str(body.get("host") or ""), int(body["pid"])
        with self.lock:
            action = self.on_fault_point(point, host, pid) if self.on_fault_point else None
            self.history.add("faultpoint.reached", host=host,
                             deployment=self.deployment_of(host),
                             data={"point": point, "action": action})
        return action


class _QuietServer(ThreadingHTTPServer):
    """Connections reset under a request (network faults on the world link) are expected:
    they are not printed as server errors."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def _make_handler(server: WorldServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            try:
                status, payload = server.handle(self.path, json.loads(raw or b"{}"))
            except Exception as exc:  # a bad request must not kill the server thread
                status, payload = 500, {"error": f"{type(exc).__name__}: {exc}"}
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except ConnectionError:
                # The caller is gone (a network fault between it and the world): what it
                # asked for was done; whether it learns so is the fault's business.
                self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return Handler
