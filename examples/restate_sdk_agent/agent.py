"""An approval agent written with restate-sdk only: nothing here knows durable-chaos.

One virtual object per chat session (`Session`). A message starts a turn: the model (over
HTTP) picks tools; a tool that needs a person's approval shows a card and waits for the
answer on an awakeable, for at most `HAND_OFF` in the call (counted over the invocation: a
second card of one turn waits only what the first left). Past that the turn hands the
wait off (the pending call becomes the session's state, an expiry is sent with a delay of
the rest of `MAX_WAIT`) and its invocation ends, so nothing stays pinned to the release
that started it; a later answer resumes the turn in a new invocation (`resume`).

Deploy it: `hypercorn examples.restate_sdk_agent.agent:app` with `AGENT_WORLD_URL` set to
the services the agent calls (model, email, payments, cards).

Four defects can be planted, named in `AGENT_DEFECTS` (comma-separated) or passed to
`build()`:

- `wait-in-call`: the turn waits for the answer in the call for up to `MAX_WAIT` (8 days),
  pinning its release that long;
- `email-no-key`: the email is sent without an idempotency key, so a retried send after a
  crash delivers it twice;
- `card-before-pending`: the card is shown before the wait is written down (`pending`), so
  an answer given the moment the card is up finds nothing pending and is dropped. This one
  was a real bug of this agent, found on real Restate; the `card.after_show` fault point
  opens its window on the simulator;
- `pending-without-args`: the wait is written down without the call's arguments, so an
  answer after the hand-off sends the email to the session's own address (the agent's
  default when a call names nobody) and charges 0, not what the card showed.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import httpx
import restate

# Under a chaos run on a real server (no time skipping) every duration is divided by this.
SCALE = float(os.environ.get("AGENT_TIME_SCALE", "1"))
HAND_OFF = timedelta(minutes=5) / SCALE
MAX_WAIT = timedelta(days=8) / SCALE
APPROVAL_TOOLS = ("send_email", "charge_card")
DEFECTS = ("wait-in-call", "email-no-key", "card-before-pending", "pending-without-args")


def world_url() -> str:
    return os.environ.get("AGENT_WORLD_URL", "http://world.sim")


async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """One call to the agent's services; a 5xx raises, so the journaled step is retried."""
    async with httpx.AsyncClient(base_url=world_url(), timeout=30) as client:
        response = await client.post(path, json=body)
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
                "message_id": key, "to": str(args.get("to", f"{ctx.key()}@example.com")),
                "subject": "from the agent", "body": str(args), "tool_call": call["id"]})
        else:
            await ctx.run_typed("charge", post, restate.RunOptions(), "/charge", {
                "idempotency_key": f"charge-{call['id']}", "amount": int(args.get("amount", 0)),
                "tool_call": call["id"]})
        await close_card(ctx, call["id"], "answered")
        return "answered"

    async def turn_loop(ctx: restate.ObjectContext, turn: str, messages: list[Any],
                        step: int) -> str:
        started = await ctx.time()  # the in-call wait is bounded per invocation
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
                waited = await wait_for_answer(ctx, turn, messages, step, call, started)
                if waited is None:
                    return "waiting"  # handed off: `resume` goes on with the turn
                outcome = waited
            messages = [*messages, {"role": "assistant", "tool_call": call},
                        {"role": "tool", "id": call["id"], "outcome": outcome}]

    async def wait_for_answer(ctx: restate.ObjectContext, turn: str, messages: list[Any],
                              step: int, call: dict[str, Any], started: float) -> str | None:
        # Pending before the card shows: an answer can come the moment the person sees it,
        # and one that found nothing pending would be dropped (the card-before-pending
        # defect shows the card first).
        async def show() -> None:
            await ctx.run_typed(f"card {call['id']}", post, restate.RunOptions(),
                                "/cards/show", {"session": ctx.key(), "turn": turn,
                                                "tool_call": call["id"], "tool": call["name"],
                                                "args": call.get("args") or {}})

        if "card-before-pending" in defects:
            await show()
        awakeable_id, answer = ctx.awakeable(type_hint=str)
        kept = ({"id": call["id"], "name": call["name"]} if "pending-without-args" in defects
                else call)
        ctx.set("pending", {"call": kept, "turn": turn, "messages": messages, "step": step,
                            "awakeable": awakeable_id, "handed_off": False})
        if "card-before-pending" not in defects:
            await show()
        spent = timedelta(seconds=await ctx.time() - started)
        in_call = MAX_WAIT if "wait-in-call" in defects else max(HAND_OFF - spent, timedelta(0))
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
        if not pending["handed_off"]:
            ctx.resolve_awakeable(pending["awakeable"], body["decision"])
        # Sent in both cases: the hand-off may win the race with this answer after `pending`
        # was read (the in-call wait's timer fired first), and then nobody takes the
        # awakeable. `resume` runs after the turn that waited, and applies the answer only if
        # the call is still pending; when the in-call wait took it, it finds nothing to do.
        ctx.object_send(resume, ctx.key(), body)

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


def from_env() -> frozenset[str]:
    names = os.environ.get("AGENT_DEFECTS", "")
    return frozenset(n.strip() for n in names.split(",") if n.strip())


services = build(from_env())
app = restate.app(services)
