"""The harness's World over HTTP, for real worker processes.

A small threaded HTTP server on 127.0.0.1 serves the same `World` the simulator uses: the
fake model provider (its faults included, "500 after the completion was produced and billed"
among them), the outbox, the ledger, identity and catalog, the approval cards, the observer
(observations go into the run's history) and the fault points of the reference code.

It also keeps the engine's durable time when the runtime gives it a `TimerTable`
(`/timers/now`, `/timers/sleep`, `/timers/send`, the worker's `TimerPort`): the runtime's
virtual clock answers `now`, and the runtime fires the registered timers as that clock
passes their deadlines. `busy()` tells the runtime whether a request is in flight or one
ended a moment ago (part of deciding that the engine is quiescent and the clock may jump).

Every request runs its world coroutine on its own event loop in the request's thread, holding
one lock on the world except while the world sleeps (latency), so deliveries are checked and
recorded atomically and history records are added one at a time.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import math
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, Literal

from contract.services import ServiceError
from harness.history import History, RecordType
from harness.world import World

__all__ = ["NO_ANSWER", "Timer", "TimerTable", "WorldServer"]

# The status of a call the world leaves unanswered (a `timeout` service fault): the request
# handler closes the connection without a response, so the caller sees its call time out.
NO_ANSWER: Final = 0

_NAMED: Final = ("session", "turn", "tool_call", "epoch", "key")

Observe = Callable[[dict[str, Any]], None]
FaultPoint = Callable[[str, str, int], str | None]


@dataclass(frozen=True, order=True)
class Timer:
    """A durable timer of the engine, kept by the harness: due at `deadline` (clock seconds)."""

    deadline: float
    seq: int
    id: str = field(compare=False)
    kind: Literal["sleep", "send"] = field(compare=False)
    awakeable: str | None = field(default=None, compare=False)
    invocation: str | None = field(default=None, compare=False)
    service: str | None = field(default=None, compare=False)
    handler: str | None = field(default=None, compare=False)
    key: str | None = field(default=None, compare=False)
    arg: Any = field(default=None, compare=False)


class TimerTable:
    """The engine's timers, by deadline on `now`'s clock; a registration is idempotent on its
    id (an engine re-running a step registers the same timer again)."""

    def __init__(self, now: Callable[[], float]) -> None:
        self.now = now
        self._lock = threading.Lock()
        self._heap: list[Timer] = []
        self._known: dict[str, float] = {}
        self._seq = 0

    def _add(self, body: dict[str, Any], kind: Literal["sleep", "send"]) -> float:
        timer_id = str(body["id"])
        with self._lock:
            if timer_id in self._known:
                return self._known[timer_id]
            deadline = self.now() + max(0.0, float(body["seconds"]))
            self._seq += 1
            arg = body.get("arg")
            timer = Timer(deadline, self._seq, timer_id, kind,
                          awakeable=body.get("awakeable"), invocation=body.get("invocation"),
                          service=body.get("service"), handler=body.get("handler"),
                          key=body.get("key"), arg=arg)
            heapq.heappush(self._heap, timer)
            self._known[timer_id] = deadline
            return deadline

    def sleep(self, body: dict[str, Any]) -> float:
        return self._add(body, "sleep")

    def send(self, body: dict[str, Any]) -> float:
        return self._add(body, "send")

    def next_deadline(self) -> float | None:
        with self._lock:
            return self._heap[0].deadline if self._heap else None

    def due(self, now: float) -> list[Timer]:
        """Take every timer due at `now`, in deadline order."""
        out: list[Timer] = []
        with self._lock:
            while self._heap and self._heap[0].deadline <= now:
                out.append(heapq.heappop(self._heap))
        return out

    def __len__(self) -> int:
        with self._lock:
            return len(self._heap)


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
        slow: float = 1.0,
        retry_after: float = 1.0,
        deployment_of: Callable[[str], str | None] | None = None,
        on_fault_point: FaultPoint | None = None,
        timers: TimerTable | None = None,
        port: int = 0,
    ) -> None:
        self.lock = threading.RLock()
        self.timers = timers
        self._busy_lock = threading.Lock()
        self._in_flight = 0
        self._last_request = time.monotonic()
        self.history = history
        self.deployment_of = deployment_of or (lambda host: None)
        self.on_fault_point = on_fault_point
        self.world = World(history, now=now, sleep=self._sleep, model_latency=model_latency,
                           effect_latency=effect_latency)
        services = self.world.services
        services.timeout, services.slow = provider_timeout, slow
        # Retry-After in real seconds: a real engine's retries take real time.
        services.retry_after, services.clock = retry_after, time.monotonic
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

    def busy(self, settle: float) -> bool:
        """A request is in flight, or one ended less than `settle` real seconds ago."""
        with self._busy_lock:
            return self._in_flight > 0 or time.monotonic() - self._last_request < settle

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        with self._busy_lock:
            self._in_flight += 1
        try:
            return self._handle(path, body)
        finally:
            with self._busy_lock:
                self._in_flight -= 1
                self._last_request = time.monotonic()

    def _handle(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path.startswith("/timers/"):
            timers = self.timers
            if timers is None:
                return 404, {"error": "this harness keeps no timers (real time)"}
            if path == "/timers/now":
                return 200, {"now": timers.now()}
            if path == "/timers/sleep":
                return 200, {"deadline": timers.sleep(body)}
            if path == "/timers/send":
                return 200, {"deadline": timers.send(body)}
        try:
            return self._serve(path, body)
        except ServiceError as exc:
            return _failure(exc)

    def _serve(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """A world endpoint's answer; a service fault raises `ServiceError` out of it."""
        w = self.world
        if path == "/model/complete":
            return 200, self.run(w.provider.complete(
                session=body["session"], turn=body["turn"], step=int(body["step"]),
                messages=list(body["messages"]), idempotency_key=body["idempotency_key"]))
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


def _failure(exc: ServiceError) -> tuple[int, Any]:
    """How a service fault presents over HTTP: its status with an error body (Retry-After
    in it for a 429, which the handler also sends as the header), a 200 whose body says
    error, or no answer at all."""
    if exc.status is None:
        return NO_ANSWER, {}
    payload: dict[str, Any] = {"error": str(exc)}
    if exc.retry_after is not None:
        payload["retry_after"] = exc.retry_after
    return exc.status, payload


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
            if status == NO_ANSWER:
                self.close_connection = True
                return
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                if status == 429 and isinstance(payload, dict) and "retry_after" in payload:
                    self.send_header("retry-after", f"{math.ceil(payload['retry_after'])}")
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
