"""The simulator's state: deployments, hosts, invocations, attempts and journal entries.

Identity objects (mutable, compared by identity); the values they hand out are frozen.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

from contract.binding import App

InvocationStatus = Literal[
    "queued", "scheduled", "running", "suspended", "backing-off", "completed", "paused"
]


@dataclass(eq=False, slots=True)
class Host:
    id: str
    deployment: Deployment
    paused: bool = False
    crashed: bool = False
    # Work that became ready while the host was paused: (attempt, value, exception).
    parked: list[tuple[Attempt, Any, BaseException | None]] = field(default_factory=list)

    @property
    def available(self) -> bool:
        return not self.paused and not self.crashed


@dataclass(eq=False, slots=True)
class Deployment:
    id: str
    app: App
    registered_at: float
    hosts: list[Host] = field(default_factory=list)
    superseded_at: float | None = None
    drained_at: float | None = None
    pinned: int = 0
    # Invocations waiting for any host of this deployment to come back.
    waiting: deque[Invocation] = field(default_factory=deque)


@dataclass(eq=False, slots=True)
class Entry:
    """One journal entry. Completable entries (sleep, awakeable, call, select) start open."""

    kind: str
    name: str
    done: bool = False
    value: Any = None
    error: str | None = None
    order: int = 0  # global completion order, so a replayed race picks the same winner
    listeners: list[Callable[[Entry], None]] = field(default_factory=list)

    def complete(self, value: Any = None, error: str | None = None, order: int = 0) -> None:
        if self.done:
            return
        self.done, self.value, self.error, self.order = True, value, error, order
        listeners, self.listeners = self.listeners, []
        for listener in listeners:
            listener(self)


@dataclass(eq=False, slots=True)
class Invocation:
    id: str
    service: str
    handler: str
    key: str | None
    arg: Any
    created_at: float
    caller: tuple[Invocation, Entry] | None = None
    status: InvocationStatus = "scheduled"
    deployment: Deployment | None = None
    journal: list[Entry] = field(default_factory=list)
    attempt: Attempt | None = None
    attempts: int = 0
    started_at: float | None = None
    suspended_since: float | None = None
    completed_at: float | None = None
    result: Any = None
    error: str | None = None
    exclusive: bool = True
    retry_timer: Any = None

    @property
    def target(self) -> str:
        return f"{self.service}/{self.handler}"

    @property
    def object_key(self) -> tuple[str, str] | None:
        return (self.service, self.key) if self.key is not None else None


@dataclass(eq=False, slots=True)
class Attempt:
    invocation: Invocation
    number: int
    host: Host
    coro: Coroutine[Any, Any, Any] | None = None
    cursor: int = 0
    # The journal entry this attempt is blocked on, if any.
    waiting_on: Entry | None = None
    # True while the attempt has work that is not a journal wait (I/O, a fault point).
    busy: bool = False
    stale: bool = False
    abort_timer: Any = None
