"""Everything a handler does outside its own invocation, made safe to repeat.

A journaled step (`ctx.run`) runs at least once: a crash after the step acted and before its
journal entry was written runs it again. So every step that reaches outside carries a key
that makes the repeat a no-op:

- world effects (send email, charge, model call) carry an idempotency key derived from the
  tool call or the turn step, never from the attempt, so every retry carries the same key;
- thread-log writes carry an entry id (`SessionLog.append_once`) and are fenced by epoch;
- observations carry a deterministic `event_id` that consumers deduplicate on.

This module also names the handlers (`HandlerRef`s) the services call on each other, so that
modules refer to each other by name instead of importing each other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar, cast

from contract import faultpoints
from contract.binding import JSON, Context, HandlerRef
from contract.ports import Ports
from contract.services import ServiceError, body_error
from contract.threadlog import LockTimeout, LogEntry, StaleEpoch, TransactionAborted
from reference_impl.threadlog import ThreadLog

__all__ = [
    "CONTROLLER",
    "CONTROLLER_IS_CANCELLED",
    "CONTROLLER_TOOL_FINISHED",
    "CONTROLLER_TURN_DONE",
    "CONTROLLER_TURN_WAITING",
    "DO_TURN",
    "NOT_FINAL",
    "PENDING",
    "PENDING_BACKGROUND",
    "PENDING_END_WAIT",
    "PENDING_EXPIRE",
    "PENDING_REGISTER",
    "PENDING_START_TOOL_WAIT",
    "Effected",
    "Event",
    "Guard",
    "SessionLog",
    "charge_key",
    "checked",
    "effect_key",
    "email_message_id",
    "model_key",
    "observe",
    "run_effect",
    "run_step",
]

T = TypeVar("T")


def run_step(ctx: Context, name: str, action: Callable[[], Awaitable[T]]) -> Awaitable[T]:
    """`ctx.run` of an async action, typed: mypy cannot pick T out of `Awaitable[T] | T`.

    Returns `ctx.run`'s own awaitable rather than awaiting it in a coroutine of its own: a
    step is the most frequent call of a handler, and the extra coroutine was created per step
    and resumed on every wake-up inside it.
    """
    return cast("Awaitable[T]", ctx.run(name, action))

# --------------------------------------------------------------------------- handler names

CONTROLLER: Final = "Controller"
PENDING: Final = "PendingToolCall"

CONTROLLER_TOOL_FINISHED: Final = HandlerRef(CONTROLLER, "toolFinished")
CONTROLLER_TURN_WAITING: Final = HandlerRef(CONTROLLER, "turnWaiting")
CONTROLLER_TURN_DONE: Final = HandlerRef(CONTROLLER, "turnDone")
CONTROLLER_IS_CANCELLED: Final = HandlerRef(CONTROLLER, "isCancelled")
DO_TURN: Final = HandlerRef("doTurn", "run")
PENDING_REGISTER: Final = HandlerRef(PENDING, "register")
PENDING_START_TOOL_WAIT: Final = HandlerRef(PENDING, "startToolWait")
PENDING_EXPIRE: Final = HandlerRef(PENDING, "expire")
PENDING_BACKGROUND: Final = HandlerRef(PENDING, "background")
PENDING_END_WAIT: Final = HandlerRef(PENDING, "endWait")

# --------------------------------------------------------------------------- keys


def model_key(turn: str, step: int) -> str:
    """The provider bills once per key: a retried step must reuse the key of its first try."""
    return f"model:{turn}:{step}"


def charge_key(tool_call: str) -> str:
    return f"charge:{tool_call}"


def email_message_id(tool_call: str) -> str:
    """Deterministic from the tool call, so a re-run after a crash reuses it."""
    return f"email:{tool_call}"


def effect_key(effect: str | None, tool_call: str) -> str | None:
    if effect == "email":
        return email_message_id(tool_call)
    if effect == "charge":
        return charge_key(tool_call)
    return None


def checked(response: Any, error: type[ServiceError] = ServiceError) -> Any:
    """A world service's answer, or the error its body says it is.

    A 200 whose body is `{"error": ...}` did not do the work: taken as an answer, the tool
    would report an email sent that never was. Raised instead, it fails the step like any
    other service error, and the engine's retry carries the same key.
    """
    problem = body_error(response)
    if problem is not None:
        raise error(f"the service answered 200 with an error: {problem}", status=200)
    return response


@dataclass(frozen=True, slots=True)
class Effected:
    """What `run_effect` did: the world's response, or nothing because it held."""

    held: bool
    response: JSON = None


Guard = Callable[[], Awaitable[bool]]


