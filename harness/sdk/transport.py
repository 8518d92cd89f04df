"""The world without a network: a user's HTTP calls reach the harness's world in-process.

On the real path the world is `harness.world_server.WorldServer` on 127.0.0.1, and the
user's services call it at the URL they are configured with. On the simulator the same
routes (`harness.world_server.world_route`) are served in-process by `WorldRoutes`, whose
coroutine runs inside the handler's own coroutine, so the world's latency is virtual time and
a provider fault reaches the user's code as the 500 it would get over HTTP.

How unchanged user code reaches it, while a simulated runtime advances (`routing_to`):

- httpx: every `httpx.AsyncHTTPTransport` (what `httpx.AsyncClient()` uses) hands a request
  for the world's host to the runtime's `httpx.MockTransport` (`world_transport`), and every
  `httpx.HTTPTransport` (`httpx.Client()`, `httpx.post()`) to the same routes synchronously;
  a request to any other host fails with a `ConnectError` naming it. Code that builds its
  client with an explicit transport can take `runtime.transport` instead.
- requests: every `requests.Session` (`requests.get()` makes one too), including one made
  before the run, sends through `WorldAdapter`, a transport adapter: the world's host is
  served, any other fails with `requests.ConnectionError` naming it.
- A synchronous call (requests, `httpx.Client`) cannot suspend its handler, so the world's
  latency takes no virtual time there and a host fault at a delivery happens inside the
  call (`WorldRoutes.serve_now`, docs/restate-sdk.md).
- anything else that would open a connection (aiohttp, urllib, http.client, a raw socket)
  stops the run at once with `SdkCallRefused` naming the client and what is routed: never a
  hang, never a real network call.

Rejected: asking users to inject a client (their deployed code would change), and a real
socket server (real time, threads, and the same seed would no longer give the same history).
"""

from __future__ import annotations

import http
import importlib.util
import io
import json
import socket
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, Final
from urllib.parse import urlsplit

import httpx

from harness.errors import SdkCallRefused, SimulationError
from harness.history import History
from harness.sdk.context import Refused
from harness.sim.engine import FaultAction, Fenced, IoWait, Simulator
from harness.world import Card, World, record_card
from harness.world_server import NO_ANSWER, WORLD_ROUTES, world_route

__all__ = ["SIM_WORLD_URL", "CardWatcher", "WorldRoutes", "WorldTransport", "routing_to",
           "world_transport"]

# Where user code on the simulator finds the world (any URL on this host is routed).
SIM_WORLD_URL: Final = "http://world.sim"

# Fault points at deliveries to the world, as on real engines (harness.observers.hosts):
# the handler's host crashes or pauses after the world recorded the delivery (an effect, a
# card shown) and before the handler hears back.
EFFECT_POINTS: Final = {"/email": "effect.email.after_send",
                        "/charge": "effect.charge.after_charge",
                        "/model/complete": "effect.model.after_call",
                        "/cards/show": "card.after_show"}

# What a handler on the simulator may use to reach the world (named in every refusal).
ROUTED_CLIENTS: Final = "httpx (AsyncClient, Client) and requests"


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


