"""ChatToolExecutor: the approval middleware, and running a tool under conservative recovery.

The executor runs inside the turn's invocation (it is the turn's middleware, as in the source
design). For a tool that needs approval it creates an awakeable, writes the waiting row
(`PendingToolCall.register`), shows the card and waits in-call for at most `hand_off_after`:
the fast path, unchanged. Past that, if the caller accepts a pending result, it hands the
wait to `PendingToolCall.startToolWait` and returns `result_pending`; the turn then records
that it waits and ends its invocation. A caller that does not accept a pending result (the
naive variant) waits in-call up to `max_wait`, pinned all along.

Running an effectful tool is conservative: a durable intent goes to the thread log first.
If the step that writes the intent runs again and finds an intent of this tool call with no
result, an earlier attempt (maybe another host) stopped somewhere between the intent and the
result: the effect may or may not have happened, and a provider error would not prove either.
The tool is then held: the person is asked to confirm, and a confirmation re-executes it with
the same idempotency key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final, Literal

from contract import faultpoints
from contract.binding import JSON, Context, TerminalError
from contract.ports import Ports, ToolSpec
from contract.threadlog import LogEntry
from reference_impl.effects import (
    NOT_FINAL,
    PENDING_END_WAIT,
    PENDING_REGISTER,
    PENDING_START_TOOL_WAIT,
    Event,
    SessionLog,
    effect_key,
    observe,
    run_effect,
    run_step,
)

__all__ = [
    "RESULT_PENDING",
    "Applied",
    "ChatToolExecutor",
    "ExecResult",
    "ToolCall",
    "ToolRun",
    "apply_answer",
    "hold",
    "lookup_tool",
    "parse_answer",
    "record_result",
    "run_tool",
    "unresolved_intents",
]

RESULT_PENDING: Literal["result_pending"] = "result_pending"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of one turn, as the model asked for it."""

    session: str
    turn: str
    tool_call: str
    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    user: str = ""  # who sent the message that started the turn

    def to_json(self) -> dict[str, Any]:
        return {"session": self.session, "turn": self.turn, "tool_call": self.tool_call,
                "tool": self.tool, "args": dict(self.args), "user": self.user}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ToolCall:
        return cls(str(obj["session"]), str(obj["turn"]), str(obj["tool_call"]),
                   str(obj["tool"]), dict(obj.get("args") or {}), str(obj.get("user") or ""))

    def ids(self) -> dict[str, str]:
        """The fields every tool observation carries."""
        return {"session": self.session, "turn": self.turn, "tool_call": self.tool_call}


@dataclass(frozen=True, slots=True)
class ExecResult:
    """What the executor hands back to the turn.

    `status` is "done" (the tool result exists: `outcome`, `result`) or "result_pending"
    (the wait was handed to PendingToolCall; the result arrives later through toolFinished).
    """

    status: Literal["done", "result_pending"]
    outcome: str | None = None
    result: JSON = None
    run: int = 1


@dataclass(frozen=True, slots=True)
class ToolRun:
    held: bool
    result: JSON = None
    # The call's final outcome, committed before this run could write its intent: the run
    # lost the race for the call (a new message, a cancel or the expiry ended it first) and
    # did nothing.
    ended: str | None = None


@dataclass(frozen=True, slots=True)
class Applied:
    """What an answer led to: a tool result (`outcome`, `result`) or a hold."""

    outcome: str
    result: JSON = None
    # For "refused": the outcome that ended the call before the answer could act on it.
    ended: str | None = None

    @property
    def held(self) -> bool:
        return self.outcome == "held"

    @property
    def refused(self) -> bool:
        return self.outcome == "refused"


@dataclass(frozen=True, slots=True)
class _WaitEnd:
    kind: Literal["answer", "background", "pending", "expired"]
    answer: dict[str, Any] | None = None


def parse_answer(arg: Any) -> dict[str, Any]:
    """Validate a person's answer: {"decision": "approve"|"deny", "user": str}."""
    if not isinstance(arg, Mapping) or arg.get("decision") not in ("approve", "deny"):
        raise TerminalError(
            f"an answer is {{'decision': 'approve'|'deny', 'user': str}}, got {arg!r}", 400
        )
    return {"decision": str(arg["decision"]), "user": str(arg.get("user") or "")}


