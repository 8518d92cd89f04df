"""What a runtime gets from outside: endpoints, never the harness.

The harness owns the world (model provider, email outbox, charge ledger, identity, tool
catalog, the approval UI) and hands the runtime only these endpoints. On the simulator they are
in-process objects whose awaits take virtual time; on the real path they are HTTP clients.

Observations: the reference implementation reports what it does through `Observer.emit`,
always from inside a journaled `ctx.run` step, so an emit may repeat when a step is retried
(at-least-once). Every emit carries a deterministic `event_id`; consumers deduplicate on it.
The vocabulary is `contract.records` (docs/events.md); checkers read exactly its kinds and
fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from contract import records
from contract.services import ServiceError
from contract.threadlog import ThreadLogStore
from contract.thresholds import HAND_OFF_AFTER, MAX_STEPS_PER_TURN, MAX_WAIT

# kind -> the fields it always carries (besides event_id): a view of the vocabulary in
# `contract.records` (docs/events.md), kept for code that imported it from here.
EVENTS: Final[dict[str, tuple[str, ...]]] = records.observations()


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    needs_approval: bool
    effect: str | None  # "email" | "charge" | None (pure)


class ModelProvider(Protocol):
    async def complete(
        self, *, session: str, turn: str, step: int, messages: list[dict[str, Any]],
        idempotency_key: str,
    ) -> dict[str, Any]:
        """Returns {"text": str} or {"tool_call": {"id": str, "name": str, "args": dict}}.

        Raises ProviderError on 500/429/timeout: the caller retries with the same key, and
        a retry of a completion already produced and billed is not billed again. A 200
        whose body is `{"error": ...}` is a failure too (`contract.services.body_error`).
        """
        ...


class ProviderError(ServiceError):
    """The model provider failed; it may or may not have done the work (retry same key)."""


# Every world endpoint below fails the same ways (`contract.services.SERVICE_FAULTS`): it
# raises `ServiceError`, or answers a body that `body_error` reads as an error.


class Mailer(Protocol):
    async def send_email(
        self, *, message_id: str, to: str, subject: str, body: str, tool_call: str
    ) -> dict[str, Any]: ...


class Payments(Protocol):
    async def charge(
        self, *, idempotency_key: str, amount: int, tool_call: str
    ) -> dict[str, Any]: ...


class Identity(Protocol):
    async def has_access(self, user: str, tool: str) -> bool: ...


class ToolCatalog(Protocol):
    async def lookup(self, name: str) -> ToolSpec | None: ...


class ApprovalUI(Protocol):
    """The card a person sees; answers come back as PendingToolCall.answer(tool_call)."""

    async def show_card(
        self, *, session: str, turn: str, tool_call: str, tool: str, args: dict[str, Any]
    ) -> None: ...

    async def close_card(self, *, tool_call: str, outcome: str) -> None: ...


class TimerPort(Protocol):
    """Durable time kept outside the engine: the harness's virtual clock on a real engine.

    Restate has no time skipping, so an engine binding can hand its timers to this port
    instead: `now` is the clock's time; `sleep` asks the port to resolve awakeable
    `awakeable` once the clock passes `seconds` from now; `send` asks it to make a one-way
    call once the clock passes `seconds` from now. `timer_id` makes both idempotent: a
    registration retried by the engine (a step run again after a crash) registers nothing
    new. Both return the deadline, in the clock's seconds.
    """

    async def now(self) -> float: ...

    async def sleep(self, *, timer_id: str, awakeable: str, seconds: float,
                    invocation: str) -> float: ...

    async def send(self, *, timer_id: str, service: str, handler: str, key: str | None,
                   arg: Any, seconds: float) -> float: ...


class Observer(Protocol):
    def emit(self, kind: str, *, event_id: str, **fields: Any) -> None: ...


class NullObserver:
    def emit(self, kind: str, *, event_id: str, **fields: Any) -> None:
        return None


@dataclass(frozen=True)
class Config:
    """Thresholds, in the engine's seconds (virtual time on the simulator and, through a
    `TimerPort`, on a real engine too: the same 5 minutes and 8 days everywhere)."""

    hand_off_after: float = HAND_OFF_AFTER
    max_wait: float = MAX_WAIT
    max_steps_per_turn: int = MAX_STEPS_PER_TURN


@dataclass(frozen=True)
class Ports:
    model: ModelProvider
    mailer: Mailer
    payments: Payments
    identity: Identity
    catalog: ToolCatalog
    ui: ApprovalUI
    threadlog: ThreadLogStore
    observer: Observer = field(default_factory=NullObserver)
    config: Config = field(default_factory=Config)