class WorldRoutes:
    """The world's routes for one run, whatever the client: `serve` answers a request body
    as the world server would, `effect` is the fault point after a delivery."""

    def __init__(self, world: World, sim: Simulator,
                 after: Callable[[], None] | None = None) -> None:
        self.world = world
        self.sim = sim
        self.after = after

    async def serve(self, path: str, raw: bytes) -> tuple[int, Any]:
        """(status, JSON payload); status `NO_ANSWER` for a call the world left unanswered."""
        if path not in WORLD_ROUTES:
            return 404, {"error": f"no endpoint {path}"}
        body = json.loads(raw) if raw else {}
        try:
            status, payload = await world_route(self.world, path, body)
        except (TypeError, KeyError) as exc:  # a malformed request, as the server answers it
            status, payload = 500, {"error": f"{type(exc).__name__}: {exc}"}
        if self.after is not None:
            self.after()
        return status, payload

    def effect(self, path: str, status: int) -> Any:
        """The host action armed at this delivery's fault point (an awaitable), or None."""
        point = EFFECT_POINTS.get(path)
        if point is None or status != 200:
            return None
        return self.sim._fault_point(point)

    def serve_now(self, path: str, raw: bytes) -> tuple[int, Any]:
        """`serve` for a synchronous client: the world's latency takes no virtual time (the
        call cannot suspend its handler), and a host fault at the delivery happens inside
        the call: a pause parks the handler at its next await, a crash ends it here."""
        coro = self.serve(path, raw)
        try:
            while True:
                waited = coro.send(None)
                if type(waited) is not IoWait:
                    coro.close()
                    raise SimulationError(f"the world awaited {waited!r} in a synchronous "
                                          "call, which the simulator cannot drive")
        except StopIteration as stop:
            status, payload = stop.value
        if status != NO_ANSWER:
            action = self.effect(path, status)
            if action is not None:
                self._host_action_now(action.action)
        return status, payload

    def _host_action_now(self, action: FaultAction) -> None:
        attempt = self.sim.current_attempt()
        if attempt is None:
            return
        if action[0] == "pause":
            self.sim.pause_host(attempt.host.id, action[1])
        else:
            self.sim.crash_host(attempt.host.id)
            # The handler never hears back, as when the async path's host crashes: its
            # attempt ends here (a BaseException: `except Exception` in user code cannot
            # carry on past the crash).
            raise Fenced()


class WorldTransport(httpx.MockTransport):
    """An httpx transport onto a run's `WorldRoutes`."""

    def __init__(self, routes: WorldRoutes) -> None:
        self.routes = routes
        super().__init__(self._handle)

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        status, payload = await self.routes.serve(path, await request.aread())
        if status == NO_ANSWER:
            # A `timeout` service fault: the world did the work and never answered.
            raise httpx.ReadTimeout(f"the world left {path} unanswered", request=request)
        action = self.routes.effect(path, status)
        if action is not None:
            await action
        return _json_response(status, payload)


def _json_response_slow(status: int, payload: Any) -> httpx.Response:
    return httpx.Response(status, json=payload, headers=_retry_after(payload))


def _json_response_fast(status: int, payload: Any) -> httpx.Response:
    # `httpx.Response(json=...)` reads its own body back through the streaming machinery
    # (iterators, chunkers, a request context) and sets its headers one `setdefault` at a
    # time: a tenth of a simulated schedule. This builds the same object, body and headers
    # given whole and the read's end state set: `_same_response` checks that it is the same
    # on the installed httpx before it is used.
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False).encode("utf-8")
    headers = [("Content-Length", str(len(body))), ("Content-Type", "application/json")]
    if isinstance(payload, dict) and "retry_after" in payload:
        headers.insert(0, ("Retry-After", str(payload["retry_after"])))
    response = httpx.Response(status, headers=headers, stream=httpx.ByteStream(body))
    response._content = body
    response.is_stream_consumed = True
    response.is_closed = True
    response._get_content_decoder()  # the decoder the read leaves cached
    return response


def _state(response: httpx.Response) -> dict[str, Any]:
    state = dict(vars(response))
    state["headers"] = (response.headers.raw, response.headers.encoding)
    state["_decoder"] = type(state.get("_decoder"))
    state["stream"] = (type(response.stream), bytes(b"".join(response.stream)))  # type: ignore[arg-type]
    return state


def _same_response() -> bool:
    """Whether `_json_response_fast` builds what `httpx.Response(json=...)` does here."""
    samples: list[tuple[int, Any]] = [(200, {"text": "h\u00e9llo", "n": [1, 2.5, None]}),
                                      (429, {"error": "slow down", "retry_after": 2.0}),
                                      (200, {}), (500, ["x"]), (404, {"error": "none"})]
    try:
        return all(_state(_json_response_fast(s, p)) == _state(_json_response_slow(s, p))
                   for s, p in samples)
    except Exception:  # any other httpx: the plain constructor
        return False


def world_transport(world: World, sim: Simulator,
                    after: Callable[[], None] | None = None) -> WorldTransport:
    """An httpx transport onto `world`'s routes, driven by `sim` (virtual latency)."""
    return WorldTransport(WorldRoutes(world, sim, after))


