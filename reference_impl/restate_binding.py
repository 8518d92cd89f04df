"""The binding's `Context` on restate-sdk, and an `App` as restate services.

`RestateContext` wraps the SDK's `Context`/`ObjectContext` so handler code written against
`contract.binding.Context` runs unchanged on a real Restate server:

- `run` -> `ctx.run_typed` with an async action (a sync action's result is awaited if needed);
- calls and sends -> `ctx.generic_call` / `ctx.generic_send` with JSON bodies;
- `select` -> `restate.select` over the underlying SDK futures (it only accepts those), with
  call results decoded from JSON afterwards;
- `time` -> a journaled run of the wall clock; `host` -> the worker's name from
  `DURABLE_CHAOS_HOST` (the thread log's owner identity).

Durable time can live outside Restate, which has no time skipping: given a `TimerPort`
(`asgi_app(app, timers=port)`), `time` is a journaled read of the port's clock, `sleep` is an
awakeable that the port resolves once its clock passes the deadline (registered in a
journaled step, so a replay registers nothing new), and a delayed send is a registration the
port turns into the one-way call at its deadline. Journals, suspension and pinning stay
Restate's own; only the passing of time comes from the port (the harness's virtual clock,
which jumps when nothing runs, so an 8-day wait costs seconds).

`to_restate(app)` turns the plain `App` data into `restate.Service` / `restate.VirtualObject`
objects; `asgi_app(app)` is the ASGI application a worker serves.
"""

from __future__ import annotations

import inspect
import json
import os
import time
from collections.abc import Awaitable, Callable, Generator
from datetime import timedelta
from typing import Any, TypeVar, cast

import restate
from restate.serde import JsonSerde

from contract import binding
from contract.binding import JSON, App, DurableFuture, HandlerRef
from contract.ports import TimerPort

__all__ = ["HOST_ENV", "RestateContext", "asgi_app", "to_restate"]

HOST_ENV = "DURABLE_CHAOS_HOST"

T = TypeVar("T")

_JSON: JsonSerde[Any] = JsonSerde()


def _encode(value: JSON) -> bytes:
    return json.dumps(value).encode()


def _decode(raw: Any) -> JSON:
    if isinstance(raw, bytes | bytearray):
        return json.loads(raw) if raw else None
    return raw


class _Decoded:
    """An SDK future whose result is decoded before the handler sees it."""

    def __init__(self, inner: Any, decode: Callable[[Any], Any] = _decode) -> None:
        self.inner = inner
        self.decode = decode

    def __await__(self) -> Generator[Any, Any, Any]:
        raw = yield from self.inner.__await__()
        return self.decode(raw)


def _sdk_future(future: Any) -> Any:
    return future.inner if isinstance(future, _Decoded) else future


class _PortSleep:
    """A sleep kept by a `TimerPort`: its registration step, then the awakeable it resolves."""

    def __init__(self, registration: Any, awakeable: Any) -> None:
        self.registration = registration
        self.awakeable = awakeable

    def __await__(self) -> Generator[Any, Any, None]:
        yield from self.registration.__await__()
        yield from self.awakeable.__await__()
        return None


def _terminal(exc: binding.TerminalError) -> restate.TerminalError:
    return restate.TerminalError(exc.message, exc.status_code)


