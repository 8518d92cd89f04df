"""The approval agent of examples/restate_sdk_agent, its world calls made with `requests`
(synchronous, inside `ctx.run_typed`) instead of httpx: a user's agent written outside this
project, on restate-sdk and requests alone. tests/test_sdk_clients.py runs it on the simulator
through `requests_adapter.py`."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import requests
import restate

# Under a chaos run on a real server (no time skipping) every duration is divided by this.
SCALE = float(os.environ.get("AGENT_TIME_SCALE", "1"))
HAND_OFF = timedelta(minutes=5) / SCALE
MAX_WAIT = timedelta(days=8) / SCALE
APPROVAL_TOOLS = ("send_email", "charge_card")
DEFECTS = ("wait-in-call", "email-no-key")


def world_url() -> str:
    return os.environ.get("AGENT_WORLD_URL", "http://world.sim")


def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """One call to the agent's services; a 5xx raises, so the journaled step is retried."""
    response = requests.post(f"{world_url()}{path}", json=body, timeout=30)
    if response.status_code >= 500:
        raise RuntimeError(f"{path} answered {response.status_code}: {response.text}")
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def build(defects: frozenset[str] = frozenset()) -> list[restate.VirtualObject]:
    unknown = defects - set(DEFECTS)
    if unknown:
        raise ValueError(f"unknown defects {sorted(unknown)}; known: {list(DEFECTS)}")
    session = restate.VirtualObject("Session")

    async def close_card(ctx: restate.ObjectContext, tool_call: str, outcome: str) -> None:
        await ctx.run_typed(f"close {tool_call}", post, restate.RunOptions(), "/cards/close",
                            {"tool_call": tool_call, "outcome": outcome})

    async def apply(ctx: restate.ObjectContext, call: dict[str, Any], decision: str) -> str:
        if decision != "approve":
            await close_card(ctx, call["id"], "denied")
            return "denied"
        args = call.get("args") or {}  # what the card showed, so what the person approved
        if call["name"] == "send_email":
            key = "" if "email-no-key" in defects else f"mail-{call['id']}"
            await ctx.run_typed("email", post, restate.RunOptions(), "/email", {
                "message_id": key, "to": str(args.get("to", "bob@example.com")),
                "subject": "from the agent", "body": str(args), "tool_call": call["id"]})
        else:
            await ctx.run_typed("charge", post, restate.RunOptions(), "/charge", {
                "idempotency_key": f"charge-{call['id']}", "amount": int(args.get("amount", 100)),
                "tool_call": call["id"]})
        await close_card(ctx, call["id"], "answered")
        return "answered"

    async def turn_loop(ctx: restate.ObjectContext, turn: str, messages: list[Any],
                        step: int) -> str:
        while True:
            reply = await ctx.run_typed(f"model {step}", post, restate.RunOptions(),
                                        "/model/complete", {
                                            "session": ctx.key(), "turn": turn, "step": step,
                                            "messages": messages,
                                            "idempotency_key": f"{turn}:{step}"})
            if "tool_call" not in reply:
                return str(reply.get("text", ""))
            call = reply["tool_call"]
            step += 1
            outcome = "completed"
            if call["name"] in APPROVAL_TOOLS:
                waited = await wait_for_answer(ctx, turn, messages, step, call)
                if waited is None:
                    return "waiting"  # handed off: `resume` goes on with the turn
                outcome = waited
            messages = [*messages, {"role": "assistant", "tool_call": call},
                        {"role": "tool", "id": call["id"], "outcome": outcome}]

    async def wait_for_answer(ctx: restate.ObjectContext, turn: str, messages: list[Any],
                              step: int, call: dict[str, Any]) -> str | None:
        await ctx.run_typed(f"card {call['id']}", post, restate.RunOptions(), "/cards/show", {
            "session": ctx.key(), "turn": turn, "tool_call": call["id"],
            "tool": call["name"], "args": call.get("args") or {}})
        awakeable_id, answer = ctx.awakeable(type_hint=str)
        ctx.set("pending", {"call": call, "turn": turn, "messages": messages, "step": step,
                            "awakeable": awakeable_id, "handed_off": False})
        in_call = MAX_WAIT if "wait-in-call" in defects else HAND_OFF
        match await restate.select(answer=answer, timeout=ctx.sleep(in_call)):
            case ["answer", decision]:
                ctx.clear("pending")
                return await apply(ctx, call, str(decision))
            case _ if "wait-in-call" in defects:
                ctx.clear("pending")
                await close_card(ctx, call["id"], "expired")
                return "expired"
        pending = await ctx.get("pending")
        ctx.set("pending", {**pending, "handed_off": True})
        ctx.object_send(expire, ctx.key(), call["id"], send_delay=MAX_WAIT - in_call)
        return None

    @session.handler()
    async def on_message(ctx: restate.ObjectContext, message: dict[str, Any]) -> str:
        pending = await ctx.get("pending")
        if pending is not None:  # a new message ends the wait of the turn before
            ctx.clear("pending")
            await close_card(ctx, pending["call"]["id"], "ended_by_message")
        turn = f"{ctx.key()}.{message['message_id']}"
        first = {"role": "user", "text": message.get("text"), "plan": message.get("plan")}
        return await turn_loop(ctx, turn, [first], 0)

    @session.handler(kind="shared")
    async def answer(ctx: restate.ObjectSharedContext, body: dict[str, Any]) -> None:
        pending = await ctx.get("pending")
        if pending is None or pending["call"]["id"] != body["tool_call"]:
            return  # answered, expired or ended already
        if pending["handed_off"]:
            ctx.object_send(resume, ctx.key(), body)
        else:
            ctx.resolve_awakeable(pending["awakeable"], body["decision"])

    @session.handler()
    async def resume(ctx: restate.ObjectContext, body: dict[str, Any]) -> str:
        pending = await ctx.get("pending")
        if pending is None or pending["call"]["id"] != body["tool_call"]:
            return "stale"
        ctx.clear("pending")
        call = pending["call"]
        outcome = await apply(ctx, call, body["decision"])
        messages = [*pending["messages"], {"role": "assistant", "tool_call": call},
                    {"role": "tool", "id": call["id"], "outcome": outcome}]
        return await turn_loop(ctx, pending["turn"], messages, pending["step"])

    @session.handler()
    async def expire(ctx: restate.ObjectContext, tool_call: str) -> None:
        pending = await ctx.get("pending")
        if pending is not None and pending["call"]["id"] == tool_call:
            ctx.clear("pending")
            await close_card(ctx, tool_call, "expired")

    return [session]