def _retry_after(payload: Any) -> dict[str, str] | None:
    if isinstance(payload, dict) and "retry_after" in payload:
        return {"Retry-After": str(payload["retry_after"])}
    return None


_json_response: Callable[[int, Any], httpx.Response] = (
    _json_response_fast if _same_response() else _json_response_slow)


def _outside(url: object) -> str:
    return (f"{url} is outside the simulated world: a handler on the simulator reaches only "
            f"the world at {SIM_WORLD_URL} (no network in a simulation)")


# -- routing unchanged user code ------------------------------------------------------------
# Each patch below is installed once per process and does nothing unless this thread is
# inside `routing_to` (`_local.route` set), so the real path and other threads see the
# libraries as they ship.

_local = threading.local()
_originals: dict[str, Any] = {}
_install_lock = threading.Lock()
_installed = False


def _route() -> tuple[str, WorldTransport] | None:
    route: tuple[str, WorldTransport] | None = getattr(_local, "route", None)
    return route


@contextmanager
def routing_to(transport: WorldTransport, url: str = SIM_WORLD_URL) -> Iterator[None]:
    """While inside, this thread's HTTP clients reach `transport`'s world (module doc)."""
    if not _installed:
        _install()
    previous = getattr(_local, "route", None)
    _local.route = (_host_of(url), transport)
    try:
        yield
    finally:
        _local.route = previous


_hosts: dict[str, str] = {}


def _host_of(url: str) -> str:
    host = _hosts.get(url)
    if host is None:
        host = _hosts[url] = httpx.URL(url).host
    return host


def _install() -> None:
    global _installed
    with _install_lock:
        if _installed:
            return
        _install_httpx()
        if importlib.util.find_spec("requests") is not None:
            _install_requests()
        if importlib.util.find_spec("aiohttp") is not None:
            _install_aiohttp()
        _install_socket_guard()
        _installed = True


def _refused(client: str, url: object) -> Refused:
    return Refused(SdkCallRefused(
        f"{client} call to {url} from a handler on the simulator: {client} is not routed "
        f"onto the simulated world (no network in a simulation); the routed clients are "
        f"{ROUTED_CLIENTS}. See docs/restate-sdk.md, or run this handler on the real path"))


# httpx ---------------------------------------------------------------------------------------
# What an `httpx.AsyncClient` costs per request is mostly construction and parsing that a
# routed client, which opens no connection, can skip without changing what user code sees:
# the connection pool and its SSL context (loading the CA bundle is 56 ms, more than a whole
# simulated schedule), the environment's proxy settings (os.environ walked per client), the
# same few URLs parsed again for every client and request (a routed run has a handful), and
# the cookie jar's walk of a response that sets no cookie.


async def _routed(self: httpx.AsyncHTTPTransport, request: httpx.Request) -> httpx.Response:
    route = _route()
    if route is None:
        response: httpx.Response = await _originals["handle_async_request"](self, request)
        return response
    host, transport = route
    if request.url.host != host:
        raise httpx.ConnectError(_outside(request.url), request=request)
    return await transport.handle_async_request(request)


def _init(self: httpx.AsyncHTTPTransport, *args: Any, **kwargs: Any) -> None:
    if _route() is None:
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


def _routed_sync(self: httpx.HTTPTransport, request: httpx.Request) -> httpx.Response:
    route = _route()
    if route is None:
        response: httpx.Response = _originals["sync.handle_request"](self, request)
        return response
    host, transport = route
    if request.url.host != host:
        raise httpx.ConnectError(_outside(request.url), request=request)
    path = request.url.path
    status, payload = transport.routes.serve_now(path, request.read())
    if status == NO_ANSWER:
        raise httpx.ReadTimeout(f"the world left {path} unanswered", request=request)
    return httpx.Response(status, json=payload, headers=_retry_after(payload))


def _init_sync(self: httpx.HTTPTransport, *args: Any, **kwargs: Any) -> None:
    if _route() is None:
        _originals["sync.__init__"](self, *args, **kwargs)
    else:
        self._pool = None  # type: ignore[assignment]


