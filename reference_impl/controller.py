"""Controller: one virtual object per session; decides when a turn runs.

State (virtual-object keys, named as in the source design):

- `activeTurnInvocationId`: the doTurn invocation running a turn of this session, if any
  (a token the controller mints when it dispatches the invocation; `activeTurn` is its turn);
- `waitingTurn`: {turnId, toolCallId, since}: a turn that waits on a person *as state*,
  with no invocation at all;
- `queue`: the FIFO of messages and background results that wait for their turn.

Busy rule: a session is busy when `activeTurnInvocationId or waitingTurn`; every decision
here goes through `_Decision.busy`. A message while a turn is active queues. A message while
a turn waits on a person ends that turn like a steer (its tool result becomes "ended by new
message") and the next item of the FIFO runs, so nobody queues behind a card that may never
be answered. Background results wait their turn in the FIFO.

The controller never awaits another invocation: it dispatches doTurn and PendingToolCall
with one-way sends and hears back through one-way handlers (`turnWaiting`, `turnDone`,
`toolFinished`), so it is never suspended and never blocks its own key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Final

from contract.binding import JSON, Context, Handler, HandlerRef, Service, TerminalError
from contract.ports import Ports
from reference_impl.effects import (
    CONTROLLER,
    DO_TURN,
    PENDING_BACKGROUND,
    PENDING_END_WAIT,
    Event,
    observe,
)

__all__ = ["STATE_KEYS", "ControllerState", "WaitingTurn", "build_controller_service"]


@dataclass(frozen=True, slots=True)
class WaitingTurn:
    turn: str
    tool_call: str
    since: float
    # No user: the resumed turn reads its person from the thread log (its `user` entry), the
    # one record of who asked, so a copy here could only disagree with it.

    def to_json(self) -> dict[str, Any]:
        return {"turnId": self.turn, "toolCallId": self.tool_call, "since": self.since}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> WaitingTurn:
        return cls(str(obj["turnId"]), str(obj["toolCallId"]), float(obj["since"]))


@dataclass(frozen=True, slots=True)
class ControllerState:
    active_turn_invocation_id: str | None = None
    active_turn: str | None = None
    waiting_turn: WaitingTurn | None = None
    queue: tuple[dict[str, Any], ...] = ()
    turns: int = 0  # turns started so far: the next turn id
    dispatches: int = 0  # doTurn invocations dispatched so far: the next token
    # Every turn the person cancelled: an active one stops at its next step or when it
    # would wait, and an answer to one of its calls is refused from then on (the turn and
    # PendingToolCall ask `isCancelled`), whether the turn still ran, waited in the call or
    # waited as state when the cancel came. One record of a cancel, never cleared: a second
    # flag for "the active turn must stop" could only disagree with it.
    cancelled_turns: tuple[str, ...] = ()
    # toolFinished that overtook its turn's turnWaiting (the answer raced the hand-off).
    early_results: tuple[dict[str, Any], ...] = ()
    # Tool results decided here (ended by message, cancelled) that the next turn writes to
    # the thread log: the thread has one writer per turn, the turn's invocation.
    unlogged: tuple[dict[str, Any], ...] = ()

    @property
    def busy(self) -> bool:
        return bool(self.active_turn_invocation_id or self.waiting_turn)


# Python attribute -> state key, in the order they are read.
STATE_KEYS: Final[dict[str, str]] = {
    "active_turn_invocation_id": "activeTurnInvocationId",
    "active_turn": "activeTurn",
    "waiting_turn": "waitingTurn",
    "queue": "queue",
    "turns": "turns",
    "dispatches": "dispatches",
    "cancelled_turns": "cancelledTurns",
    "early_results": "earlyResults",
    "unlogged": "unlogged",
}


def _to_json(state: ControllerState, attr: str) -> JSON:
    value = getattr(state, attr)
    if isinstance(value, WaitingTurn):
        return value.to_json()
    if attr == "cancelled_turns":
        return list(value)
    if isinstance(value, tuple):
        return [dict(item) for item in value]
    return value


async def _load(ctx: Context) -> ControllerState:
    values: dict[str, Any] = {}
    for attr, key in STATE_KEYS.items():
        raw = await ctx.get(key)
        if raw is None:
            continue
        if attr == "waiting_turn":
            values[attr] = WaitingTurn.from_json(raw)
        elif attr in ("queue", "early_results", "unlogged"):
            values[attr] = tuple(dict(item) for item in raw)
        elif attr == "cancelled_turns":
            values[attr] = tuple(str(turn) for turn in raw)
        else:
            values[attr] = raw
    return ControllerState(**values)


def _save(ctx: Context, before: ControllerState, after: ControllerState) -> None:
    empty = _EMPTY
    for attr in _FIELDS:
        if getattr(before, attr) == getattr(after, attr):
            continue
        if getattr(after, attr) == getattr(empty, attr):
            ctx.clear(STATE_KEYS[attr])
        else:
            ctx.set(STATE_KEYS[attr], _to_json(after, attr))


# Looked up once: `fields()` and a fresh empty state cost more than the comparisons they
# serve, on every call of the controller.
_FIELDS: Final = tuple(item.name for item in fields(ControllerState))
_EMPTY: Final = ControllerState()


@dataclass(frozen=True, slots=True)
class _Send:
    target: HandlerRef
    key: str | None
    arg: JSON


class _Decision:
    """One handler's decision: the new state, what to report, whom to tell.

    Built without side effects, then applied in a fixed order (report, save, send), so the
    journal is the same on every replay.
    """

    def __init__(self, session: str, state: ControllerState) -> None:
        self.session = session
        self.before = state
        self.state = state
        self.events: list[Event] = []
        self.sends: list[_Send] = []

    def emit(self, kind: str, event_id: str, **fields: Any) -> None:
        self.events.append(Event.of(kind, event_id, session=self.session, **fields))

    def send(self, target: HandlerRef, key: str | None, arg: JSON) -> None:
        self.sends.append(_Send(target, key, arg))

    async def apply(self, ctx: Context, ports: Ports, step: str) -> None:
        await observe(ctx, ports, step, *self.events)
        _save(ctx, self.before, self.state)
        for send in self.sends:
            if send.key is None:
                ctx.service_send(send.target, send.arg)
            else:
                ctx.object_send(send.target, send.key, send.arg)

    # -- the rules

    @property
    def busy(self) -> bool:
        return self.state.busy

    def _dispatch(self, turn: str, arg: dict[str, Any]) -> None:
        dispatches = self.state.dispatches + 1
        token = f"{turn}:inv{dispatches}"
        self.state = replace(self.state, active_turn_invocation_id=token, active_turn=turn,
                             dispatches=dispatches, waiting_turn=None)
        self.send(DO_TURN, None, {"session": self.session, "turn": turn, "token": token, **arg})

    def start_turn(self, item: dict[str, Any]) -> None:
        number = self.state.turns + 1
        turn = f"{self.session}.turn{number}"
        closed = [dict(c) for c in self.state.unlogged]
        self.state = replace(self.state, turns=number, unlogged=())
        self.emit("turn.started", f"turn.started:{turn}", turn=turn,
                  message=item["message_id"], origin=item["kind"])
        self._dispatch(turn, {"message": item, "closed": closed})

    def resume(self, waiting: WaitingTurn, finished: Mapping[str, Any]) -> None:
        outcome = str(finished["outcome"])
        self.emit("turn.resumed", f"turn.resumed:{waiting.tool_call}:{outcome}",
                  turn=waiting.turn, tool_call=waiting.tool_call, outcome=outcome,
                  since=waiting.since)
        self._dispatch(waiting.turn, {"resume": {
            "tool_call": waiting.tool_call, "tool": finished.get("tool", ""),
            "outcome": outcome, "result": finished.get("result"),
            "recorded": bool(finished.get("recorded", True)),
        }})

    def end_waiting(self, outcome: str, reason: str) -> None:
        waiting = self.state.waiting_turn
        assert waiting is not None
        tc = waiting.tool_call
        # The result itself is reported by the next turn when it writes it to the log: an
        # answer's re-run may be writing its own result meanwhile, and the first committed
        # one is the call's only final result.
        self.emit("turn.ended", f"turn.ended:{waiting.turn}", turn=waiting.turn,
                  reason=reason, tool_call=tc)
        closed = {"turn": waiting.turn, "tool_call": tc, "outcome": outcome,
                  "result": {"error": f"the turn was {reason} while waiting"}}
        self.state = replace(self.state, waiting_turn=None,
                             unlogged=(*self.state.unlogged, closed))
        # PendingToolCall ends the call's wait, or keeps it: a confirmation an approval's
        # re-run asked for after a hold outlives a new message (the approve won the call),
        # and a cancel ends it.
        self.send(PENDING_END_WAIT, tc, {"reason": outcome})

    def next(self) -> None:
        if self.busy or not self.state.queue:
            return
        head, *rest = self.state.queue
        self.state = replace(self.state, queue=tuple(rest))
        self.start_turn(head)

    def admit(self, item: dict[str, Any]) -> None:
        """Put an item at the end of the FIFO and run the head if the session is free."""
        self.state = replace(self.state, queue=(*self.state.queue, item))
        self.next()
        if any(q["message_id"] == item["message_id"] for q in self.state.queue):
            self.emit("message.queued", f"message.queued:{self.session}:{item['message_id']}",
                      message=item["message_id"], origin=item["kind"])


def _message_item(arg: Any) -> dict[str, Any]:
    if not isinstance(arg, Mapping) or not isinstance(arg.get("message_id"), str):
        raise TerminalError(
            "onMessage takes {'message_id': str, 'text': str, 'user': str, 'plan': list}, "
            f"got {arg!r}", 400,
        )
    return {"kind": "message", "message_id": arg["message_id"], "text": str(arg.get("text", "")),
            "user": str(arg.get("user", "")), "plan": list(arg.get("plan") or [])}


def _result_item(finished: Mapping[str, Any]) -> dict[str, Any]:
    """A background (or late) tool result, turned into a new message of the session."""
    tc, outcome = str(finished["tool_call"]), str(finished["outcome"])
    return {"kind": "tool_result", "message_id": f"result:{tc}:{outcome}",
            "text": f"{finished.get('tool', 'tool')} ({tc}) finished: {outcome}",
            "user": str(finished.get("user", "")), "plan": [], "tool_call": tc,
            "outcome": outcome, "result": finished.get("result")}


def build_controller_service(ports: Ports) -> Service:
    async def decide(ctx: Context) -> _Decision:
        return _Decision(ctx.key(), await _load(ctx))

    async def on_message(ctx: Context, arg: Any) -> JSON:
        item = _message_item(arg)
        d = await decide(ctx)
        d.emit("message.received", f"message.received:{d.session}:{item['message_id']}",
               message=item["message_id"], user=item["user"], origin="message")
        if not d.state.active_turn_invocation_id and d.state.waiting_turn is not None:
            d.end_waiting("ended_by_message", "steered")
        d.admit(item)
        await d.apply(ctx, ports, "observe.onMessage")
        return {"active": d.state.active_turn, "queued": len(d.state.queue)}

    async def turn_waiting(ctx: Context, arg: Any) -> JSON:
        d = await decide(ctx)
        if d.state.active_turn_invocation_id != arg["token"]:
            return {"status": "stale"}
        turn, tc = str(arg["turn"]), str(arg["tool_call"])
        waiting = WaitingTurn(turn, tc, float(arg["since"]))
        d.state = replace(d.state, active_turn_invocation_id=None, active_turn=None,
                          waiting_turn=waiting)
        early = [r for r in d.state.early_results if r["tool_call"] == tc]
        if turn in d.state.cancelled_turns:
            d.end_waiting("cancelled", "cancelled")
            d.next()
        elif early:
            d.state = replace(d.state, early_results=tuple(
                r for r in d.state.early_results if r["tool_call"] != tc))
            d.resume(waiting, early[0])
        elif any(item["kind"] == "message" for item in d.state.queue):
            # A message queued while the turn was active: now that the turn waits on a
            # person, the message ends it like a new message would.
            d.end_waiting("ended_by_message", "steered")
            d.next()
        await d.apply(ctx, ports, "observe.turnWaiting")
        return {"status": "waiting" if d.state.waiting_turn else "moved on"}

    async def turn_done(ctx: Context, arg: Any) -> JSON:
        d = await decide(ctx)
        if d.state.active_turn_invocation_id != arg["token"]:
            return {"status": "stale"}
        turn = str(arg["turn"])
        d.state = replace(
            d.state, active_turn_invocation_id=None, active_turn=None,
            early_results=tuple(r for r in d.state.early_results if r["turn"] != turn),
        )
        d.next()
        await d.apply(ctx, ports, "observe.turnDone")
        return {"status": "done"}

    async def tool_finished(ctx: Context, arg: Any) -> JSON:
        d = await decide(ctx)
        tc, outcome = str(arg["tool_call"]), str(arg["outcome"])
        background = bool(arg.get("background"))
        d.emit("tool.finished", f"tool.finished:{tc}:{outcome}", turn=arg["turn"],
               tool_call=tc, outcome=outcome, background=background,
               placeholder=bool(arg.get("placeholder")))
        waiting = d.state.waiting_turn
        if waiting is not None and waiting.tool_call == tc and not background:
            d.resume(waiting, arg)
            status = "resumed"
        elif d.state.active_turn == arg["turn"] and not background:
            # The answer overtook the turn's turnWaiting: keep it until that arrives.
            d.state = replace(d.state, early_results=(*d.state.early_results, dict(arg)))
            status = "early"
        elif background or outcome == "answered":
            # A background result, or the effect of a turn that ended meanwhile: the agent
            # must still learn of it, as a new message that waits its turn.
            item = _result_item(arg)
            d.emit("message.received", f"message.received:{d.session}:{item['message_id']}",
                   message=item["message_id"], user=item["user"], origin="tool_result")
            d.admit(item)
            status = "message"
        else:
            status = "ignored"
        await d.apply(ctx, ports, "observe.toolFinished")
        return {"status": status}

    async def background(ctx: Context, arg: Any) -> JSON:
        if not isinstance(arg, Mapping) or not isinstance(arg.get("tool_call"), str):
            raise TerminalError(f"background takes {{'tool_call': str}}, got {arg!r}", 400)
        # PendingToolCall knows the phase (in-call or waiting as state) and serialises this
        # with answers; it wakes the executor, or asks us (toolFinished) to resume the turn.
        ctx.object_send(PENDING_BACKGROUND, arg["tool_call"], {"session": ctx.key()})
        return {"status": "forwarded"}

    async def cancel(ctx: Context, arg: Any) -> JSON:
        d = await decide(ctx)
        turn: str | None = None
        if d.state.active_turn_invocation_id:
            # The turn asks between steps (and the wait it reports is ended) and stops
            # spending.
            turn = d.state.active_turn
            d.state = replace(d.state, cancelled_turns=(
                *d.state.cancelled_turns, *([turn] if turn else [])))
        elif d.state.waiting_turn is not None:
            turn = d.state.waiting_turn.turn
            d.state = replace(d.state, cancelled_turns=(*d.state.cancelled_turns, turn))
            d.end_waiting("cancelled", "cancelled")
            d.next()
        await d.apply(ctx, ports, "observe.cancel")
        return {"cancelled": turn}

    async def is_cancelled(ctx: Context, arg: Any) -> JSON:
        turn = arg["turn"]
        return turn in (await ctx.get("cancelledTurns") or ())

    async def status(ctx: Context, arg: Any) -> JSON:
        return {key: await ctx.get(key) for key in STATE_KEYS.values()}

    return Service(CONTROLLER, (
        Handler("onMessage", on_message),
        Handler("turnWaiting", turn_waiting),
        Handler("turnDone", turn_done),
        Handler("toolFinished", tool_finished),
        Handler("background", background),
        Handler("cancel", cancel),
        # Exclusive, not shared: a shared read runs beside a cancel the engine has accepted
        # but not yet run (its host paused), and would let an approval given after the
        # cancel through. As an exclusive call it queues behind that cancel.
        Handler("isCancelled", is_cancelled),
        Handler("status", status, kind="shared"),
    ), kind="object")
