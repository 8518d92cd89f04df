"""PendingToolCall: one virtual object per tool call that waits on a person.

Its state is the waiting row. The executor writes it when it starts its in-call wait
(`register`); `answer` is the only way a person answers, in both phases, and every handler
here is exclusive on the tool call, so an answer and the hand-off are serialised:

- live phase (the executor waits in-call): `answer` records the answer and resolves the
  executor's awakeable; if the executor's timer fired meanwhile, its `startToolWait` finds
  the recorded answer and returns it in-call. No answer is lost in the race.
- waiting phase (after `startToolWait`): the wait is state, nothing is suspended. `answer`
  re-runs the tool here, on the deployment that is latest *now*, re-resolving the catalog and
  the person's access, and reports with a one-way `Controller.toolFinished`. A delayed
  self-send of `expire` ends the wait at `max_wait` with the result "expired".
- background: the turn went on with a placeholder; the real result still comes through
  `toolFinished` (flagged background) and the controller turns it into a new message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Final

from contract import faultpoints
from contract.binding import JSON, Context, Handler, Service, TerminalError
from contract.ports import Ports
from reference_impl.effects import (
    CONTROLLER_IS_CANCELLED,
    CONTROLLER_TOOL_FINISHED,
    PENDING,
    PENDING_EXPIRE,
    Event,
    SessionLog,
    observe,
    run_step,
)
from reference_impl.executor import (
    HOLD_OUTLIVES,
    ToolCall,
    apply_answer,
    hold,
    lookup_tool,
    parse_answer,
    record_result,
)

__all__ = ["PHASES", "WaitRow", "build_pending_service", "tool_finished"]

# live: the executor waits in-call on `awakeable`; answered: answered in the live phase (the
# executor acts on it); waiting: handed off, the wait is state; background: the turn went on
# with a placeholder; done / expired / ended: over (ended = by a new message or cancel).
PHASES: Final = ("live", "answered", "waiting", "background", "done", "expired", "ended")
_OPEN: Final = ("waiting", "background")
# Why an answer is refused (`answer.refused`), by the row's phase when it came, or by the
# final outcome that ended the call first.
_REFUSED_IN: Final = {"answered": "already_decided", "done": "already_decided",
                      "expired": "expired", "ended": "ended"}
_REFUSED_BY: Final = {"expired": "expired", "ended_by_message": "ended", "cancelled": "ended"}


@dataclass(frozen=True, slots=True)
class WaitRow:
    call: ToolCall
    awakeable: str
    mode: str  # "approve" (an approval) | "confirm" (a held tool, re-run on confirmation)
    run: int  # which execution of the tool call a confirmation leads to (2 after a hold)
    phase: str
    # When this wait's card was shown (stamped at register, before the card, then at the
    # hand-off with the time the executor read after showing it); expiry is since + max_wait.
    since: float
    wait: int  # generation of the expiry timer: an older timer finds a newer wait and stops
    answer: dict[str, Any] | None = None
    handed_off_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"call": self.call.to_json(), "awakeable": self.awakeable, "mode": self.mode,
                "run": self.run, "phase": self.phase, "since": self.since, "wait": self.wait,
                "answer": self.answer, "handed_off_at": self.handed_off_at}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> WaitRow:
        return cls(ToolCall.from_json(obj["call"]), str(obj["awakeable"]), str(obj["mode"]),
                   int(obj["run"]), str(obj["phase"]), float(obj["since"]), int(obj["wait"]),
                   obj.get("answer"), obj.get("handed_off_at"))


def tool_finished(
    call: ToolCall, outcome: str, result: JSON, *, background: bool = False,
    placeholder: bool = False, recorded: bool = True,
) -> dict[str, Any]:
    """The argument of `Controller.toolFinished`.

    `recorded`: the result is already in the thread log (the resumed turn must not write it
    again). `placeholder`: the call went to the background while its turn waited; the turn
    resumes with the placeholder. `background`: the real result of a backgrounded call.
    """
    return {**call.ids(), "tool": call.tool, "user": call.user, "outcome": outcome,
            "result": result, "background": background, "placeholder": placeholder,
            "recorded": recorded}


async def _row(ctx: Context) -> WaitRow | None:
    raw = await ctx.get("row")
    return None if raw is None else WaitRow.from_json(raw)


def _save(ctx: Context, row: WaitRow) -> None:
    ctx.set("row", row.to_json())


def build_pending_service(ports: Ports, version: str) -> Service:
    """PendingToolCall for one deployment (`version` is reported by re-runs)."""
    config = ports.config

    def schedule_expiry(ctx: Context, row: WaitRow, now: float) -> None:
        # A delayed one-way send: no invocation exists (or pins anything) until it is due.
        delay = max(0.0, row.since + config.max_wait - now)
        ctx.object_send(PENDING_EXPIRE, row.call.tool_call, {"wait": row.wait},
                        send_delay=timedelta(seconds=delay))

    async def register(ctx: Context, arg: Any) -> JSON:
        call = ToolCall.from_json(arg["call"])
        previous = await _row(ctx)
        early = await ctx.get("earlyAnswer")
        now = await ctx.time()
        row = WaitRow(call, str(arg["awakeable"]), str(arg.get("mode", "approve")),
                      int(arg.get("run", 1)), "live", now,
                      1 if previous is None else previous.wait + 1)
        if early is not None and previous is None:
            # Answered before the row existed (a client raced the card): keep the answer.
            ctx.clear("earlyAnswer")
            _save(ctx, replace(row, phase="answered", answer=early))
            # Later answers that also came before the card lost to the first; their
            # refusal is recorded now, when the call (and so its session) is known.
            for later in list(await ctx.get("laterEarlyAnswers") or []):
                await refuse(ctx, call, later, "already_decided", None)
            ctx.clear("laterEarlyAnswers")
            return {"answer": early}
        _save(ctx, row)
        return {"answer": None}

    async def refuse(ctx: Context, call: ToolCall, decision: Mapping[str, Any], reason: str,
                     ended: str | None) -> JSON:
        """Tell the person their answer was not applied, and why: an answer is applied or
        refused, never dropped."""
        ids = call.ids()
        extra = {"outcome": ended} if ended is not None else {}
        answers = int(await ctx.get("answers") or 0) + 1
        ctx.set("answers", answers)
        await observe(ctx, ports, f"observe.refused#{answers}", Event.of(
            "answer.refused", f"answer.refused:{call.tool_call}#{answers}", **ids, reason=reason,
            decision=str(decision.get("decision")), user=str(decision.get("user", "")),
            **extra))
        return {"status": "refused", "reason": reason}

    async def answer(ctx: Context, arg: Any) -> JSON:
        decision = parse_answer(arg)
        row = await _row(ctx)
        if row is None:
            if await ctx.get("earlyAnswer") is not None:
                # The first answer before the card wins. This one is refused to the person
                # at once; its `answer.refused` waits for the call, since an answer names
                # only the call id and every observation names the call's session.
                later = list(await ctx.get("laterEarlyAnswers") or [])
                ctx.set("laterEarlyAnswers", [*later, decision])
                return {"status": "refused", "reason": "already_decided"}
            ctx.set("earlyAnswer", decision)
            return {"status": "recorded"}
        if row.phase in ("live", "waiting") and await ctx.object_call(
                CONTROLLER_IS_CANCELLED, row.call.session, {"turn": row.call.turn}):
            # The person cancelled the call's turn: an approval after that runs nothing,
            # whether the turn still waits in the call (it ends at the hand-off) or its
            # wait was handed off (the controller ends it, or is about to). A call sent to
            # the background is no longer the turn's: its answer still runs it.
            return await refuse(ctx, row.call, decision, "ended", "cancelled")
        if row.phase == "live":
            _save(ctx, replace(row, phase="answered", answer=decision))
            ctx.resolve_awakeable(row.awakeable, decision)
            return {"status": "delivered"}
        if row.phase in _OPEN:
            return await rerun(ctx, row, decision)
        return await refuse(ctx, row.call, decision,
                            _REFUSED_IN.get(row.phase, "already_decided"), None)

    async def rerun(ctx: Context, row: WaitRow, decision: dict[str, Any]) -> JSON:
        call = row.call
        log = SessionLog(ports, call.session, ctx.host())
        await log.take_ownership()
        # This invocation started on the deployment that is latest now: the catalog and the
        # person's access are resolved again here, not remembered from when the card opened.
        spec = await lookup_tool(ctx, ports, call, run=row.run)
        applied = await apply_answer(ctx, ports, log, call, spec, decision, row.run,
                                     rerun_version=version)
        background = row.phase == "background"
        if applied.refused:
            # The call ended before this run could write its intent: nothing was done.
            return await ended_first(ctx, row, decision, str(applied.ended))
        if applied.held:
            await hold(ctx, ports, log, call, row.run)

            async def show() -> None:
                await ports.ui.show_card(session=call.session, turn=call.turn,
                                         tool_call=call.tool_call, tool=call.tool,
                                         args=dict(call.args))
                await faultpoints.reach("card.after_show")

            await run_step(ctx, f"card:{call.tool_call}#{row.run + 1}", show)
            now = await ctx.time()
            confirm = replace(row, mode="confirm", run=row.run + 1, since=now,
                              wait=row.wait + 1, answer=None)
            _save(ctx, confirm)
            schedule_expiry(ctx, confirm, now)
            return {"status": "held"}
        lost = await record_result(ctx, ports, log, call, applied.outcome, applied.result,
                                   close_card=True, background=background, first_wins=True)
        if lost is not None:
            # A deny (or a rejection) whose result came second: the call had ended already.
            return await ended_first(ctx, row, decision, lost)
        _save(ctx, replace(row, phase="done", answer=decision))
        ctx.object_send(CONTROLLER_TOOL_FINISHED, call.session,
                        tool_finished(call, applied.outcome, applied.result,
                                      background=background))
        return {"status": applied.outcome}

    async def ended_first(ctx: Context, row: WaitRow, decision: Mapping[str, Any],
                          ended: str) -> JSON:
        _save(ctx, replace(row, phase="ended"))

        async def close() -> None:
            await ports.ui.close_card(tool_call=row.call.tool_call, outcome=ended)

        await run_step(ctx, "close_card", close)
        return await refuse(ctx, row.call, decision,
                            _REFUSED_BY.get(ended, "already_decided"), ended)

    async def start_tool_wait(ctx: Context, arg: Any) -> JSON:
        row = await _row(ctx)
        if row is None:
            raise TerminalError("startToolWait before register", 409)
        if row.phase == "answered":
            return {"status": "answered", "answer": row.answer}
        if row.phase == "background" or (row.phase in ("done", "expired")
                                          and row.handed_off_at is not None):
            # Sent to the background while this wait was still live (its timer fired, then
            # the host paused before this call): the call's own result, if it already came,
            # reached the session as a message; this turn goes on with the placeholder.
            return {"status": "background"}
        if row.phase != "live":
            raise TerminalError(f"startToolWait in phase {row.phase}", 409)
        now = await ctx.time()
        # When the card was shown, as the executor read it after showing it; `register`'s
        # stamp is only a floor (it comes before the card).
        shown = arg.get("since") if isinstance(arg, Mapping) else None
        since = row.since if shown is None else max(row.since, float(shown))
        waiting = replace(row, phase="waiting", since=since, handed_off_at=now)
        _save(ctx, waiting)
        schedule_expiry(ctx, waiting, now)
        call = row.call
        await observe(ctx, ports, "observe.handoff", Event.of(
            "tool.handoff", f"tool.handoff:{call.tool_call}#{row.run}", **call.ids(),
            tool=call.tool, mode=row.mode, run=row.run, waited=now - row.since,
        ))
        return {"status": "pending"}

    async def expire(ctx: Context, arg: Any) -> JSON:
        row = await _row(ctx)
        if row is None or row.phase not in _OPEN or row.wait != int(arg.get("wait", -1)):
            return {"status": "ignored"}
        call = row.call
        log = SessionLog(ports, call.session, ctx.host())
        await log.take_ownership()

        # The call may have ended another way while it waited here: a new message ended its
        # turn in the same instant as the call went to the background (the controller and
        # this object decide apart, so neither saw the other), or while this expiry stood
        # before the thread log's lock (a paused host; scenario 64). One final result per
        # tool call, the first committed: the check and the write are one step under the
        # log's fence (`first_wins`), and an expiry that comes second writes and reports
        # nothing.
        background = row.phase == "background"
        result = {"error": "no answer within max_wait"}
        ended = await record_result(ctx, ports, log, call, "expired", result, close_card=True,
                                    background=background, first_wins=True)
        if ended is not None:
            _save(ctx, replace(row, phase="ended"))

            async def close() -> None:
                # The card closes with the call's one result (a confirmation card shown
                # after the call ended, a re-run held on its intent, has no other closer).
                await ports.ui.close_card(tool_call=call.tool_call, outcome=str(ended))

            await run_step(ctx, "close_card", close)
            return {"status": "ignored", "ended": ended}
        _save(ctx, replace(row, phase="expired"))
        ctx.object_send(CONTROLLER_TOOL_FINISHED, call.session,
                        tool_finished(call, "expired", result, background=background))
        return {"status": "expired"}

    async def background(ctx: Context, arg: Any) -> JSON:
        row = await _row(ctx)
        session = arg.get("session") if isinstance(arg, Mapping) else None
        if row is None or (session is not None and session != row.call.session):
            return {"status": "ignored"}
        call = row.call
        event = Event.of("tool.background", f"tool.background:{call.tool_call}", **call.ids(),
                         tool=call.tool, phase=row.phase)
        if row.phase == "live":
            # The executor still waits in-call: wake it with the placeholder; the wait goes
            # on here as state.
            now = await ctx.time()
            moved = replace(row, phase="background", handed_off_at=now)
            _save(ctx, moved)
            ctx.resolve_awakeable(row.awakeable, {"background": True})
            schedule_expiry(ctx, moved, now)
            await observe(ctx, ports, "observe.background", event)
            return {"status": "background"}
        if row.phase == "waiting":
            # The turn waits as state: the controller resumes it with a placeholder.
            _save(ctx, replace(row, phase="background"))
            await observe(ctx, ports, "observe.background", event)
            placeholder = {"placeholder": f"{call.tool} was sent to the background"}
            ctx.object_send(CONTROLLER_TOOL_FINISHED, call.session,
                            tool_finished(call, "background", placeholder, placeholder=True,
                                          recorded=False))
            return {"status": "background"}
        return {"status": "ignored", "phase": row.phase}

    async def end_wait(ctx: Context, arg: Any) -> JSON:
        row = await _row(ctx)
        # A call the person sent to the background after the controller decided its turn's
        # end (a cancel, a new message), in the moment before the turn told the controller
        # it waits, ends with its turn: the controller's decision came first, and the next
        # turn writes that result. Ignoring it here left the card up, refusing every answer,
        # until the call expired days later (scenario 69).
        if row is None or row.phase not in ("live", "waiting", "background"):
            return {"status": "ignored"}
        reason = str(arg.get("reason", "ended")) if isinstance(arg, Mapping) else "ended"
        if row.mode == "confirm" and reason in HOLD_OUTLIVES:
            # A confirmation asked after a hold is the approved run's own question: a new
            # message ends the turn, not the call, and the next turn writes no result over
            # a held run either (`run_in_flight`). Decided by the log's order, not by time:
            # a hold in the same instant as the decision used to end here while the next
            # turn had found the run in flight, and the call had no result at all.
            return {"status": "stale"}
        _save(ctx, replace(row, phase="ended"))
        call = row.call
        if row.mode == "confirm":
            # A held call whose turn the person cancelled: the cancel ends the call (every
            # answer to a cancelled turn's call is refused, so a confirmation left up would
            # ask for an answer that changes nothing). The next turn may have found the
            # approved run still in flight, before its hold, and written nothing: the call's
            # result is written here, first-wins (one final result per call, whoever writes
            # it first), and the card closes with it.
            log = SessionLog(ports, call.session, ctx.host())
            await log.take_ownership()
            ended = await record_result(
                ctx, ports, log, call, reason,
                {"error": f"the turn was {reason} while the call was held"},
                close_card=True, first_wins=True)
            if ended is None:
                return {"status": "ended"}
            reason = ended  # the call had ended another way first: its card says that

        async def close() -> None:
            await ports.ui.close_card(tool_call=call.tool_call, outcome=reason)

        await run_step(ctx, "close_card", close)
        return {"status": "ended"}

    async def status(ctx: Context, arg: Any) -> JSON:
        raw = await ctx.get("row")
        return raw

    return Service(PENDING, (
        Handler("register", register),
        Handler("answer", answer),
        Handler("startToolWait", start_tool_wait),
        Handler("expire", expire),
        Handler("background", background),
        Handler("endWait", end_wait),
        Handler("status", status, kind="shared"),
    ), kind="object")
