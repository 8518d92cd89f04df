"""What every worker host shares, whatever its engine; it imports no engine SDK.

A worker process (`reference_impl.worker` on Restate, `reference_impl.temporal.worker`,
`reference_impl.dbos.worker`) serves the reference app (or the naive variant) with the ports
built here from its environment (set by the harness's engine adapters):

- `DURABLE_CHAOS_VERSION`: the deployment's version label (default "v1");
- `DURABLE_CHAOS_VARIANT`: "reference" (default) or "naive";
- `DURABLE_CHAOS_WORLD_URL`: the harness world (model, mailer, payments, identity, catalog,
  cards), usually through Toxiproxy;
- `DURABLE_CHAOS_OBSERVER_URL`: where observations go (direct, default: the world URL);
- `DURABLE_CHAOS_PG`: the PostgreSQL conninfo of the thread log (usually through Toxiproxy);
- `DURABLE_CHAOS_CONFIG`: JSON of the `Config` (hand_off_after, max_wait, ...);
- `DURABLE_CHAOS_PG_IDLE_MS`, `DURABLE_CHAOS_PG_LOCK_MS`: the store's session timeouts;
- `DURABLE_CHAOS_HOST`: this worker's name (the thread log's owner identity);
- `DURABLE_CHAOS_TIMERS_URL`: where durable time is kept (the harness's virtual clock, see
  `TimerClient`); unset, the engine's own timers and the wall clock are used.

Every port is an HTTP client of the world; a failed or timed-out call is a `ServiceError`
(`ProviderError` for the model), with the status and `Retry-After` it came with, and so is a
200 whose body says error (`contract.services.body_error`): the caller retries with the same
key. A call whose request went out and
whose answer never came (a connection reset or a read timeout, e.g. a Toxiproxy `reset_peer`
after the world committed the effect) has an unknown outcome: the worker tells the harness
(`world.outcome_unknown`, an `info` record) before the error goes on. So does an append whose
COMMIT was sent when the connection to PostgreSQL was lost (`pg.outcome_unknown`).

The thread-log store finishes an append it has started even when the engine abandons the
attempt: restate-sdk, for one, cancels an abandoned attempt's `run` tasks as soon as the
process sees the disconnect, which after a GC pause (SIGSTOP, then SIGCONT) would stop the
woken writer before it reaches the database. A real paused process goes on where it was;
letting it do so is the harder case for the thread log, whose fencing must then reject the
stale write.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from collections.abc import Callable
from typing import Any

import httpx

from contract import faultpoints
from contract.binding import App
from contract.ports import Config, Ports, ProviderError, ToolSpec
from contract.services import ServiceError, body_error
from contract.threadlog import Assignment, LogEntry
from reference_impl.app import build_app
from reference_impl.naive import build_naive_app
from reference_impl.threadlog_pg import CommitOutcomeUnknown, PostgresThreadLogStore

__all__ = [
    "HOST_ENV",
    "HarnessStore",
    "TimerClient",
    "WorldClient",
    "build_from_env",
    "config_from_env",
    "host_from_env",
    "timers_from_env",
]

HOST_ENV = "DURABLE_CHAOS_HOST"

_TIMEOUT = float(os.environ.get("DURABLE_CHAOS_HTTP_TIMEOUT", "10"))

# Transport errors raised before the request could have left: the outcome is known (nothing
# happened). Every other transport error leaves it unknown.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout,
             httpx.UnsupportedProtocol, httpx.LocalProtocolError)


class WorldClient:
    """Every world endpoint over HTTP (one async client per event loop)."""

    def __init__(self, url: str, observer_url: str, host: str) -> None:
        self.url = url.rstrip("/")
        self.observer_url = observer_url.rstrip("/")
        self.host = host
        self._sync = httpx.Client(timeout=_TIMEOUT)

    async def _send(self, path: str, body: dict[str, Any], key: str | None) -> httpx.Response:
        try:
            async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
                return await client.post(f"{self.url}{path}", json=body)
        except httpx.TransportError as exc:
            if not isinstance(exc, _NOT_SENT):
                self.unknown(path, key, exc)
            raise

    def unknown(self, path: str, key: str | None, exc: BaseException) -> None:
        """Report a call whose request went out and whose answer never came."""
        self.emit("world.outcome_unknown", event_id=f"world.outcome_unknown:{uuid.uuid4()}",
                  record_type="info", key=key, path=path, error=f"{type(exc).__name__}: {exc}")

    async def _post(self, path: str, body: dict[str, Any], key: str | None = None) -> Any:
        response = await self._send(path, body, key)
        return _answer(path, response, ServiceError)

    # ModelProvider
    async def complete(
        self, *, session: str, turn: str, step: int, messages: list[dict[str, Any]],
        idempotency_key: str,
    ) -> dict[str, Any]:
        try:
            response = await self._send("/model/complete", {
                "session": session, "turn": turn, "step": step, "messages": messages,
                "idempotency_key": idempotency_key,
            }, idempotency_key)
        except httpx.HTTPError as exc:
            raise ProviderError(f"provider unreachable for {idempotency_key}: {exc!r}",
                                service="provider") from exc
        result: dict[str, Any] = _answer("/model/complete", response, ProviderError)
        return result

    # Mailer
    async def send_email(
        self, *, message_id: str, to: str, subject: str, body: str, tool_call: str
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self._post("/email", {
            "message_id": message_id, "to": to, "subject": subject, "body": body,
            "tool_call": tool_call}, message_id)
        return result

    # Payments
    async def charge(self, *, idempotency_key: str, amount: int, tool_call: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._post("/charge", {
            "idempotency_key": idempotency_key, "amount": amount, "tool_call": tool_call},
            idempotency_key)
        return result

    # Identity
    async def has_access(self, user: str, tool: str) -> bool:
        return bool((await self._post("/has_access", {"user": user, "tool": tool}))["ok"])

    # ToolCatalog
    async def lookup(self, name: str) -> ToolSpec | None:
        spec = (await self._post("/lookup", {"name": name}))["spec"]
        if spec is None:
            return None
        return ToolSpec(str(spec["name"]), bool(spec["needs_approval"]), spec.get("effect"))

    # ApprovalUI
    async def show_card(
        self, *, session: str, turn: str, tool_call: str, tool: str, args: dict[str, Any]
    ) -> None:
        await self._post("/cards/show", {"session": session, "turn": turn,
                                         "tool_call": tool_call, "tool": tool, "args": args})

    async def close_card(self, *, tool_call: str, outcome: str) -> None:
        await self._post("/cards/close", {"tool_call": tool_call, "outcome": outcome})

    # Observer: synchronous on purpose (the reference code emits from sync steps); direct to
    # the harness, never through a proxy, so observations are not subject to the faults.
    def emit(self, kind: str, *, event_id: str, record_type: str = "event",
             **fields: Any) -> None:
        response = self._sync.post(f"{self.observer_url}/observe", json={
            "kind": kind, "event_id": event_id, "fields": fields, "host": self.host,
            "pid": os.getpid(), "type": record_type})
        response.raise_for_status()

    def fault_point(self, point: str) -> None:
        """Ask the harness whether `point` is armed; a pause stops this process (SIGSTOP)
        until the harness resumes it, a crash kills it."""
        response = self._sync.post(f"{self.observer_url}/faultpoint", json={
            "point": point, "host": self.host, "pid": os.getpid()})
        action = response.json().get("action") if response.status_code == 200 else None
        if action == "pause":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif action == "crash":
            os.kill(os.getpid(), signal.SIGKILL)


def _answer(path: str, response: httpx.Response, error: type[ServiceError]) -> Any:
    """The body of a world answer, or the `ServiceError` it is: a status other than 200
    (with its Retry-After), or a 200 whose body says error."""
    if response.status_code != 200:
        retry_after = response.headers.get("retry-after")
        raise error(f"world {path} -> {response.status_code}: {response.text[:300]}",
                    service=path, status=response.status_code,
                    retry_after=float(retry_after) if retry_after else None)
    result = response.json()
    problem = body_error(result)
    if problem is not None:
        raise error(f"world {path} -> 200 with an error: {problem}", service=path, status=200)
    return result


class TimerClient:
    """The `TimerPort` over HTTP: the harness keeps the clock and fires the timers.

    Direct to the harness, never through a proxy: time is the engine's, not a world service
    subject to network faults. A registration is idempotent on its timer id, so the engine
    retrying its step is harmless.
    """

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
            response = await client.post(f"{self.url}{path}", json=body)
        if response.status_code >= 400:
            raise RuntimeError(f"timers {path} -> {response.status_code}: {response.text[:300]}")
        return response.json()

    async def now(self) -> float:
        return float((await self._post("/timers/now", {}))["now"])

    async def sleep(self, *, timer_id: str, awakeable: str, seconds: float,
                    invocation: str) -> float:
        return float((await self._post("/timers/sleep", {
            "id": timer_id, "awakeable": awakeable, "seconds": seconds,
            "invocation": invocation}))["deadline"])

    async def send(self, *, timer_id: str, service: str, handler: str, key: str | None,
                   arg: Any, seconds: float) -> float:
        return float((await self._post("/timers/send", {
            "id": timer_id, "service": service, "handler": handler, "key": key, "arg": arg,
            "seconds": seconds}))["deadline"])


class HarnessStore:
    """The PostgreSQL thread-log store as a worker runs it (see the module docstring): a
    started append runs to its end even if its attempt is cancelled, and an append whose
    COMMIT outcome is unknown is reported to the harness before the error goes on."""

    def __init__(self, store: PostgresThreadLogStore, world: WorldClient) -> None:
        self.store = store
        self.world = world

    async def assign_thread(self, thread_id: str, owner: str) -> Assignment:
        return await self.store.assign_thread(thread_id, owner)

    async def append(
        self, thread_id: str, epoch: int, owner: str, kind: str, payload: dict[str, Any]
    ) -> LogEntry:
        started = asyncio.ensure_future(self._append(thread_id, epoch, owner, kind, payload))
        while True:
            try:
                return await asyncio.shield(started)
            except asyncio.CancelledError:
                if started.cancelled():
                    raise
                # The attempt was abandoned; the write it started goes on, and its outcome
                # (committed, or rejected by the fence) is what this coroutine reports.
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()

    async def _append(
        self, thread_id: str, epoch: int, owner: str, kind: str, payload: dict[str, Any]
    ) -> LogEntry:
        try:
            return await self.store.append(thread_id, epoch, owner, kind, payload)
        except CommitOutcomeUnknown as exc:
            entry = payload.get("id")
            self.world.emit("pg.outcome_unknown",
                            event_id=f"pg.outcome_unknown:{thread_id}:{epoch}:{entry}",
                            record_type="info", session=thread_id, epoch=epoch, owner=owner,
                            entry=entry, detail=str(exc))
            raise

    async def read(self, thread_id: str) -> list[LogEntry]:
        return await self.store.read(thread_id)

    async def current(self, thread_id: str) -> Assignment | None:
        return await self.store.current(thread_id)


def config_from_env() -> Config:
    """The `Config` of `DURABLE_CHAOS_CONFIG` (the defaults where it is unset)."""
    raw = os.environ.get("DURABLE_CHAOS_CONFIG")
    if not raw:
        return Config()
    data = json.loads(raw)
    return Config(**{k: data[k] for k in ("hand_off_after", "max_wait", "max_steps_per_turn")
                     if k in data})


def host_from_env() -> str:
    """This worker's name (`DURABLE_CHAOS_HOST`), else one made of its version and pid."""
    version = os.environ.get("DURABLE_CHAOS_VERSION", "v1")
    return os.environ.get(HOST_ENV, f"{version}-pid{os.getpid()}")