def _enter_sync(self: httpx.HTTPTransport) -> httpx.HTTPTransport:
    if self._pool is None:
        return self
    result: httpx.HTTPTransport = _originals["sync.__enter__"](self)
    return result


def _exit_sync(self: httpx.HTTPTransport, *exc: Any) -> None:
    if self._pool is not None:
        _originals["sync.__exit__"](self, *exc)


def _close_sync(self: httpx.HTTPTransport) -> None:
    if self._pool is not None:
        _originals["sync.close"](self)


def _no_proxies() -> dict[str, Any]:
    if _route() is None:
        result: dict[str, Any] = _originals["get_environment_proxies"]()
        return result
    return {}


# httpx's URL parser is pure and its result an immutable tuple, so a routed run's few URLs
# are parsed once; a URL that fails to parse is not cached (it raises every time).
_parsed: dict[tuple[str, tuple[tuple[str, str | None], ...]], Any] = {}
_PARSED_MAX: Final = 4096


def _urlparse(url: str = "", **kwargs: str | None) -> Any:
    if _route() is None:
        return _originals["urlparse"](url, **kwargs)
    key = (url, tuple(kwargs.items()))
    result = _parsed.get(key)
    if result is None:
        result = _originals["urlparse"](url, **kwargs)
        if len(_parsed) >= _PARSED_MAX:
            _parsed.clear()
        _parsed[key] = result
    return result


def _extract_cookies(self: httpx.Cookies, response: httpx.Response) -> None:
    # The jar finds nothing without a Set-Cookie header, after building two urllib
    # wrappers and reading the clock: skip straight to that answer.
    if (_route() is not None and "set-cookie" not in response.headers
            and "set-cookie2" not in response.headers):
        return
    _originals["extract_cookies"](self, response)


def _install_httpx() -> None:
    cls = httpx.AsyncHTTPTransport
    for name in ("__init__", "__aenter__", "__aexit__", "aclose", "handle_async_request"):
        _originals[name] = getattr(cls, name)
    cls.handle_async_request = _routed  # type: ignore[method-assign]
    cls.__init__ = _init  # type: ignore[method-assign]
    cls.__aenter__ = _aenter  # type: ignore[method-assign,assignment]
    cls.__aexit__ = _aexit  # type: ignore[method-assign,assignment]
    cls.aclose = _aclose  # type: ignore[method-assign]
    sync = httpx.HTTPTransport
    for name in ("__init__", "__enter__", "__exit__", "close", "handle_request"):
        _originals[f"sync.{name}"] = getattr(sync, name)
    sync.handle_request = _routed_sync  # type: ignore[method-assign]
    sync.__init__ = _init_sync  # type: ignore[method-assign]
    sync.__enter__ = _enter_sync  # type: ignore[method-assign,assignment]
    sync.__exit__ = _exit_sync  # type: ignore[method-assign]
    sync.close = _close_sync  # type: ignore[method-assign]
    client_module: Any = httpx._client
    if hasattr(client_module, "get_environment_proxies"):
        _originals["get_environment_proxies"] = client_module.get_environment_proxies
        client_module.get_environment_proxies = _no_proxies
    urls_module: Any = httpx._urls
    urlparse_module: Any = httpx._urlparse
    if getattr(urls_module, "urlparse", None) is urlparse_module.urlparse:
        _originals["urlparse"] = urlparse_module.urlparse
        # Both names: URL() calls the first, URL.copy_with (base_url + path) the second.
        urls_module.urlparse = urlparse_module.urlparse = _urlparse
    _originals["extract_cookies"] = httpx.Cookies.extract_cookies
    httpx.Cookies.extract_cookies = _extract_cookies  # type: ignore[method-assign]


# requests -----------------------------------------------------------------------------------

