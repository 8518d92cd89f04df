"""The world the runtime under test acts on, owned by the harness.

A fake model provider (whose faults include "500 after the completion was produced and
billed", 429 and timeouts), an email outbox and a charge ledger that record every delivery
with its key, identity and the tool catalog, and the approval UI where the person answers.
The runtime only gets endpoints (`contract.ports.Ports`). Everything the world sees goes
into the history, so checkers judge what reached the world, not what the runtime believes.

This module holds the in-process world for the simulator: its awaits take virtual time
(`Simulator.io`). The real path serves the same `FakeProvider` logic over HTTP.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from contract import records as vocabulary
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
from contract.threadlog import ThreadLogStore
from harness.history import History

# The provider faults a schedule may inject: the vocabulary's value set of provider.fault.
PROVIDER_FAULTS: Final = vocabulary.PROVIDER_FAULTS

DEFAULT_TOOLS: Final[dict[str, ToolSpec]] = {
    "send_email": ToolSpec("send_email", needs_approval=True, effect="email"),
    "charge_card": ToolSpec("charge_card", needs_approval=True, effect="charge"),
    "lookup": ToolSpec("lookup", needs_approval=False, effect=None),
    "notify": ToolSpec("notify", needs_approval=False, effect="email"),
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


@dataclass
class WorldState:
    """What the world has seen; shared by every endpoint of one run."""

    history: History
    now: Callable[[], float]
    sleep: Sleep
    delivered: dict[str, Any] = field(default_factory=dict)  # effect key -> response
    revoked: set[tuple[str, str]] = field(default_factory=set)
    cards: dict[str, Card] = field(default_factory=dict)
    provider_faults: deque[str] = field(default_factory=deque)
    tools: dict[str, ToolSpec] = field(default_factory=lambda: dict(DEFAULT_TOOLS))

    def deliver(
        self, effect: str, key: str | None, logical: str, response: Any, **fields: Any
    ) -> tuple[bool, Any]:
        """Deliver an effect once per key: a retry with a delivered key is a no-op.

        A request without a key (None or "") is delivered every time: like a real provider,
        the world cannot tell a keyless retry from a new request, and treating "no key" as one
        shared key would hide every keyless duplicate (and merge unrelated ones).
        """
        key = key or None
        data = {"effect": effect, "logical": logical}
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


class FakeProvider:
    """A model provider driven by the plan in the user's message.

    The model calls the plan's tools in order (tool call ids `{turn}.t{k}`), then answers
    with text. A completion is billed once per idempotency key.
    """

    def __init__(self, world: WorldState, latency: float = 2.0, timeout: float = 30.0) -> None:
        self.world = world
        self.latency = latency
        self.timeout = timeout

    def inject(self, fault: str, times: int = 1) -> None:
        if fault not in PROVIDER_FAULTS:
            raise ValueError(f"unknown provider fault {fault!r}; known: {PROVIDER_FAULTS}")
        self.world.provider_faults.extend([fault] * times)

    async def complete(
        self, *, session: str, turn: str, step: int, messages: list[dict[str, Any]],
        idempotency_key: str,
    ) -> dict[str, Any]:
        world = self.world
        await world.sleep(self.latency)
        fault = world.provider_faults.popleft() if world.provider_faults else None
        if fault is not None:
            world.history.add("provider.fault", session=session, turn=turn,
                              key=idempotency_key, data={"fault": fault})
        if fault in ("500_before", "429"):
            raise ProviderError(f"provider returned {fault[:3]} for {idempotency_key}")
        if fault == "timeout":
            await world.sleep(self.timeout)
            raise ProviderError(f"provider timed out for {idempotency_key}")
        _, response = world.deliver(
            "model", idempotency_key, f"{turn}:{step}", plan_response(turn, messages),
            session=session, turn=turn,
        )
        if fault == "500_after_billed":
            raise ProviderError(f"provider returned 500 after billing {idempotency_key}")
        return dict(response)


def plan_response(turn: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The scripted model: next planned tool call after the last user message, else text."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    plan: list[Any] = list(messages[last_user].get("plan") or []) if last_user >= 0 else []
    done = sum(1 for m in messages[last_user + 1:] if m.get("role") == "tool")
    if done < len(plan):
        item = plan[done]
        name = item if isinstance(item, str) else str(item.get("tool"))
        args = {} if isinstance(item, str) else dict(item.get("args") or {})
        return {"tool_call": {"id": f"{turn}.t{done + 1}", "name": name, "args": args}}
    return {"text": f"done after {done} tool call(s)"}


class Outbox:
    def __init__(self, world: WorldState, latency: float = 0.5) -> None:
        self.world = world
        self.latency = latency

    async def send_email(
        self, *, message_id: str, to: str, subject: str, body: str, tool_call: str
    ) -> dict[str, Any]:
        await self.world.sleep(self.latency)
        _, response = self.world.deliver(
            "email", message_id, tool_call, {"message_id": message_id, "status": "sent"},
            tool_call=tool_call,
        )
        return dict(response)


class Ledger:
    def __init__(self, world: WorldState, latency: float = 0.5) -> None:
        self.world = world
        self.latency = latency

    async def charge(self, *, idempotency_key: str, amount: int, tool_call: str) -> dict[str, Any]:
        await self.world.sleep(self.latency)
        _, response = self.world.deliver(
            "charge", idempotency_key, tool_call,
            {"charge_id": f"ch_{idempotency_key}", "amount": amount}, tool_call=tool_call,
        )
        return dict(response)


class Directory:
    """Identity and tool catalog: who may use which tool, re-resolved on every re-run."""

    def __init__(self, world: WorldState) -> None:
        self.world = world

    async def has_access(self, user: str, tool: str) -> bool:
        return (user, tool) not in self.world.revoked and (user, "*") not in self.world.revoked

    async def lookup(self, name: str) -> ToolSpec | None:
        return self.world.tools.get(name)

    def revoke(self, user: str, tool: str = "*") -> None:
        self.world.revoked.add((user, tool))
        self.world.history.add("identity.revoked", data={"user": user, "tool": tool})

    def grant(self, user: str, tool: str = "*") -> None:
        self.world.revoked.discard((user, tool))
        self.world.history.add("identity.granted", data={"user": user, "tool": tool})


class CardBoard:
    """The approval UI: cards the runtime shows and the person answers."""

    def __init__(self, world: WorldState) -> None:
        self.world = world
        # Called with each card as it is shown and as it is closed, at that moment (an engine
        # observer records the card there, so it comes before any answer to it).
        self.listeners: list[Callable[[Card], None]] = []

    async def show_card(
        self, *, session: str, turn: str, tool_call: str, tool: str, args: dict[str, Any]
    ) -> None:
        self.show(session=session, turn=turn, tool_call=tool_call, tool=tool)

    async def close_card(self, *, tool_call: str, outcome: str) -> None:
        self.close(tool_call, outcome)

    def show(self, *, session: str, turn: str, tool_call: str, tool: str) -> Card:
        """Show a card (once per tool call); returns it."""
        card = self.world.cards.get(tool_call)
        if card is None:
            card = Card(session, turn, tool_call, tool, self.world.now())
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
        card.closed = outcome
        for listener in list(self.listeners):
            listener(card)
        return True

    def open_cards(self, session: str) -> list[Card]:
        return [c for c in self.world.cards.values() if c.session == session and not c.closed]


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


class World:
    """The whole world of one run, with the endpoints handed to the runtime."""

    def __init__(
        self,
        history: History,
        *,
        now: Callable[[], float],
        sleep: Sleep,
        observe: Callable[..., Any] | None = None,
        model_latency: float = 2.0,
        effect_latency: float = 0.5,
    ) -> None:
        self.state = WorldState(history, now, sleep)
        self.provider = FakeProvider(self.state, model_latency)
        self.outbox = Outbox(self.state, effect_latency)
        self.ledger = Ledger(self.state, effect_latency)
        self.directory = Directory(self.state)
        self.cards = CardBoard(self.state)
        self.observer: Observer = HistoryObserver(observe or history.add)

    # -- for apps that keep their own effects (they do not call the world over HTTP; their
    # adapter feeds it what they did, e.g. through `harness.effects.EffectsFile`)

    def deliver(self, effect: str, key: str | None, *, tool_call: str | None = None,
                turn: str | None = None, session: str | None = None) -> bool:
        """Record that the app delivered `effect` ("email", "charge", ...) under idempotency
        `key` for `tool_call`; False when `key` was delivered before (a deduplicated retry).
        A keyless delivery counts every time."""
        fields = {k: v for k, v in (("tool_call", tool_call), ("turn", turn),
                                    ("session", session)) if v is not None}
        delivered, _ = self.state.deliver(effect, key, tool_call or turn or "", {}, **fields)
        return delivered

    def show_card(self, *, session: str, turn: str, tool_call: str, tool: str) -> Card:
        """The app showed an approval card (once per tool call)."""
        return self.cards.show(session=session, turn=turn, tool_call=tool_call, tool=tool)

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