async def run_effect(
    ctx: Context, ports: Ports, *, tool_call: str, tool: str, effect: str | None,
    args: Mapping[str, Any], user: str, run: int, guard: Guard | None = None,
) -> Effected:
    """Perform a tool's effect with its idempotency key, as a journaled step.

    `run` numbers the executions of one tool call (a confirmed re-execution after a hold is
    run 2): it only names journal steps; the idempotency key is the same for every run.

    `guard` runs first *inside* the effect's step, so it runs exactly when the effect would
    (never when a replay feeds back the journaled response): if it says so, the step ends
    held without touching the world. A separate journaled check before the step would be
    skipped on replay, and the effect would run again unguarded.
    """

    async def guarded(act: Callable[[], Awaitable[JSON]]) -> JSON:
        if guard is not None and await guard():
            return {"held": True}
        return {"held": False, "response": await act()}

    if effect == "email":
        # Store the message id before sending: the send and every retry carry this id, and
        # the outbox drops a second message with an id it already delivered.
        message_id = await ctx.run(
            f"email.message_id:{tool_call}#{run}", lambda: email_message_id(tool_call)
        )

        async def send() -> JSON:
            response = checked(await ports.mailer.send_email(
                message_id=message_id,
                to=str(args.get("to", user)),
                subject=str(args.get("subject", tool)),
                body=str(args.get("body", "")),
                tool_call=tool_call,
            ))
            await faultpoints.reach("effect.email.after_send")
            return response

        done = await run_step(ctx, f"email.send:{tool_call}#{run}", lambda: guarded(send))
    elif effect == "charge":
        key = charge_key(tool_call)

        async def charge() -> JSON:
            response = checked(await ports.payments.charge(
                idempotency_key=key, amount=int(args.get("amount", 0)), tool_call=tool_call
            ))
            await faultpoints.reach("effect.charge.after_charge")
            return response

        done = await run_step(ctx, f"charge:{tool_call}#{run}", lambda: guarded(charge))
    else:
        # A pure tool: nothing leaves the invocation, its result is the echo of the call.
        return Effected(False, {"ok": True, "tool": tool, "args": dict(args)})
    return Effected(bool(done["held"]), done.get("response"))


# --------------------------------------------------------------------------- observations


@dataclass(frozen=True, slots=True)
class Event:
    """One observation (a kind of `contract.records`), emitted inside a journaled step."""

    kind: str
    event_id: str
    fields: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, kind: str, event_id: str, **fields: Any) -> Event:
        return cls(kind, event_id, fields)

    def emit(self, ports: Ports) -> None:
        ports.observer.emit(self.kind, event_id=self.event_id, **self.fields)


async def observe(ctx: Context, ports: Ports, step: str, *events: Event) -> None:
    """Emit `events` from one journaled step: emitted at least once, never after replay."""
    if not events:
        return

    def emit_all() -> None:
        for event in events:
            event.emit(ports)

    await ctx.run(step, emit_all)


# --------------------------------------------------------------------------- thread log


# Tool results that do not end a tool call (its real result still comes).
NOT_FINAL: Final = frozenset({"background", "held"})


def _rejection_facts(err: Exception) -> dict[str, Any]:
    """What a rejected append's report says beyond its reason, so its truth can be judged:
    whom the fence found in the writer's place (a stale epoch), or since when the row's
    holder held it and the bound after which the database ends an idle holder (a lock
    timeout, when the store knows them)."""
    if isinstance(err, StaleEpoch):
        return {"current_epoch": err.current_epoch, "current_owner": err.current_owner}
    if isinstance(err, LockTimeout) and err.held_since is not None:
        return {"held_since": err.held_since, "idle_timeout": err.idle_timeout}
    return {}