def _install_requests() -> None:
    import requests

    class WorldAdapter(requests.adapters.BaseAdapter):
        """A requests transport adapter onto the routed world (see the module doc)."""

        def __init__(self, host: str, routes: WorldRoutes) -> None:
            super().__init__()
            self.host = host
            self.routes = routes

        def send(self, request: requests.PreparedRequest, stream: bool = False,
                 timeout: Any = None, verify: Any = True, cert: Any = None,
                 proxies: Any = None) -> requests.Response:
            url = request.url or ""
            parts = urlsplit(url)
            if parts.hostname != self.host:
                raise requests.ConnectionError(_outside(url), request=request)
            status, payload = self.routes.serve_now(parts.path, _body_bytes(request.body))
            if status == NO_ANSWER:
                raise requests.ReadTimeout(f"the world left {parts.path} unanswered",
                                           request=request)
            response = requests.Response()
            response.status_code = status
            response.reason = http.HTTPStatus(status).phrase
            content = json.dumps(payload).encode()
            response._content = content
            # Read already, as after a non-streamed request: `iter_content` replays it.
            response._content_consumed = True
            response.raw = io.BytesIO(content)
            response.headers = requests.structures.CaseInsensitiveDict(
                {"Content-Type": "application/json", **(_retry_after(payload) or {})})
            response.encoding = "utf-8"
            response.url = url
            response.request = request
            response.connection = self  # type: ignore[assignment]
            return response

        def close(self) -> None:
            # Nothing to release: no socket or pool was opened, the world is in-process.
            return None

    def _body_bytes(body: Any) -> bytes:
        # What requests may carry: bytes or text (json=, data=), a file, or chunks.
        if body is None:
            return b""
        if isinstance(body, str):
            return body.encode()
        if isinstance(body, bytes):
            return body
        if hasattr(body, "read"):
            return _body_bytes(body.read())
        return b"".join(c.encode() if isinstance(c, str) else bytes(c) for c in body)

    def get_adapter(self: requests.Session, url: str) -> requests.adapters.BaseAdapter:
        route = _route()
        if route is None:
            adapter: requests.adapters.BaseAdapter = _originals["get_adapter"](self, url)
            return adapter
        host, transport = route
        return WorldAdapter(host, transport.routes)

    _originals["get_adapter"] = requests.Session.get_adapter
    requests.Session.get_adapter = get_adapter  # type: ignore[method-assign]


# aiohttp: its client needs a running asyncio loop (timers, the connector), which a simulated
# handler does not have; refused by name rather than failing deep inside asyncio.

def _install_aiohttp() -> None:
    import aiohttp

    original_init = aiohttp.ClientSession.__init__
    original_request = aiohttp.ClientSession._request

    def init(self: aiohttp.ClientSession, *args: Any, **kwargs: Any) -> None:
        if _route() is not None:
            raise _refused("aiohttp.ClientSession", kwargs.get("base_url") or "the world")
        original_init(self, *args, **kwargs)

    def request(self: aiohttp.ClientSession, method: str, url: Any,
                *args: Any, **kwargs: Any) -> Coroutine[Any, Any, Any]:
        if _route() is not None:
            raise _refused("aiohttp", url)
        result: Coroutine[Any, Any, Any] = original_request(self, method, url, *args, **kwargs)
        return result

    aiohttp.ClientSession.__init__ = init  # type: ignore[method-assign]
    aiohttp.ClientSession._request = request  # type: ignore[method-assign,assignment]


# Anything else: the last line before a real network call.

def _install_socket_guard() -> None:
    original_getaddrinfo = socket.getaddrinfo
    original_create_connection = socket.create_connection
    original_connect = socket.socket.connect

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if _route() is not None:
            raise _refused("a network connection (urllib, http.client, a socket)", host)
        return original_getaddrinfo(host, *args, **kwargs)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        if _route() is not None:
            raise _refused("a network connection (urllib, http.client, a socket)", address)
        return original_create_connection(address, *args, **kwargs)

    def connect(self: socket.socket, address: Any) -> None:
        if _route() is not None and self.family in (socket.AF_INET, socket.AF_INET6):
            raise _refused("a network connection (a socket)", address)
        original_connect(self, address)

    socket.getaddrinfo = getaddrinfo
    socket.create_connection = create_connection
    socket.socket.connect = connect  # type: ignore[method-assign,assignment]