def _spec_json(spec: ToolSpec | None) -> dict[str, Any] | None:
    if spec is None:
        return None
    return {"name": spec.name, "needs_approval": spec.needs_approval, "effect": spec.effect}


async def lookup_tool(ctx: Context, ports: Ports, call: ToolCall, run: int) -> ToolSpec | None:
    """Resolve the tool in the catalog of *this* deployment's world, as a journaled step."""

    async def lookup() -> dict[str, Any] | None:
        return _spec_json(await ports.catalog.lookup(call.tool))

    found = await run_step(ctx, f"catalog:{call.tool_call}#{run}", lookup)
    if found is None:
        return None
    return ToolSpec(str(found["name"]), bool(found["needs_approval"]), found.get("effect"))


async def check_access(
    ctx: Context, ports: Ports, call: ToolCall, user: str, run: int, *,
    rerun_version: str | None, known: bool = True,
) -> bool:
    """Re-resolve identity. A re-run after hand-off reports it (`tool.rerun`)."""

    async def check() -> bool:
        allowed = known and await ports.identity.has_access(user, call.tool)
        if rerun_version is not None:
            ports.observer.emit(
                "tool.rerun", event_id=f"tool.rerun:{call.tool_call}#{run}", **call.ids(),
                access="granted" if allowed else "denied", user=user, tool=call.tool,
                version=rerun_version, in_catalog=known, run=run,
            )
        return allowed

    allowed: bool = await run_step(ctx, f"access:{call.tool_call}#{run}", check)
    return allowed


def intent_id(tool_call: str, run: int) -> str:
    return f"intent:{tool_call}#{run}"


# Results the controller decides for a waiting call (a new message, a cancel), written by the
# next turn: they end the call only if no approved run of it is in flight.
CLOSED_BY_CONTROLLER: Final = frozenset({"ended_by_message", "cancelled"})
# Of those, the ones that end the turn but not a held run: its confirmation is that run's own
# question, so the next turn writes no result over it and PendingToolCall keeps the
# confirmation (a cancel ends a held call).
HOLD_OUTLIVES: Final = frozenset({"ended_by_message"})

# Results that end a call's wait or its turn without saying what its effect did: a new
# message or a cancel can end a turn while an answer's re-run has written its intent and not
# yet learnt the effect's outcome, so after them the intent is still of unknown outcome.
SILENT_ON_EFFECT: Final = frozenset(
    {"ended_by_message", "cancelled", "expired", "background", "held"})


def unresolved_intents(entries: list[LogEntry], tool_call: str) -> list[LogEntry]:
    """Intents of `tool_call` with no result of their effect after them."""
    unresolved: list[LogEntry] = []
    for entry in entries:
        if entry.payload.get("tool_call") != tool_call:
            continue
        if entry.kind == "tool_intent":
            unresolved.append(entry)
        elif (entry.kind == "tool_result"
              and entry.payload.get("outcome") not in SILENT_ON_EFFECT):
            unresolved.clear()
    return unresolved


# What the intent step found: an intent of unknown outcome, or nothing in the way (any other
# value is the call's final outcome, committed first).
_HELD: Final = "held"
_WRITTEN: Final = "written"


