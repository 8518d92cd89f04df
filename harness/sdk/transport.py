"""The world without a network: a user's httpx calls reach the harness's world in-process.

On the real path the world is `harness.world_server.WorldServer` on 127.0.0.1, and the
user's services call it at the URL they are configured with. On the simulator the same
routes (`harness.world_server.world_route`) are served by an `httpx.MockTransport` whose
handler awaits the world's coroutines inside the handler's own coroutine, so the world's
latency is virtual time and a provider fault reaches the user's code as the 500 it would
get over HTTP.

How unchanged user code gets that transport: while a simulated runtime advances, every
`httpx.AsyncHTTPTransport` (what `httpx.AsyncClient()` uses) hands a request for the world's
host to the runtime's transport; a request to any other host fails with a `ConnectError`
naming it (there is no network in a simulation). Code that builds its client with an
explicit transport can take `runtime.transport` instead. Rejected: asking users to inject
a client (their deployed code would change), and a real socket server (real time, threads,
and the same seed would no longer give the same history).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

import httpx

from harness.history import History
from harness.sim.engine import Simulator
from harness.world import Card, World, record_card
from harness.world_server import NO_ANSWER, WORLD_ROUTES, world_route

__all__ = ["SIM_WORLD_URL", "CardWatcher", "routing_to", "world_transport"]

# Where user code on the simulator finds the world (any URL on this host is routed).
SIM_WORLD_URL: Final = "http://world.sim"

# Fault points at deliveries to the world, as on real engines (harness.observers.hosts):
# the handler's host crashes or pauses after the world recorded the delivery and before
# the handler hears back.
EFFECT_POINTS: Final = {"/email": "effect.email.after_send",
                        "/charge": "effect.charge.after_charge",
                        "/model/complete": "effect.model.after_call"}


class CardWatcher:
    """Records the approval cards as user code shows and closes them (`tool.awaiting`,
    `tool.result`), as `harness.observers.EngineObserver` does on real engines, but at the
    request itself instead of at a later poll."""

    def __init__(self, history: History, world: World) -> None:
        self.history = history
        self.world = world
        self._seen: dict[str, str | None] = {}

    def __call__(self) -> None:
        cards: list[Card] = list(self.world.state.cards.values())
        for card in cards:
            record_card(self.history, card, self._seen)


def world_transport(world: World, sim: Simulator,
                    after: Callable[[], None] | None = None) -> httpx.MockTransport:
    """An httpx transport onto `world`'s routes, driven by `sim` (virtual latency)."""

    async def handle(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path not in WORLD_ROUTES:
            return httpx.Response(404, json={"error": f"no endpoint {path}"})
        raw = await request.aread()
        body = json.loads(raw) if raw else {}
        try:
            status, payload = await world_route(world, path, body)
        except (TypeError, KeyError) as exc:  # a malformed request, as the server answers it
            status, payload = 500, {"error": f"{type(exc).__name__}: {exc}"}
        if after is not None:
            after()
        if status == NO_ANSWER:
            # A `timeout` service fault: the world did the work and never answered.
            raise httpx.ReadTimeout(f"the world left {path} unanswered", request=request)
        point = EFFECT_POINTS.get(path)
        if point is not None and status == 200:
            action = sim._fault_point(point)
            if action is not None:
                await action
        headers = ({"Retry-After": str(payload["retry_after"])}
                   if isinstance(payload, dict) and "retry_after" in payload else None)
        return httpx.Response(status, json=payload, headers=headers)

    return httpx.MockTransport(handle)


# -- routing unchanged user code ------------------------------------------------------------

_local = threading.local()
_original: Any = None
_install_lock = threading.Lock()


async def _routed(self: httpx.AsyncHTTPTransport, request: httpx.Request) -> httpx.Response:
    route: tuple[str, httpx.MockTransport] | None = getattr(_local, "route", None)
    if route is None:
        response: httpx.Response = await _original(self, request)
        return response
    host, transport = route
    if request.url.host != host:
        raise httpx.ConnectError(
            f"{request.url} is outside the simulated world: a handler on the simulator "
            f"reaches only the world at {SIM_WORLD_URL} (no network in a simulation)",
            request=request)
    return await transport.handle_async_request(request)


_originals: dict[str, Any] = {}


def _init(self: httpx.AsyncHTTPTransport, *args: Any, **kwargs: Any) -> None:
    # A routed transport opens no connection: skip the pool and its SSL context (creating
    # one loads the CA bundle, 56 ms, more than a whole simulated schedule).
    if getattr(_local, "route", None) is None:
        _originals["__init__"](self, *args, **kwargs)
    else:
        self._pool = None  # type: ignore[assignment]


async def _aenter(self: httpx.AsyncHTTPTransport) -> httpx.AsyncHTTPTransport:
    if self._pool is None:
        return self
    result: httpx.AsyncHTTPTransport = await _originals["__aenter__"](self)
    return result


async def _aexit(self: httpx.AsyncHTTPTransport, *exc: Any) -> None:
    # httpcore's pool closes under an anyio lock, which needs an event loop; a routed
    # transport has no pool to close.
    if self._pool is not None:
        await _originals["__aexit__"](self, *exc)


async def _aclose(self: httpx.AsyncHTTPTransport) -> None:
    if self._pool is not None:
        await _originals["aclose"](self)


def _no_proxies() -> dict[str, Any]:
    # httpx reads the proxy settings from the environment for every new client (os.environ
    # walked, a seventh of a simulated schedule); a routed client reaches no proxy.
    if getattr(_local, "route", None) is None:
        result: dict[str, Any] = _originals["get_environment_proxies"]()
        return result
    return {}


def _install() -> None:
    global _original
    with _install_lock:
        if _original is None:
            cls = httpx.AsyncHTTPTransport
            for name in ("__init__", "__aenter__", "__aexit__", "aclose"):
                _originals[name] = getattr(cls, name)
            _original = cls.handle_async_request
            client_module: Any = httpx._client
            if hasattr(client_module, "get_environment_proxies"):
                _originals["get_environment_proxies"] = client_module.get_environment_proxies
                client_module.get_environment_proxies = _no_proxies
            cls.handle_async_request = _routed  # type: ignore[method-assign]
            cls.__init__ = _init  # type: ignore[method-assign]
            cls.__aenter__ = _aenter  # type: ignore[method-assign,assignment]
            cls.__aexit__ = _aexit  # type: ignore[method-assign,assignment]
            cls.aclose = _aclose  # type: ignore[method-assign]


@contextmanager
def routing_to(transport: httpx.MockTransport, url: str = SIM_WORLD_URL) -> Iterator[None]:
    """While inside, this thread's `httpx.AsyncClient` requests go to `transport`."""
    _install()
    previous = getattr(_local, "route", None)
    _local.route = (httpx.URL(url).host, transport)
    try:
        yield
    finally:
        _local.route = previous
