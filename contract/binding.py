"""The narrow binding between handler code and a durable-execution engine.

Handlers are written against `Context`, whose method names and meaning mirror restate-sdk's
(`run`, `sleep`, `awakeable`, `service_call`, `object_call`, `object_send`, `get`/`set`/
`clear`, `key`), so the same code runs on the embedded simulator and on a real Restate server.
Two things the SDK does not give portably live here too: `select` (restate.select only accepts
SDK futures, so each engine implements the race itself) and `host` (which process runs this
attempt: the thread log's owner identity).

An application is plain data (`App` of `Service`s of `Handler`s), so each engine can register
it its own way. Arguments, results and state are JSON values.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, Protocol, TypeVar

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

JSON = Any


class TerminalError(Exception):
    """A failure that must not be retried: the invocation completes with this error."""

    def __init__(self, message: str, status_code: int = 500) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code


class DurableFuture(Protocol[T_co]):
    def __await__(self) -> Generator[Any, Any, T_co]: ...


@dataclass(frozen=True, slots=True)
class HandlerRef:
    """Names a handler of another service or virtual object."""

    service: str
    handler: str

    def __str__(self) -> str:
        return f"{self.service}/{self.handler}"


class Context(Protocol):
    """What a handler may do. Everything that is not here is outside the journal."""

    def key(self) -> str:
        """The virtual object's key (objects only)."""
        ...

    def invocation_id(self) -> str: ...

    def host(self) -> str:
        """The process running this attempt; changes when the attempt moves."""
        ...

    def run(self, name: str, action: Callable[[], Awaitable[T] | T]) -> Awaitable[T]:
        """Journaled side effect: a completed one is never re-executed on replay."""
        ...

    def sleep(self, delta: timedelta) -> DurableFuture[None]: ...

    def awakeable(self) -> tuple[str, DurableFuture[JSON]]: ...

    def resolve_awakeable(self, awakeable_id: str, value: JSON) -> None: ...

    def reject_awakeable(self, awakeable_id: str, reason: str) -> None: ...

    def service_call(self, target: HandlerRef, arg: JSON) -> DurableFuture[JSON]: ...

    def object_call(self, target: HandlerRef, key: str, arg: JSON) -> DurableFuture[JSON]: ...

    def service_send(
        self, target: HandlerRef, arg: JSON, send_delay: timedelta | None = None
    ) -> None: ...

    def object_send(
        self, target: HandlerRef, key: str, arg: JSON, send_delay: timedelta | None = None
    ) -> None: ...

    def get(self, name: str) -> Awaitable[JSON | None]: ...

    def set(self, name: str, value: JSON) -> None: ...

    def clear(self, name: str) -> None: ...

    def select(self, **futures: DurableFuture[Any]) -> Awaitable[tuple[str, Any]]:
        """Race durable futures; returns (name, result) of the first to complete.

        A future that completed with an error raises it from here.
        """
        ...

    def time(self) -> Awaitable[float]:
        """Journaled engine time in seconds (virtual on the simulator)."""
        ...


HandlerFn = Callable[[Context, JSON], Awaitable[JSON]]


@dataclass(frozen=True, slots=True)
class Handler:
    name: str
    fn: HandlerFn
    kind: Literal["exclusive", "shared"] = "exclusive"
    # Callable only by the app's own services: the engine's ingress refuses it (Restate's
    # `ingress_private`). A handler another service calls with a body it built, and that a
    # client calling it directly could forge (a tool's result, the end of a wait), is private.
    private: bool = False


@dataclass(frozen=True, slots=True)
class Service:
    name: str
    handlers: tuple[Handler, ...]
    kind: Literal["service", "object"] = "service"

    def handler(self, name: str) -> Handler:
        for handler in self.handlers:
            if handler.name == name:
                return handler
        raise KeyError(f"{self.name} has no handler {name!r}")


@dataclass(frozen=True, slots=True)
class App:
    """One deployable version of an application: its services and a version label."""

    version: str
    services: tuple[Service, ...] = field(default_factory=tuple)

    def service(self, name: str) -> Service:
        for service in self.services:
            if service.name == name:
                return service
        raise KeyError(f"app {self.version} has no service {name!r}")