def timers_from_env() -> TimerClient | None:
    url = os.environ.get("DURABLE_CHAOS_TIMERS_URL")
    return TimerClient(url) if url else None


def build_from_env(wrap: Callable[[Any], Any] | None = None) -> App:
    """The app this worker serves, its ports built from the environment (see the module
    docstring), with the fault-point hook installed.

    `wrap`, if given, wraps each asynchronous port (the world's and the thread-log store):
    an engine that runs handlers outside the event loop the ports belong to (Temporal's
    workflow thread) routes the calls back to that loop.
    """
    version = os.environ.get("DURABLE_CHAOS_VERSION", "v1")
    variant = os.environ.get("DURABLE_CHAOS_VARIANT", "reference")
    world_url = os.environ.get("DURABLE_CHAOS_WORLD_URL", "http://127.0.0.1:8765")
    observer_url = os.environ.get("DURABLE_CHAOS_OBSERVER_URL", world_url)
    conninfo = os.environ.get("DURABLE_CHAOS_PG", "host=127.0.0.1 user=postgres dbname=postgres")
    world = WorldClient(world_url, observer_url, host_from_env())
    store = HarnessStore(PostgresThreadLogStore(
        conninfo,
        idle_in_transaction_timeout_ms=int(os.environ.get("DURABLE_CHAOS_PG_IDLE_MS", "2000")),
        lock_timeout_ms=int(os.environ.get("DURABLE_CHAOS_PG_LOCK_MS", "1000")),
    ), world)

    def hook(point: str) -> None:
        world.fault_point(point)

    faultpoints.install(hook)
    if wrap is None:
        ports = Ports(world, world, world, world, world, world, store, world, config_from_env())
    else:
        w = wrap(world)
        ports = Ports(w, w, w, w, w, w, wrap(store), world, config_from_env())
    if variant == "naive":
        return build_naive_app(ports, version)
    if variant != "reference":
        raise ValueError(f"DURABLE_CHAOS_VARIANT must be 'reference' or 'naive', got {variant!r}")
    return build_app(ports, version)
