"""The world the runtime under test acts on, owned by the harness.

A fake model provider, an email outbox and a charge ledger that record every delivery with
its key, identity and the tool catalog, and the approval UI where the person answers. Every
one of these services fails the ways real providers fail when a schedule says so (the table
is `contract.services.SERVICE_FAULTS`: 500 before or after the work, 429 with Retry-After, a
timeout after the work, a slow answer, a 200 whose body is an error); `Services.call` is the
one place that applies a fault to a call. The runtime only gets endpoints
(`contract.ports.Ports`). Everything the world sees goes into the history, so checkers judge
what reached the world, not what the runtime believes: an effect is recorded when it is
done, also when the caller then sees a failure.

This module holds the in-process world for the simulator: its awaits take virtual time
(`Simulator.io`). The real path serves the same logic over HTTP (`harness.world_server`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from contract.ports import (
    ApprovalUI,
    Config,
    Identity,
    Mailer,
    ModelProvider,
    Observer,
    Payments,
    Ports,
    ProviderError,
    ToolCatalog,
    ToolSpec,
)
from contract.services import (
    FAULT_NAMES,
    RETRY_AFTER,
    SERVICES,
    ServiceError,
    ServiceFault,
    fault_named,
)
from contract.threadlog import ThreadLogStore
from harness.history import History

T = TypeVar("T")

DEFAULT_TOOLS: Final[dict[str, ToolSpec]] = {
    "send_email": ToolSpec("send_email", needs_approval=True, effect="email"),
    "charge_card": ToolSpec("charge_card", needs_approval=True, effect="charge"),
    "lookup": ToolSpec("lookup", needs_approval=False, effect=None),
    "notify": ToolSpec("notify", needs_approval=False, effect="email"),
}
# What the scripted model asks a tool to do when a plan names only the tool, as a real model
# fills in a call's arguments: whom to email, how much to charge (cents). A runtime that
# shows a card with them must do what the card says (effect-authorized).
DEFAULT_ARGS: Final[Mapping[str, Mapping[str, Any]]] = {
    "send_email": {"to": "bob@example.com"},
    "notify": {"to": "bob@example.com"},
    "charge_card": {"amount": 100},
}

Sleep = Callable[[float], Awaitable[None]]


@dataclass
class Card:
    """An approval card as the person sees it."""

    session: str
    turn: str
    tool_call: str
    tool: str
    shown_at: float
    closed: str | None = None
    closed_at: float | None = None
    # What the card says the call will do (its arguments, as the runtime showed them): what
    # the person approves (`run.end` `shown`; effect-authorized compares the effect with it).
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class WorldState:
    """What the world has seen; shared by every endpoint of one run."""

    history: History
    now: Callable[[], float]
    sleep: Sleep
    delivered: dict[str, Any] = field(default_factory=dict)  # effect key -> response
    revoked: set[tuple[str, str]] = field(default_factory=set)
    cards: dict[str, Card] = field(default_factory=dict)
    tools: dict[str, ToolSpec] = field(default_factory=lambda: dict(DEFAULT_TOOLS))

    def deliver(
        self, effect: str, key: str | None, logical: str, response: Any,
        detail: dict[str, Any] | None = None, **fields: Any
    ) -> tuple[bool, Any]:
        """Deliver an effect once per key: a retry with a delivered key is a no-op.

        A request without a key (None or "") is delivered every time: like a real provider,
        the world cannot tell a keyless retry from a new request, and treating "no key" as one
        shared key would hide every keyless duplicate (and merge unrelated ones). `detail`
        goes into the records' data (what the delivery was, e.g. the tool call a model
        reply asked for).
        """
        key = key or None
        data = {"effect": effect, "logical": logical, **(detail or {})}
        self.history.add("effect.attempted", key=key, data=dict(data), **fields)
        if key is None:
            self.history.add("effect.delivered", key=None, data=data, **fields)
            return True, response
        if key in self.delivered:
            self.history.add("effect.deduplicated", key=key, data=dict(data), **fields)
            return False, self.delivered[key]
        self.delivered[key] = response
        self.history.add("effect.delivered", key=key, data=data, **fields)
        return True, response

    def deliveries(self, effect: str) -> list[str]:
        return [r.key or "" for r in self.history.of_kind("effect.delivered")
                if r.data.get("effect") == effect]


class Services:
    """The faults a schedule injected into the world's services, and how a call meets them.

    Each service has a queue of faults: its next calls meet them in order, one each. A 429
    also throttles the service for `retry_after` seconds: a call before that gets 429 again
    (as a rate-limited provider answers), so a caller that ignores Retry-After keeps failing.
    `timeout` is how long a call that gets no answer hangs, `slow` how late a slow answer
    comes (scenario seconds on the simulator, real seconds over HTTP).
    """

    def __init__(self, world: WorldState, timeout: float = 30.0, slow: float = 60.0,
                 retry_after: float = RETRY_AFTER,
                 clock: Callable[[], float] | None = None) -> None:
        self.world = world
        self.timeout = timeout
        self.slow = slow
        self.retry_after = retry_after
        # The throttle's clock: the world's (virtual) one on the simulator; real time over
        # HTTP, where a real engine retries in real seconds while virtual time stands still.
        self.clock = clock or world.now
        self._queued: dict[str, deque[ServiceFault]] = {}
        self._throttled_until: dict[str, float] = {}

    def inject(self, service: str, fault: str, times: int = 1) -> None:
        if service not in SERVICES:
            raise ValueError(f"unknown service {service!r}; known: {SERVICES}")
        try:
            kind = fault_named(fault)
        except KeyError:
            raise ValueError(f"unknown service fault {fault!r}; known: {FAULT_NAMES}") from None
        self._queued.setdefault(service, deque()).extend([kind] * times)

    def pending(self, service: str) -> int:
        """Faults injected into `service` that no call met yet."""
        return len(self._queued.get(service, ()))

    def _next(self, service: str) -> tuple[ServiceFault | None, bool]:
        """The fault the next call of `service` meets, and whether it is the throttle."""
        if self.clock() < self._throttled_until.get(service, float("-inf")):
            return fault_named("429"), True
        queued = self._queued.get(service)
        return (queued.popleft() if queued else None), False

    async def call(self, service: str, work: Callable[[], T], *, key: str | None = None,
                   session: str | None = None, turn: str | None = None,
                   tool_call: str | None = None, op: str | None = None) -> T | dict[str, Any]:
        """Do `work` (the service's own effect, recorded as it is done) under the next fault.

        Returns what `work` returns, or an error body (`{"error": ...}`) for a 200 that says
        error; raises `ServiceError` (`ProviderError` for the provider) for the others.
        """
        world = self.world
        fault, throttled = self._next(service)
        if fault is None:
            return work()
        data: dict[str, Any] = {"service": service, "fault": fault.name}
        if throttled:
            data["throttled"] = True
        if op is not None:
            # Which call of a service with several (the card service shows and closes): a
            # card shown by a call that then failed was still seen by the person.
            data["op"] = op
        # How long the call is held: a fault window the checkers know (a pin or a wait that
        # lasts through it is the fault's doing).
        held = {"slow": self.slow, "no-answer": self.timeout}.get(fault.presents)
        if held is not None:
            data["duration"] = held
        world.history.add("service.fault", session=session, turn=turn, tool_call=tool_call,
                          key=key, data=data)
        what = f"{service} {fault.meaning} ({key or tool_call or 'no key'})"
        error = ProviderError if service == "provider" else ServiceError
        if fault.presents == "body-error":
            return {"error": what}
        if fault.presents == "slow":
            await world.sleep(self.slow)
            return work()
        if not fault.done:
            retry_after = None
            if fault.status == 429:
                retry_after = self.retry_after
                if not throttled:
                    self._throttled_until[service] = self.clock() + retry_after
            raise error(f"{fault.status}: {what}", service=service, status=fault.status,
                        retry_after=retry_after)
        work()
        if fault.presents == "no-answer":
            await world.sleep(self.timeout)
            raise error(f"no answer: {what}", service=service, status=None)
        raise error(f"{fault.status}: {what}", service=service, status=fault.status)


# Virtual seconds the scripted model takes per reply: a message's first card shows this long
# after the message (the generator times its races at the hand-off by it).
MODEL_LATENCY: Final = 2.0


class FakeProvider:
    """A model provider driven by the plan in the user's message.

    The model calls the plan's tools in order (tool call ids `{turn}.t{k}`), then answers
    with text. A completion is billed once per idempotency key.
    """

    def __init__(self, world: WorldState, services: Services,
                 latency: float = MODEL_LATENCY) -> None:
        self.world = world
        self.services = services
        self.latency = latency

    def inject(self, fault: str, times: int = 1) -> None:
        self.services.inject("provider", fault, times)

    async def complete(
        self, *, session: str, turn: str, step: int, messages: list[dict[str, Any]],
        idempotency_key: str,
    ) -> dict[str, Any]:
        world = self.world
        await world.sleep(self.latency)

        def bill() -> Any:
            response = plan_response(turn, messages)
            # The tool call the reply asks for, on the record: whether the agent told the
            # model what came of its earlier calls is judged from it (context-kept).
            asked = response.get("tool_call")
            return world.deliver("model", idempotency_key, f"{turn}:{step}", response,
                                 {"asked": asked["id"]} if asked else None,
                                 session=session, turn=turn)[1]

        response = await self.services.call("provider", bill, key=idempotency_key,
                                            session=session, turn=turn)
        return dict(response)


def plan_response(turn: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The scripted model: next planned tool call after the last user message, else text."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    plan: list[Any] = list(messages[last_user].get("plan") or []) if last_user >= 0 else []
    done = sum(1 for m in messages[last_user + 1:] if m.get("role") == "tool")
    if done < len(plan):
        item = plan[done]
        name = item if isinstance(item, str) else str(item.get("tool"))
        args = dict(DEFAULT_ARGS.get(name, {})) if isinstance(item, str) else \
            dict(item.get("args") or {})
        return {"tool_call": {"id": f"{turn}.t{done + 1}", "name": name, "args": args}}
    return {"text": f"done after {done} tool call(s)"}


class Outbox:
    def __init__(self, world: WorldState, services: Services, latency: float = 0.5) -> None:
        self.world = world
        self.services = services
        self.latency = latency

    async def send_email(
        self, *, message_id: str, to: str, subject: str, body: str, tool_call: str
    ) -> dict[str, Any]:
        await self.world.sleep(self.latency)

        def send() -> Any:
            return self.world.deliver(
                "email", message_id, tool_call, {"message_id": message_id, "status": "sent"},
                {"to": to}, tool_call=tool_call)[1]

        return dict(await self.services.call("email", send, key=message_id,
                                             tool_call=tool_call))


class Ledger:
    def __init__(self, world: WorldState, services: Services, latency: float = 0.5) -> None:
        self.world = world
        self.services = services
        self.latency = latency

    async def charge(self, *, idempotency_key: str, amount: int, tool_call: str) -> dict[str, Any]:
        await self.world.sleep(self.latency)

        def charge() -> Any:
            return self.world.deliver(
                "charge", idempotency_key, tool_call,
                {"charge_id": f"ch_{idempotency_key}", "amount": amount},
                {"amount": amount}, tool_call=tool_call)[1]

        return dict(await self.services.call("payments", charge, key=idempotency_key,
                                             tool_call=tool_call))


def _answer(response: Any, service: str) -> Any:
    """A port whose answer is not a dict has no body to carry an error: a 200 that says
    error is a `ServiceError` there (over HTTP the client reads the body the same way)."""
    if isinstance(response, dict) and "error" in response:
        raise ServiceError(f"200 with an error body: {response['error']}", service=service,
                           status=200)
    return response


class Directory:
    """Identity and tool catalog: who may use which tool, re-resolved on every re-run."""

    def __init__(self, world: WorldState, services: Services | None = None) -> None:
        self.world = world
        self.services = services or Services(world)

    async def has_access(self, user: str, tool: str) -> bool:
        def check() -> bool:
            revoked = self.world.revoked
            return (user, tool) not in revoked and (user, "*") not in revoked

        return bool(_answer(await self.services.call("identity", check), "identity"))

    async def lookup(self, name: str) -> ToolSpec | None:
        spec = await self.services.call("identity", lambda: self.world.tools.get(name))
        answer: ToolSpec | None = _answer(spec, "identity")
        return answer

    def revoke(self, user: str, tool: str = "*") -> None:
        self.world.revoked.add((user, tool))
        self.world.history.add("identity.revoked", data={"user": user, "tool": tool})

    def grant(self, user: str, tool: str = "*") -> None:
        self.world.revoked.discard((user, tool))
        self.world.history.add("identity.granted", data={"user": user, "tool": tool})


class CardBoard:
    """The approval UI: cards the runtime shows and the person answers."""

    def __init__(self, world: WorldState, services: Services | None = None) -> None:
        self.world = world
        self.services = services or Services(world)
        # Called with each card as it is shown and as it is closed, at that moment (an engine
        # observer records the card there, so it comes before any answer to it).
        self.listeners: list[Callable[[Card], None]] = []

    async def show_card(
        self, *, session: str, turn: str, tool_call: str, tool: str, args: dict[str, Any]
    ) -> None:
        def show() -> None:
            self.show(session=session, turn=turn, tool_call=tool_call, tool=tool, args=args)

        _answer(await self.services.call("cards", show, session=session, turn=turn,
                                         tool_call=tool_call, op="show"), "cards")

    async def close_card(self, *, tool_call: str, outcome: str) -> None:
        def close() -> None:
            self.close(tool_call, outcome)

        _answer(await self.services.call("cards", close, tool_call=tool_call, op="close"),
                "cards")

    def show(self, *, session: str, turn: str, tool_call: str, tool: str,
             args: Mapping[str, Any] | None = None) -> Card:
        """Show a card (once per tool call: the first showing's `args` stay); returns it."""
        card = self.world.cards.get(tool_call)
        if card is None:
            card = Card(session, turn, tool_call, tool, self.world.now(),
                        args=dict(args) if isinstance(args, Mapping) else {})
            # Recorded before anyone can see it open (a runner answers open cards).
            for listener in list(self.listeners):
                listener(card)
            self.world.cards[tool_call] = card
        return card

    def close(self, tool_call: str, outcome: str) -> bool:
        """Close an open card with `outcome` (answered, denied, expired); False if it was
        not open."""
        card = self.world.cards.get(tool_call)
        if card is None or card.closed is not None:
            return False
        card.closed, card.closed_at = outcome, self.world.now()
        for listener in list(self.listeners):
            listener(card)
        return True

    def open_cards(self, session: str) -> list[Card]:
        return [c for c in self.world.cards.values() if c.session == session and not c.closed]

    def board(self) -> dict[str, str | None]:
        """Every card shown, by tool call, with the outcome it was closed with (None: open):
        what the person sees at the end of a run (`run.end` carries it; `card-closed`)."""
        return {tc: card.closed for tc, card in sorted(self.world.cards.items())}

    def shown(self) -> dict[str, dict[str, Any]]:
        """What each card showed that the call would do, by tool call, for the cards that
        showed anything (`run.end` `shown`; effect-authorized)."""
        return {tc: dict(card.args) for tc, card in sorted(self.world.cards.items())
                if card.args}

    def closed_at(self) -> dict[str, float]:
        """When each closed card was closed, by tool call (`run.end` `closed_at`: the board
        keeps whether a card is closed, this keeps when; `cancel-honored`)."""
        return {tc: card.closed_at for tc, card in sorted(self.world.cards.items())
                if card.closed_at is not None}


class HistoryObserver:
    """Writes the runtime's observations into the history.

    The record's own fields (session, turn, tool_call, epoch, key) are named parameters, the
    rest of what the runtime says goes into `data`: Python sorts them out when it binds the
    call, with no dict built and taken apart again (a third of emit's cost, measured).
    """

    def __init__(self, add: Callable[..., Any]) -> None:
        self._add = add

    def emit(self, kind: str, *, event_id: str, session: str | None = None,
             turn: str | None = None, tool_call: str | None = None, epoch: Any = None,
             key: str | None = None, **fields: Any) -> None:
        self._add(kind, data={"event_id": event_id, **fields}, session=session, turn=turn,
                  tool_call=tool_call, epoch=None if epoch is None else int(epoch), key=key)


def record_card(history: History, card: Card, seen: dict[str, str | None]) -> None:
    """The records of a card's life, each once: `tool.awaiting` when it is first seen,
    `tool.result` with its outcome when it is first seen closed. `seen` (tool call -> the
    outcome recorded, None while open) is the caller's memory of what it recorded: an engine
    observer and the simulator's card watcher both record cards this way."""
    if card.tool_call not in seen:
        seen[card.tool_call] = None
        history.add("tool.awaiting", session=card.session, turn=card.turn,
                    tool_call=card.tool_call,
                    data={"event_id": f"{card.tool_call}.awaiting", "tool": card.tool})
    if card.closed is not None and seen[card.tool_call] is None:
        seen[card.tool_call] = card.closed
        history.add("tool.result", session=card.session, turn=card.turn,
                    tool_call=card.tool_call,
                    data={"event_id": f"{card.tool_call}.result", "outcome": card.closed})


class World:
    """The whole world of one run, with the endpoints handed to the runtime."""

    def __init__(
        self,
        history: History,
        *,
        now: Callable[[], float],
        sleep: Sleep,
        observe: Callable[..., Any] | None = None,
        model_latency: float = MODEL_LATENCY,
        effect_latency: float = 0.5,
    ) -> None:
        self.state = WorldState(history, now, sleep)
        self.services = Services(self.state)
        self.provider = FakeProvider(self.state, self.services, model_latency)
        self.outbox = Outbox(self.state, self.services, effect_latency)
        self.ledger = Ledger(self.state, self.services, effect_latency)
        self.directory = Directory(self.state, self.services)
        self.cards = CardBoard(self.state, self.services)
        self.observer: Observer = HistoryObserver(observe or history.add)

    # -- for apps that keep their own effects (they do not call the world over HTTP; their
    # adapter feeds it what they did, e.g. through `harness.effects.EffectsFile`)

    def deliver(self, effect: str, key: str | None, *, tool_call: str | None = None,
                turn: str | None = None, session: str | None = None,
                content: Mapping[str, Any] | None = None) -> bool:
        """Record that the app delivered `effect` ("email", "charge", ...) under idempotency
        `key` for `tool_call`; False when `key` was delivered before (a deduplicated retry).
        A keyless delivery counts every time. `content`: what it carried (an email's `to`, a
        charge's `amount`), compared with what its card showed."""
        fields: dict[str, Any] = {k: v for k, v in (("tool_call", tool_call), ("turn", turn),
                                                    ("session", session)) if v is not None}
        delivered, _ = self.state.deliver(effect, key, tool_call or turn or "", {},
                                          dict(content) if content else None, **fields)
        return delivered

    def show_card(self, *, session: str, turn: str, tool_call: str, tool: str,
                  args: Mapping[str, Any] | None = None) -> Card:
        """The app showed an approval card (once per tool call), with `args`: what it showed
        the call would do."""
        return self.cards.show(session=session, turn=turn, tool_call=tool_call, tool=tool,
                               args=args)

    def close_card(self, tool_call: str, outcome: str) -> bool:
        """The app closed a card: "answered", "denied" or "expired"."""
        return self.cards.close(tool_call, outcome)

    def ports(self, threadlog: ThreadLogStore, config: Config) -> Ports:
        model: ModelProvider = self.provider
        mailer: Mailer = self.outbox
        payments: Payments = self.ledger
        identity: Identity = self.directory
        catalog: ToolCatalog = self.directory
        ui: ApprovalUI = self.cards
        return Ports(model, mailer, payments, identity, catalog, ui, threadlog,
                     self.observer, config)