async def run_tool(
    ctx: Context, ports: Ports, log: SessionLog, call: ToolCall, spec: ToolSpec, run: int
) -> ToolRun:
    """Run the tool's effect, intent first; held if an intent has no known result.

    Two places can find an intent of unknown outcome, both inside the step that would act:
    the intent step (executing again: an earlier attempt wrote the intent and stopped before
    the journal knew it), and the effect step (executing again: an earlier attempt wrote the
    intent, maybe sent the request, and stopped before the journal knew the response). The
    journal cannot tell a crash before the send from one after it, and a provider error
    proves neither, so both hold; the confirmation re-runs with the same idempotency key.
    """
    tc = call.tool_call
    guard = None
    if spec.effect is not None:
        key = effect_key(spec.effect, tc)
        own = intent_id(tc, run)

        async def intent() -> str:
            entries = await log.entries()
            unresolved = unresolved_intents(entries, tc)
            if run > 1:
                # The person confirmed the earlier runs; only this run's own intent, found
                # because this very step is executing again, is of unknown outcome.
                unresolved = [e for e in unresolved if e.payload.get("id") == own]
            if unresolved:
                return _HELD
            # The call's one final outcome is decided in the thread log: a new message, a
            # cancel or the expiry that ended the call first wins, and this run does nothing.
            # Read after taking ownership and appended at that epoch, the check and the intent
            # are one step (a compare-and-set): whoever commits between them fences us off,
            # and the retry reads again.
            ended = await log.final_result(tc)
            if ended is not None:
                return ended
            await log.append_once(own, "tool_intent", {
                "turn": call.turn, "tool_call": tc, "tool": call.tool, "args": call.args,
                "key": key, "run": run,
            })
            ports.observer.emit(
                "tool.intent", event_id=f"tool.intent:{tc}#{run}", **call.ids(),
                tool=call.tool, key=key, run=run, epoch=log.epoch,
            )
            await faultpoints.reach("tool.after_intent")
            return _WRITTEN

        found: str = await run_step(ctx, f"tool.intent:{tc}#{run}", intent)
        if found == _HELD:
            return ToolRun(held=True)
        if found != _WRITTEN:
            return ToolRun(held=False, ended=found)

        async def earlier_attempt_left_it() -> bool:
            # Our intent, still unresolved, written at another epoch: this attempt is not the
            # one that wrote it, so the effect step is running again after that one stopped.
            return any(e.payload.get("id") == own and e.epoch != log.epoch
                       for e in unresolved_intents(await log.entries(), tc))

        guard = earlier_attempt_left_it
    done = await run_effect(
        ctx, ports, tool_call=tc, tool=call.tool, effect=spec.effect, args=call.args,
        user=call.user, run=run, guard=guard,
    )
    return ToolRun(held=done.held, result=done.response)


async def record_result(
    ctx: Context, ports: Ports, log: SessionLog, call: ToolCall, outcome: str, result: JSON,
    *, close_card: bool, background: bool = False, emit: bool = True,
    first_wins: bool = False,
) -> str | None:
    """Write the tool result to the thread log (once), close the card, report it.

    `background` marks the real result of a call sent to the background: the turn already
    has a placeholder for it, so the transcript skips this entry (the result reaches the model
    as a new message instead). `first_wins`: write nothing if another final result of the call
    is already committed (for the writers that race across objects), and return that result's
    outcome: this one lost.
    """
    tc = call.tool_call

    async def write() -> str | None:
        late = background
        if first_wins and outcome not in NOT_FINAL:
            ended = await log.final_result(tc)
            if ended is not None and ended != outcome:
                # The call already ended another way. The controller and PendingToolCall
                # decide apart, so the log decides: one final result per tool call, the first
                # committed (docs/design.md, section 1).
                return ended
            if outcome in CLOSED_BY_CONTROLLER and await log.run_in_flight(
                    tc, held=outcome in HOLD_OUTLIVES):
                # An approved run committed its intent first: the approve won the call, and
                # the run's own result will end it. The new message ended the turn only. A
                # held run is still in flight for a new message: its confirmation, which
                # PendingToolCall keeps (endWait), decides the call, whichever of the hold and
                # this write came first (soak seed 5700000; scenario 59). A cancel ends it.
                return None
        # A result after a new message ended its turn (an answer's re-run, an expiry days
        # later, PendingToolCall's write of a cancel that ended a held call): the transcript
        # has moved on, so it is not the tool message of a later turn (the model would count
        # it as one of that turn's results). An answered one reaches the agent as a new
        # message (toolFinished), as a background result does. The next turn writes the
        # results the controller closed before its own message, in their place: not late.
        # Until 2026-12-03 a result the controller decided was never checked, and a cancel's
        # result that PendingToolCall wrote after the next turn's message was counted as one
        # of that turn's (scenario 72).
        late = late or await log.turn_moved_on(call.turn)
        await log.append_once(f"result:{tc}:{outcome}", "tool_result", {
            "turn": call.turn, "tool_call": tc, "tool": call.tool, "outcome": outcome,
            "result": result, "background": late,
        })
        if close_card:
            await ports.ui.close_card(tool_call=tc, outcome=outcome)
        if emit:
            ports.observer.emit(
                "tool.result", event_id=f"tool.result:{tc}:{outcome}", **call.ids(),
                outcome=outcome, tool=call.tool, background=background,
            )
        return None

    lost: str | None = await run_step(ctx, f"tool.result:{tc}:{outcome}", write)
    return lost