class SessionLog:
    """One attempt's handle on a session's thread log (thread id = session id).

    The attempt takes ownership with `take_ownership()` outside any journaled step, because
    every attempt (a retry, a replay on another host) must fence off the attempts before it;
    a journaled assignment would be replayed, not redone. Writes happen inside journaled steps
    through `append_once`, which makes a repeated step a no-op (the entry id is already in the
    log) and lets a stale epoch fail the attempt instead of landing.
    """

    def __init__(self, ports: Ports, session: str, owner: str) -> None:
        self._ports = ports
        self.session = session
        self._log = ThreadLog(ports.threadlog, session, owner)
        # The committed log as this owner knows it: read once after taking ownership, then
        # extended by this owner's own appends. Only the owner writes, so the copy stays
        # exact while we own the thread; once the thread moves, our next append fails on
        # its epoch and the retry takes ownership and reads afresh. Re-reading the whole log
        # before every append made a turn quadratic in its length.
        self._known: list[LogEntry] | None = None
        self._ids: dict[str, LogEntry] = {}

    @property
    def epoch(self) -> int | None:
        return self._log.epoch

    async def take_ownership(self) -> int:
        self._known, self._ids = None, {}
        try:
            assignment = await self._log.take_ownership()
        except LockTimeout as err:
            # Reported like a rejected append (no epoch yet: this host was given none), then
            # the attempt fails and the engine retries it.
            self._ports.observer.emit(
                "threadlog.rejected",
                event_id=f"threadlog.rejected:{self.session}:take:{self._log.owner}",
                session=self.session, reason=type(err).__name__, owner=self._log.owner,
                entry="take_ownership", detail=str(err), **_rejection_facts(err),
            )
            raise
        # Outside ctx.run on purpose (see the class docstring); each epoch is emitted once.
        self._ports.observer.emit(
            "threadlog.assigned",
            event_id=f"threadlog.assigned:{self.session}:{assignment.epoch}",
            session=self.session, epoch=assignment.epoch, owner=assignment.owner,
            after_seq=assignment.after_seq,
        )
        return assignment.epoch

    async def entries(self) -> list[LogEntry]:
        return list(await self._committed())

    async def _committed(self) -> list[LogEntry]:
        if self._known is None:
            self._known = await self._log.entries()
            self._ids = {str(e.payload["id"]): e for e in self._known if "id" in e.payload}
        return self._known

    async def final_result(self, tool_call: str) -> str | None:
        """The outcome of the committed result that ended `tool_call`, if one did.

        A placeholder (the call went to the background) and a hold end nothing: the real
        result still comes. Safe to read before an append for the same reason as
        `append_once`: only the owner writes.
        """
        for entry in await self._committed():
            payload = entry.payload
            if (entry.kind == "tool_result" and payload.get("tool_call") == tool_call
                    and payload.get("outcome") not in NOT_FINAL):
                return str(payload.get("outcome"))
        return None

    async def run_in_flight(self, tool_call: str, *, held: bool = False) -> bool:
        """Whether an approved run of `tool_call` committed its intent and no result since.
        A hold after the intent (the run asked the person to confirm) counts as in flight
        when `held`: the confirmation is that run's own question."""
        last = None
        for entry in await self._committed():
            if (entry.payload.get("tool_call") == tool_call
                    and entry.kind in ("tool_intent", "tool_result", "tool_hold")):
                last = entry.kind
        return last == "tool_intent" or (held and last == "tool_hold")

    async def turn_moved_on(self, turn: str) -> bool:
        """Whether a later turn's message is in the log: `turn` ended (a new message ended
        it while it waited) and the transcript has moved past it."""
        seen = False
        for entry in await self._committed():
            if entry.kind != "user":
                continue
            if entry.payload.get("turn") == turn:
                seen = True
            elif seen:
                return True
        return False

    async def append_once(
        self, entry_id: str, kind: str, payload: Mapping[str, Any]
    ) -> LogEntry:
        """Append unless an entry with `entry_id` is already committed.

        Read-then-append is safe without a lock of our own: only the owner writes, and if
        the thread moved between the read and the append, the append fails on its epoch.
        """
        await self._committed()
        known = self._ids.get(entry_id)
        if known is not None:
            return known
        try:
            entry = await self._log.append(kind, {**payload, "id": entry_id})
        except (StaleEpoch, TransactionAborted, LockTimeout) as err:
            # Report, then fail the attempt: the engine retries it, and the retry takes
            # ownership again and continues from the committed log.
            self._ports.observer.emit(
                "threadlog.rejected",
                event_id=f"threadlog.rejected:{self.session}:{self._log.epoch}:{entry_id}",
                session=self.session, epoch=self._log.epoch, reason=type(err).__name__,
                owner=self._log.owner, entry=entry_id, detail=str(err),
                **_rejection_facts(err),
            )
            raise
        if self._known is not None:
            self._known.append(entry)
            self._ids[entry_id] = entry
        self._ports.observer.emit(
            "threadlog.appended",
            event_id=f"threadlog.appended:{self.session}:{entry.seq}",
            session=self.session, epoch=entry.epoch, seq=entry.seq, owner=entry.owner,
            entry=entry_id, entry_kind=kind, **_filed_under(payload),
        )
        return entry


def _filed_under(payload: Mapping[str, Any]) -> dict[str, str]:
    """The turn and tool call an entry is filed under, as its observation reports them."""
    return {name: str(payload[name]) for name in ("turn", "tool_call") if payload.get(name)}
