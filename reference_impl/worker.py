"""The ASGI app a worker process serves: `hypercorn reference_impl.worker:app --workers 0`.

Configured by environment variables (set by the harness's Restate adapter):

- `DURABLE_CHAOS_VERSION`: the deployment's version label (default "v1");
- `DURABLE_CHAOS_VARIANT`: "reference" (default) or "naive";
- `DURABLE_CHAOS_WORLD_URL`: the harness world (model, mailer, payments, identity, catalog,
  cards), usually through Toxiproxy;
- `DURABLE_CHAOS_OBSERVER_URL`: where observations go (direct, default: the world URL);
- `DURABLE_CHAOS_PG`: the PostgreSQL conninfo of the thread log (usually through Toxiproxy);
- `DURABLE_CHAOS_CONFIG`: JSON of the scaled `Config` (hand_off_after, max_wait, ...);
- `DURABLE_CHAOS_PG_IDLE_MS`, `DURABLE_CHAOS_PG_LOCK_MS`: the store's session timeouts;
- `DURABLE_CHAOS_HOST`: this worker's name (the thread log's owner identity).

Every port is an HTTP client of the world; a failed or timed-out model call is a
`ProviderError` (the caller retries with the same key).
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import httpx

from reference_impl import faultpoints
from reference_impl.app import build_app
from reference_impl.binding import App
from reference_impl.naive import build_naive_app
from reference_impl.ports import Config, Ports, ProviderError, ToolSpec
from reference_impl.restate_binding import HOST_ENV, asgi_app
from reference_impl.threadlog_pg import PostgresThreadLogStore

__all__ = ["app", "build_from_env"]

_TIMEOUT = float(os.environ.get("DURABLE_CHAOS_HTTP_TIMEOUT", "10"))


class WorldClient:
    """Every world endpoint over HTTP (one async client per event loop)."""

    def __init__(self, url: str, observer_url: str, host: str) -> None:
        self.url = url.rstrip("/")
        self.observer_url = observer_url.rstrip("/")
        self.host = host
        self._sync = httpx.Client(timeout=_TIMEOUT)

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
            response = await client.post(f"{self.url}{path}", json=body)
        if response.status_code >= 400:
            raise RuntimeError(f"world {path} -> {response.status_code}: {response.text[:300]}")
        return response.json()

    # ModelProvider
    async def complete(
        self, *, session: str, turn: str, step: int, messages: list[dict[str, Any]],
        idempotency_key: str,
    ) -> dict[str, Any]:
        try:
            async with httpx.AsyncClient(timeout=_TIMEOUT) as client:
                response = await client.post(f"{self.url}/model/complete", json={
                    "session": session, "turn": turn, "step": step, "messages": messages,
                    "idempotency_key": idempotency_key,
                })
        except httpx.HTTPError as exc:
            raise ProviderError(f"provider unreachable for {idempotency_key}: {exc!r}") from exc
        if response.status_code != 200:
            raise ProviderError(f"provider returned {response.status_code}: {response.text[:200]}")
        result: dict[str, Any] = response.json()
        return result

    # Mailer
    async def send_email(
        self, *, message_id: str, to: str, subject: str, body: str, tool_call: str
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self._post("/email", {
            "message_id": message_id, "to": to, "subject": subject, "body": body,
            "tool_call": tool_call})
        return result

    # Payments
    async def charge(self, *, idempotency_key: str, amount: int, tool_call: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._post("/charge", {
            "idempotency_key": idempotency_key, "amount": amount, "tool_call": tool_call})
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
    def emit(self, kind: str, *, event_id: str, **fields: Any) -> None:
        response = self._sync.post(f"{self.observer_url}/observe", json={
            "kind": kind, "event_id": event_id, "fields": fields, "host": self.host,
            "pid": os.getpid()})
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


def _config() -> Config:
    raw = os.environ.get("DURABLE_CHAOS_CONFIG")
    if not raw:
        return Config()
    data = json.loads(raw)
    return Config(**{k: data[k] for k in ("hand_off_after", "max_wait", "max_steps_per_turn")
                     if k in data})


def build_from_env() -> App:
    version = os.environ.get("DURABLE_CHAOS_VERSION", "v1")
    variant = os.environ.get("DURABLE_CHAOS_VARIANT", "reference")
    world_url = os.environ.get("DURABLE_CHAOS_WORLD_URL", "http://127.0.0.1:8765")
    observer_url = os.environ.get("DURABLE_CHAOS_OBSERVER_URL", world_url)
    conninfo = os.environ.get("DURABLE_CHAOS_PG", "host=127.0.0.1 user=postgres dbname=postgres")
    host = os.environ.get(HOST_ENV, f"{version}-pid{os.getpid()}")
    world = WorldClient(world_url, observer_url, host)
    store = PostgresThreadLogStore(
        conninfo,
        idle_in_transaction_timeout_ms=int(os.environ.get("DURABLE_CHAOS_PG_IDLE_MS", "2000")),
        lock_timeout_ms=int(os.environ.get("DURABLE_CHAOS_PG_LOCK_MS", "1000")),
    )

    def hook(point: str) -> None:
        world.fault_point(point)
        return None

    faultpoints.install(hook)
    ports = Ports(world, world, world, world, world, world, store, world, _config())
    if variant == "naive":
        return build_naive_app(ports, version)
    if variant != "reference":
        raise ValueError(f"DURABLE_CHAOS_VARIANT must be 'reference' or 'naive', got {variant!r}")
    return build_app(ports, version)


app = asgi_app(build_from_env())