async def hold(ctx: Context, ports: Ports, log: SessionLog, call: ToolCall, run: int) -> None:
    """Report that the turn is held on an intent of unknown outcome.

    The hold goes to the thread log too (not to the transcript): the intent before it is no
    longer a run in flight but a question to the person, which a new message may end.
    """
    tc = call.tool_call

    async def mark() -> None:
        await log.append_once(f"hold:{tc}#{run}", "tool_hold",
                              {"turn": call.turn, "tool_call": tc, "run": run})

    await run_step(ctx, f"tool.hold:{tc}#{run}", mark)
    await observe(
        ctx, ports, f"tool.held:{tc}#{run}",
        Event.of("turn.held", f"turn.held:{tc}#{run}", **call.ids(), tool=call.tool, run=run),
        Event.of("tool.result", f"tool.result:{tc}#{run}:held", **call.ids(), outcome="held",
                 tool=call.tool, run=run),
    )


async def apply_answer(
    ctx: Context, ports: Ports, log: SessionLog, call: ToolCall, spec: ToolSpec | None,
    answer: Mapping[str, Any], run: int, *, rerun_version: str | None,
) -> Applied:
    """Act on a person's answer: deny, reject a user without access, or run the tool."""
    if answer.get("decision") != "approve":
        return Applied("denied", {"error": f"{call.tool} was denied"})
    user = str(answer.get("user") or call.user)
    allowed = await check_access(ctx, ports, call, user, run, rerun_version=rerun_version,
                                 known=spec is not None)
    if spec is None:
        return Applied("rejected_access", {"error": f"{call.tool} is not in the catalog"})
    if not allowed:
        return Applied("rejected_access", {"error": f"{user} may not use {call.tool}"})
    ran = await run_tool(ctx, ports, log, call, spec, run)
    if ran.held:
        return Applied("held")
    if ran.ended is not None:
        return Applied("refused", ended=ran.ended)
    return Applied("answered", ran.result)


class WaitBudget:
    """How long one invocation may still wait in-call, across all its tool calls.

    Each wait alone staying under `hand_off_after` is not enough: a turn that asks twice in
    a row (3 minutes, then 5) would keep its deployment pinned for 8. The budget is per
    invocation, so a resumed turn (a new invocation, maybe on a newer deployment) starts
    afresh. Times come from `ctx.time()`, journaled, so a replay spends the same budget.
    """

    __slots__ = ("remaining",)

    def __init__(self, seconds: float) -> None:
        self.remaining = seconds

    def spend(self, seconds: float) -> None:
        self.remaining = max(0.0, self.remaining - seconds)