class RestateContext:
    """`binding.Context` over a restate-sdk context."""

    def __init__(self, ctx: Any, timers: TimerPort | None = None) -> None:
        self._ctx = ctx
        self._timers = timers
        # Registrations of delayed sends not yet awaited (sends are fire-and-forget in the
        # binding); the handler wrapper awaits them before the invocation ends.
        self._pending: list[Any] = []
        self._sends = 0

    def key(self) -> str:
        return str(self._ctx.key())

    def invocation_id(self) -> str:
        return str(self._ctx.request().id)

    def host(self) -> str:
        return os.environ.get(HOST_ENV, f"pid-{os.getpid()}")

    def run(self, name: str, action: Callable[[], Awaitable[T] | T]) -> Awaitable[T]:
        async def step() -> Any:
            try:
                result = action()
                if inspect.isawaitable(result):
                    result = await result
            except binding.TerminalError as exc:
                raise _terminal(exc) from exc
            return result

        future = self._ctx.run_typed(name, step, restate.RunOptions(serde=_JSON))
        return cast(Awaitable[T], future)

    def sleep(self, delta: timedelta) -> DurableFuture[None]:
        timers = self._timers
        if timers is None:
            return cast(DurableFuture[None], self._ctx.sleep(delta))
        awakeable_id, future = self._ctx.awakeable(serde=_JSON)
        invocation = self.invocation_id()

        async def register() -> float:
            # The awakeable's id is journaled, so a re-run of this step registers the same
            # timer and the port ignores it.
            return await timers.sleep(timer_id=str(awakeable_id), awakeable=str(awakeable_id),
                                      seconds=delta.total_seconds(), invocation=invocation)

        registration = self._ctx.run_typed(f"timer:{awakeable_id}", register,
                                           restate.RunOptions(serde=_JSON))
        return cast(DurableFuture[None], _PortSleep(registration, future))

    def _delayed_send(self, target: HandlerRef, key: str | None, arg: JSON,
                      send_delay: timedelta) -> None:
        timers = self._timers
        assert timers is not None
        # Handler code is deterministic, so the n-th delayed send of an invocation is the
        # same send on every attempt: its id survives a crash and a replay.
        self._sends += 1
        timer_id = f"{self.invocation_id()}/send{self._sends}"

        async def register() -> float:
            return await timers.send(timer_id=timer_id, service=target.service,
                                     handler=target.handler, key=key, arg=arg,
                                     seconds=send_delay.total_seconds())

        self._pending.append(self._ctx.run_typed(f"timer:{timer_id}", register,
                                                 restate.RunOptions(serde=_JSON)))

    async def flush(self) -> None:
        """Await the registrations of delayed sends (before the invocation ends)."""
        while self._pending:
            await self._pending.pop(0)

    def awakeable(self) -> tuple[str, DurableFuture[JSON]]:
        awakeable_id, future = self._ctx.awakeable(serde=_JSON)
        return str(awakeable_id), cast(DurableFuture[JSON], future)

    def resolve_awakeable(self, awakeable_id: str, value: JSON) -> None:
        self._ctx.resolve_awakeable(awakeable_id, value, serde=_JSON)

    def reject_awakeable(self, awakeable_id: str, reason: str) -> None:
        self._ctx.reject_awakeable(awakeable_id, reason)

    def service_call(self, target: HandlerRef, arg: JSON) -> DurableFuture[JSON]:
        inner = self._ctx.generic_call(target.service, target.handler, _encode(arg))
        return _Decoded(inner)

    def object_call(self, target: HandlerRef, key: str, arg: JSON) -> DurableFuture[JSON]:
        inner = self._ctx.generic_call(target.service, target.handler, _encode(arg), key=key)
        return _Decoded(inner)

    def service_send(
        self, target: HandlerRef, arg: JSON, send_delay: timedelta | None = None
    ) -> None:
        if send_delay is not None and self._timers is not None:
            self._delayed_send(target, None, arg, send_delay)
            return
        self._ctx.generic_send(target.service, target.handler, _encode(arg),
                               send_delay=send_delay)

    def object_send(
        self, target: HandlerRef, key: str, arg: JSON, send_delay: timedelta | None = None
    ) -> None:
        if send_delay is not None and self._timers is not None:
            self._delayed_send(target, key, arg, send_delay)
            return
        self._ctx.generic_send(target.service, target.handler, _encode(arg), key=key,
                               send_delay=send_delay)

    def get(self, name: str) -> Awaitable[JSON | None]:
        return cast(Awaitable[JSON | None], self._ctx.get(name, serde=_JSON))

    def set(self, name: str, value: JSON) -> None:
        self._ctx.set(name, value, serde=_JSON)

    def clear(self, name: str) -> None:
        self._ctx.clear(name)

    async def select(self, **futures: DurableFuture[Any]) -> tuple[str, Any]:
        for future in futures.values():
            if isinstance(future, _PortSleep):
                await future.registration
        inner = {name: (f.awakeable if isinstance(f, _PortSleep) else _sdk_future(f))
                 for name, f in futures.items()}
        name, raw = await restate.select(**inner)
        chosen = futures[name]
        value = chosen.decode(raw) if isinstance(chosen, _Decoded) else raw
        return str(name), value

    def time(self) -> Awaitable[float]:
        timers = self._timers
        if timers is not None:
            return self.run("time", timers.now)

        def now() -> float:
            return time.time()

        return self.run("time", now)


def _wrap(fn: binding.HandlerFn,
          timers: TimerPort | None) -> Callable[[Any, Any], Awaitable[Any]]:
    async def handler(ctx: Any, arg: Any) -> Any:
        context = RestateContext(ctx, timers)
        try:
            result = await fn(context, arg)
            await context.flush()
            return result
        except binding.TerminalError as exc:
            raise _terminal(exc) from exc

    return handler


def to_restate(app: App,
               timers: TimerPort | None = None) -> list[restate.Service | restate.VirtualObject]:
    """Each `Service` of the app as a restate service or virtual object (JSON in and out)."""
    out: list[restate.Service | restate.VirtualObject] = []
    for service in app.services:
        if service.kind == "object":
            obj = restate.VirtualObject(service.name)
            for h in service.handlers:
                obj.handler(name=h.name, kind=h.kind, input_serde=_JSON, output_serde=_JSON,
                            ingress_private=h.private or None)(_wrap(h.fn, timers))
            out.append(obj)
        else:
            svc = restate.Service(service.name)
            for h in service.handlers:
                svc.handler(name=h.name, input_serde=_JSON, output_serde=_JSON,
                            ingress_private=h.private or None)(_wrap(h.fn, timers))
            out.append(svc)
    return out


def asgi_app(app: App, timers: TimerPort | None = None) -> Any:
    """The ASGI application serving `app` (bidirectional protocol over HTTP/2 or HTTP/1.1);
    with `timers`, durable time is the port's (see the module docstring)."""
    return restate.app(to_restate(app, timers))
