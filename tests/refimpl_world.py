"""A small in-process world for the reference implementation's own tests.

It implements the `contract.ports` protocols on the simulator (every await of latency
is `sim.io(seconds)`) and writes what reaches the world into `sim.history`, so a test can
assert both the outcome and the recorded events:

- the model provider follows the plan of the turn's user message: the plan's tool calls in
  order (ids `{turn}.t{k}`), then text; it bills once per idempotency key, and can be told to
  fail ("500_after_billed": produce and bill the completion, then answer 500);
- the outbox and the ledger deliver once per key (`effect.delivered`), and record every
  attempt (`effect.attempted`) and every deduplicated retry (`effect.deduplicated`);
- identity (revocable access), the tool catalog, the approval cards;
- the observer maps the runtime's events to history records (session, turn, tool_call,
  epoch and key as record fields, the rest in `data`).

The harness's own world (`harness/world.py`) is the one adapters use; this one stays small and
stable so that these tests pin the reference implementation, not the world.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from contract.binding import App
from contract.ports import Config, Ports, ProviderError, ToolSpec
from contract.threadlog import LogEntry
from harness.history import Record
from harness.sim import Simulator
from reference_impl.threadlog import InMemoryThreadLogStore

TOOLS: Final[dict[str, ToolSpec]] = {
    "send_email": ToolSpec("send_email", needs_approval=True, effect="email"),
    "charge_card": ToolSpec("charge_card", needs_approval=True, effect="charge"),
    "lookup": ToolSpec("lookup", needs_approval=False, effect=None),
    "notify": ToolSpec("notify", needs_approval=False, effect="email"),
}

AppBuilder = Callable[[Ports, str], App]

_NAMED: Final = ("session", "turn", "tool_call", "epoch", "key")


@dataclass
class Card:
    session: str
    turn: str
    tool_call: str
    tool: str
    shown_at: float
    closed: str | None = None


def plan_response(turn: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The scripted model: the next planned tool call after the last user message, else text."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    plan: list[Any] = list(messages[last_user].get("plan") or []) if last_user >= 0 else []
    done = sum(1 for m in messages[last_user + 1:] if m.get("role") == "tool")
    if done < len(plan):
        item = plan[done]
        name = item if isinstance(item, str) else str(item.get("tool"))
        args = {} if isinstance(item, str) else dict(item.get("args") or {})
        return {"tool_call": {"id": f"{turn}.t{done + 1}", "name": name, "args": args}}
    return {"text": f"done after {done} tool call(s)"}


class RefWorld:
    def __init__(
        self, sim: Simulator, config: Config | None = None, *, model_latency: float = 2.0,
        effect_latency: float = 0.5,
    ) -> None:
        self.sim = sim
        self.config = config if config is not None else Config()
        self.model_latency = model_latency
        self.effect_latency = effect_latency
        self.tools = dict(TOOLS)
        self.revoked: set[tuple[str, str]] = set()
        self.delivered: dict[str, Any] = {}
        self.cards: dict[str, Card] = {}
        self.provider_faults: deque[str] = deque()
        self.store = InMemoryThreadLogStore(sim.clock.now)

    def ports(self) -> Ports:
        return Ports(self, self, self, self, self, self, self.store, self, self.config)

    def deploy(self, build: AppBuilder, version: str, hosts: int = 1) -> str:
        """Register `build(ports, version)` as the latest deployment; returns its id."""
        return self.sim.register(build(self.ports(), version), hosts=hosts).id

    def log(self, session: str) -> list[LogEntry]:
        """The committed thread log of `session`, read through the store's public `read`
        (it never suspends, so one send runs it to the end)."""
        reading = self.store.read(session)
        try:
            reading.send(None)
        except StopIteration as done:
            entries: list[LogEntry] = done.value
            return entries
        raise AssertionError("InMemoryThreadLogStore.read suspended")

    # -- observer

    def emit(self, kind: str, *, event_id: str, **fields: Any) -> None:
        named = {name: fields.pop(name) for name in _NAMED if name in fields}
        self.sim.observe(kind, data={"event_id": event_id, **fields}, **named)

    # -- deliveries

    def _deliver(self, effect: str, key: str, response: Any, **fields: Any) -> Any:
        self.sim.observe("effect.attempted", key=key, data={"effect": effect}, **fields)
        if key in self.delivered:
            self.sim.observe("effect.deduplicated", key=key, data={"effect": effect}, **fields)
            return self.delivered[key]
        self.delivered[key] = response
        self.sim.observe("effect.delivered", key=key, data={"effect": effect}, **fields)
        return response

    def deliveries(self, effect: str) -> list[Record]:
        return [r for r in self.sim.history.of_kind("effect.delivered")
                if r.data.get("effect") == effect]

    # -- model provider

    async def complete(
        self, *, session: str, turn: str, step: int, messages: list[dict[str, Any]],
        idempotency_key: str,
    ) -> dict[str, Any]:
        await self.sim.io(self.model_latency)
        fault = self.provider_faults.popleft() if self.provider_faults else None
        if fault == "500_before":
            raise ProviderError(f"500 before billing {idempotency_key}")
        response = self._deliver("model", idempotency_key, plan_response(turn, messages),
                                 session=session, turn=turn)
        if fault == "500_after_billed":
            raise ProviderError(f"500 after billing {idempotency_key}")
        return dict(response)

    # -- outbox, ledger

    async def send_email(
        self, *, message_id: str, to: str, subject: str, body: str, tool_call: str
    ) -> dict[str, Any]:
        await self.sim.io(self.effect_latency)
        return dict(self._deliver("email", message_id, {"message_id": message_id,
                                                        "status": "sent"},
                                  tool_call=tool_call))

    async def charge(self, *, idempotency_key: str, amount: int, tool_call: str) -> dict[str, Any]:
        await self.sim.io(self.effect_latency)
        return dict(self._deliver("charge", idempotency_key,
                                  {"charge_id": f"ch_{idempotency_key}", "amount": amount},
                                  tool_call=tool_call))

    # -- identity, catalog

    async def has_access(self, user: str, tool: str) -> bool:
        return (user, tool) not in self.revoked and (user, "*") not in self.revoked

    async def lookup(self, name: str) -> ToolSpec | None:
        return self.tools.get(name)

    def revoke(self, user: str, tool: str = "*") -> None:
        self.revoked.add((user, tool))
        self.sim.history.add("identity.revoked", data={"user": user, "tool": tool})

    # -- approval UI

    async def show_card(
        self, *, session: str, turn: str, tool_call: str, tool: str, args: dict[str, Any]
    ) -> None:
        card = self.cards.get(tool_call)
        if card is None or card.closed is not None:
            self.cards[tool_call] = Card(session, turn, tool_call, tool, self.sim.clock.now())

    async def close_card(self, *, tool_call: str, outcome: str) -> None:
        card = self.cards.get(tool_call)
        if card is not None and card.closed is None:
            card.closed = outcome


def start(build: AppBuilder, *, hosts: int = 1, config: Config | None = None, seed: int = 0,
          abort_timeout: float = 60.0, interleave: bool = True) -> tuple[Simulator, RefWorld]:
    """A simulator with the world and the first deployment (`build(ports, "v1")`).
    `interleave=False`: handlers ready at one instant run in the order they became ready (a
    story that needs one side of a same-instant race)."""
    sim = Simulator(seed=seed, abort_timeout=abort_timeout, interleave=interleave)
    world = RefWorld(sim, config)
    world.deploy(build, "v1", hosts)
    return sim, world
