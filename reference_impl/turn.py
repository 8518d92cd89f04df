"""doTurn: the agent loop of one turn (call the model, maybe call a tool, repeat).

Every step is journaled, and the thread log is the transcript: each invocation of a turn
takes ownership of the session's thread (a new epoch, fencing off any earlier owner) and
continues from what is committed there. A turn may span several invocations: when the
executor returns `result_pending` the turn reports `turnWaiting` to the controller and its
invocation ends; when the answer arrives the controller starts a new invocation of the *same*
turn, which picks up at the next model step.

The model is called with the key `model:{turn}:{step}`; a provider error fails the attempt and
the engine retries the step with the same key, so a completion produced and billed before a
500 is not billed again. Between steps the turn asks the controller whether it was cancelled,
and stops spending if so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from contract import faultpoints
from contract.binding import JSON, Context, Handler, Service, TerminalError
from contract.ports import Ports, ProviderError
from contract.threadlog import LogEntry
from reference_impl.effects import (
    CONTROLLER_IS_CANCELLED,
    CONTROLLER_TURN_DONE,
    CONTROLLER_TURN_WAITING,
    DO_TURN,
    Event,
    SessionLog,
    checked,
    model_key,
    observe,
    run_step,
)
from reference_impl.executor import (
    RESULT_PENDING,
    ChatToolExecutor,
    ToolCall,
    WaitBudget,
    record_result,
)

__all__ = ["build_turn_service", "transcript"]


def transcript(entries: list[LogEntry]) -> list[dict[str, Any]]:
    """The messages the model sees, from the committed thread log.

    The real result of a call sent to the background is skipped: its turn already holds the
    placeholder, and the result reaches the model as a new user-side message.
    """
    messages: list[dict[str, Any]] = []
    for entry in entries:
        p = entry.payload
        if entry.kind == "user":
            messages.append({"role": "user", "content": p.get("text", ""),
                             "plan": p.get("plan") or [], "turn": p.get("turn"),
                             "message_id": p.get("message_id")})
        elif entry.kind == "model":
            response = p.get("response") or {}
            if "tool_call" in response:
                messages.append({"role": "assistant", "tool_call": response["tool_call"],
                                 "turn": p.get("turn")})
            else:
                messages.append({"role": "assistant", "content": response.get("text", ""),
                                 "turn": p.get("turn")})
        elif entry.kind == "tool_result" and not p.get("background"):
            messages.append({"role": "tool", "tool_call_id": p.get("tool_call"),
                             "content": p.get("result"), "outcome": p.get("outcome")})
    return messages


def build_turn_service(ports: Ports, *, accepts_pending_result: bool = True) -> Service:
    """doTurn; `accepts_pending_result=False` is the naive variant (in-call wait, pinned)."""
    executor = ChatToolExecutor(ports)
    config = ports.config

    async def run(ctx: Context, arg: Any) -> JSON:
        if not isinstance(arg, Mapping) or not {"session", "turn", "token"} <= set(arg):
            raise TerminalError(f"doTurn takes {{session, turn, token, ...}}, got {arg!r}", 400)
        session, turn, token = str(arg["session"]), str(arg["turn"]), str(arg["token"])
        log = SessionLog(ports, session, ctx.host())
        await log.take_ownership()

        # Results the controller decided (ended by a new message, cancelled) go to the log
        # before this turn's message, as the tool messages of the turns they belong to. The
        # card is PendingToolCall's to close, on the controller's endWait.
        for closed in arg.get("closed") or []:
            call = ToolCall(session, str(closed["turn"]), str(closed["tool_call"]),
                            str(closed.get("tool", "")))
            await record_result(ctx, ports, log, call, str(closed["outcome"]),
                                closed.get("result"), close_card=False, first_wins=True)
        message = arg.get("message")
        if message is not None:
            async def write_message() -> None:
                await log.append_once(f"user:{turn}", "user", {
                    "turn": turn, "message_id": message["message_id"],
                    "text": message.get("text", ""), "user": message.get("user", ""),
                    "plan": message.get("plan") or [], "origin": message.get("kind"),
                })

            await run_step(ctx, "turn.message", write_message)
        resume = arg.get("resume")
        if resume is not None and not resume.get("recorded", True):
            call = ToolCall(session, turn, str(resume["tool_call"]), str(resume.get("tool", "")))
            await record_result(ctx, ports, log, call, str(resume["outcome"]),
                                resume.get("result"), close_card=False)

        async def history() -> dict[str, Any]:
            entries = await log.entries()
            steps = sum(1 for e in entries if e.kind == "model" and e.payload.get("turn") == turn)
            users = [e.payload.get("user", "") for e in entries
                     if e.kind == "user" and e.payload.get("turn") == turn]
            return {"steps": steps, "user": users[0] if users else ""}

        # Where this turn stands, from committed history: a resumed invocation continues at
        # the next step, so its model keys never collide with the earlier invocation's.
        known = await run_step(ctx, "turn.history", history)
        budget = WaitBudget(config.hand_off_after)
        step, user = int(known["steps"]), str(known["user"])

        async def end(reason: str, **extra: Any) -> JSON:
            async def write() -> None:
                await log.append_once(f"end:{turn}", "turn_end", {"turn": turn, "reason": reason})
                ports.observer.emit("turn.ended", event_id=f"turn.ended:{turn}",
                                    session=session, turn=turn, reason=reason, **extra)

            await run_step(ctx, "turn.end", write)
            ctx.object_send(CONTROLLER_TURN_DONE, session,
                            {"turn": turn, "token": token, "reason": reason})
            return {"status": "ended", "turn": turn, "reason": reason}

        while True:
            if step >= config.max_steps_per_turn:
                return await end("completed", stopped="max_steps")
            if await ctx.object_call(CONTROLLER_IS_CANCELLED, session, {"turn": turn}):
                return await end("cancelled")
            response = await run_step(ctx, f"model:{step}", _model_step(ports, log, session, turn,
                                                                  step))
            step += 1
            requested = response.get("tool_call")
            if requested is None:
                return await end("completed")
            call = ToolCall(session, turn, str(requested["id"]), str(requested["name"]),
                            dict(requested.get("args") or {}), user)
            done = await executor.execute(ctx, log, call,
                                          accepts_pending_result=accepts_pending_result,
                                          budget=budget)
            if done.status == RESULT_PENDING:
                # The wait is state now; the controller has not heard yet. An answer (and its
                # re-run's result) may reach the controller first: it keeps that result until
                # this turn says it waits (`early_results`).
                await faultpoints.reach("turn.after_handoff")
                since = await ctx.time()
                await observe(ctx, ports, f"turn.waiting:{call.tool_call}#{done.run}", Event.of(
                    "turn.waiting", f"turn.waiting:{call.tool_call}#{done.run}", **call.ids(),
                    since=since,
                ))
                # Record the wait on the controller and end this invocation: from here on
                # the turn is state, and nothing is pinned however long the person takes.
                ctx.object_send(CONTROLLER_TURN_WAITING, session, {
                    "turn": turn, "token": token, "tool_call": call.tool_call,
                    "since": since,
                })
                return {"status": "waiting", "turn": turn, "tool_call": call.tool_call}

    return Service(DO_TURN.service, (Handler(DO_TURN.handler, run),))


def _model_step(
    ports: Ports, log: SessionLog, session: str, turn: str, step: int
) -> Callable[[], Awaitable[dict[str, Any]]]:
    async def call_model() -> dict[str, Any]:
        messages = transcript(await log.entries())
        response = checked(await ports.model.complete(
            session=session, turn=turn, step=step, messages=messages,
            idempotency_key=model_key(turn, step),
        ), ProviderError)
        await faultpoints.reach("effect.model.after_call")
        await log.append_once(f"model:{turn}:{step}", "model",
                              {"turn": turn, "step": step, "response": response})
        return dict(response)

    return call_model