class ChatToolExecutor:
    """The approval middleware of the turn (see the module docstring)."""

    def __init__(self, ports: Ports) -> None:
        self.ports = ports

    async def execute(
        self, ctx: Context, log: SessionLog, call: ToolCall, *, accepts_pending_result: bool,
        budget: WaitBudget | None = None,
    ) -> ExecResult:
        budget = budget if budget is not None else WaitBudget(self.ports.config.hand_off_after)
        ports = self.ports
        spec = await lookup_tool(ctx, ports, call, run=1)
        if spec is None:
            return await self._done(ctx, log, call, "completed",
                                    {"error": f"unknown tool {call.tool}"}, run=1)
        if spec.needs_approval:
            mode, run = "approve", 1
        else:
            allowed = await check_access(ctx, ports, call, call.user, 1, rerun_version=None)
            if not allowed:
                return await self._done(ctx, log, call, "rejected_access",
                                        {"error": f"{call.user} may not use {call.tool}"}, 1)
            ran = await run_tool(ctx, ports, log, call, spec, run=1)
            if not ran.held:
                return await self._done(ctx, log, call, "completed", ran.result, run=1)
            await hold(ctx, ports, log, call, run=1)
            mode, run = "confirm", 2
        while True:
            decision = await self._wait(ctx, call, mode, run, accepts_pending_result, budget)
            if decision.kind == "pending":
                return ExecResult(RESULT_PENDING, run=run)
            if decision.kind == "background":
                # The card stays: the person still answers, PendingToolCall runs the tool
                # and its result becomes a new message.
                result = {"placeholder": f"{call.tool} was sent to the background"}
                await record_result(ctx, ports, log, call, "background", result,
                                    close_card=False)
                return ExecResult("done", "background", result, run)
            if decision.kind == "expired":
                ctx.object_send(PENDING_END_WAIT, call.tool_call, {"reason": "expired"})
                return await self._done(ctx, log, call, "expired",
                                        {"error": "no answer within max_wait"}, run)
            assert decision.answer is not None
            applied = await apply_answer(ctx, ports, log, call, spec, decision.answer, run,
                                         rerun_version=None)
            if applied.refused:
                # Only a re-run races the call's end; a turn that runs its own tool is the
                # session's active turn, which nothing else ends. Kept total all the same.
                return ExecResult("done", applied.ended, None, run)
            if not applied.held:
                return await self._done(ctx, log, call, applied.outcome, applied.result, run)
            await hold(ctx, ports, log, call, run)
            mode, run = "confirm", run + 1

    async def _done(
        self, ctx: Context, log: SessionLog, call: ToolCall, outcome: str, result: JSON, run: int
    ) -> ExecResult:
        await record_result(ctx, self.ports, log, call, outcome, result, close_card=True)
        return ExecResult("done", outcome, result, run)

    async def _wait(
        self, ctx: Context, call: ToolCall, mode: str, run: int, accepts_pending_result: bool,
        budget: WaitBudget,
    ) -> _WaitEnd:
        ports, tc = self.ports, call.tool_call
        awakeable_id, answered = ctx.awakeable()
        # The waiting row: from now on PendingToolCall.answer resolves this awakeable.
        registered = await ctx.object_call(PENDING_REGISTER, tc, {
            "call": call.to_json(), "awakeable": awakeable_id, "mode": mode, "run": run,
        })
        if registered.get("answer") is not None:
            return _decision(registered["answer"])

        async def show() -> None:
            await ports.ui.show_card(session=call.session, turn=call.turn, tool_call=tc,
                                     tool=call.tool, args=dict(call.args))
            ports.observer.emit(
                "tool.awaiting", event_id=f"tool.awaiting:{tc}#{run}", **call.ids(),
                tool=call.tool, mode=mode, run=run,
            )
            await faultpoints.reach("card.after_show")

        await run_step(ctx, f"card:{tc}#{run}", show)
        config = ports.config
        limit = budget.remaining if accepts_pending_result else config.max_wait
        started = await ctx.time()
        winner, value = await ctx.select(
            answer=answered, timeout=ctx.sleep(timedelta(seconds=limit))
        )
        budget.spend(await ctx.time() - started)
        if winner == "answer":
            return _decision(value)
        if not accepts_pending_result:
            return _WaitEnd("expired")
        # Hand-off. PendingToolCall serialises this with answer(): an answer that arrived
        # after our timer fired but before this call is returned here, not lost. The wait's
        # expiry counts from when the card was shown (`started`), not from `register`, which
        # ran before the card and would let the wait expire early by the card's latency.
        handed = await ctx.object_call(PENDING_START_TOOL_WAIT, tc, {"since": started})
        status = handed.get("status")
        if status == "answered":
            return _decision(handed["answer"])
        if status == "background":
            return _WaitEnd("background")
        return _WaitEnd("pending")


def _decision(value: Any) -> _WaitEnd:
    if isinstance(value, Mapping) and value.get("background"):
        return _WaitEnd("background")
    return _WaitEnd("answer", parse_answer(value))
