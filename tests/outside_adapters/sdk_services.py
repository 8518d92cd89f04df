"""Services written against restate-sdk alone, as a user deploys them: no durable-chaos
import. tests/test_sdk_sim.py registers them on the simulator unchanged."""

from __future__ import annotations

import random
import time
import uuid
from datetime import timedelta
from typing import Any

import httpx
import restate

counter = restate.VirtualObject("Counter")
greeter = restate.Service("Greeter")
flow = restate.Workflow("Signup")
racer = restate.VirtualObject("Racer")
clocks = restate.VirtualObject("Clocks")

# Side effects seen by the test (outside the journal on purpose: a re-run shows here).
EFFECTS: list[str] = []


@greeter.handler()
async def greet(ctx: restate.Context, name: str) -> str:
    def effect() -> str:
        EFFECTS.append(f"greet {name}")
        return f"hello {name}"

    text = await ctx.run_typed("greet", effect)
    if name == "nobody":
        raise restate.TerminalError("nobody to greet", status_code=404)
    return text


@counter.handler()
async def add(ctx: restate.ObjectContext, amount: int) -> int:
    total = (await ctx.get("total", type_hint=int) or 0) + amount
    ctx.set("total", total)
    return total


@counter.handler(kind="shared")
async def read(ctx: restate.ObjectSharedContext) -> int:
    return await ctx.get("total", type_hint=int) or 0


@counter.handler()
async def tour(ctx: restate.ObjectContext, name: str) -> dict[str, Any]:
    """One of nearly everything the SDK's context offers."""
    greeting = await ctx.service_call(greet, name)
    try:
        await ctx.service_call(greet, "nobody")
        failed = ""
    except restate.TerminalError as err:
        failed = f"{err.status_code} {err.message}"
    # Another key: the same one would wait behind this exclusive handler forever.
    total = await ctx.object_call(add, "bank", 5)
    ctx.object_send(add, "bank", 100, send_delay=timedelta(hours=1))
    ctx.set("scratch", [1, 2])
    keys = await ctx.state_keys()
    ctx.clear("scratch")
    await ctx.sleep(timedelta(days=2))
    now = await ctx.time()
    signup = await ctx.workflow_call(run_signup, f"user-{ctx.key()}", {"email": "a@b"})
    futures = [ctx.run_typed(f"step {i}", lambda i=i: i * i) for i in range(3)]
    await restate.gather(*futures)
    squares = [await f for f in futures]
    done, _ = await restate.wait_completed(ctx.sleep(timedelta(seconds=1)))
    seen = [await f async for f in restate.as_completed(ctx.run_typed("a", lambda: "a"))]
    return {"greeting": greeting, "failed": failed, "total": total, "keys": keys,
            "now": now, "signup": signup, "squares": squares, "done": len(done),
            "seen": seen, "random": ctx.random().random(), "uuid": str(ctx.uuid()),
            "headers": ctx.request().headers, "key": ctx.key()}


@flow.main()
async def run_signup(ctx: restate.WorkflowContext, body: dict[str, Any]) -> str:
    ctx.set("email", body["email"])
    if body.get("wait"):
        approval = await ctx.promise("approval", type_hint=str).value()
        return f"signed up {ctx.key()} after {approval}"
    return f"signed up {ctx.key()} ({await ctx.get('email')})"


@flow.handler()
async def approve(ctx: restate.WorkflowSharedContext, value: str) -> None:
    await ctx.promise("approval").resolve(value)


@flow.handler()
async def peek(ctx: restate.WorkflowSharedContext) -> str | None:
    return await ctx.promise("approval", type_hint=str).peek()


@racer.handler()
async def flaky(ctx: restate.ObjectContext) -> str:
    def fail() -> str:
        EFFECTS.append("flaky")
        raise ValueError("always")

    try:
        return await ctx.run_typed("flaky", fail, restate.RunOptions(max_attempts=3))
    except restate.TerminalError as err:
        return f"gave up: {err.message}"


@racer.handler()
async def race(ctx: restate.ObjectContext, timeout_s: float) -> str:
    awakeable_id, answer = ctx.awakeable(type_hint=str)
    ctx.set("awakeable", awakeable_id)
    match await restate.select(answer=answer, timeout=ctx.sleep(timedelta(seconds=timeout_s))):
        case ["answer", value]:
            result = f"answer {value}"
        case _:
            result = "timeout"
    ctx.set("result", result)
    return result


@racer.handler(kind="shared")
async def answer(ctx: restate.ObjectSharedContext, value: str) -> None:
    awakeable_id = await ctx.get("awakeable")
    if awakeable_id is not None:
        ctx.resolve_awakeable(awakeable_id, value)


@racer.handler()
async def scoped(ctx: restate.ObjectContext) -> None:
    ctx.scope("tenant")


@clocks.handler()
async def stray(ctx: restate.ObjectContext) -> dict[str, Any]:
    """Reads outside the journal: wall clock, module random, uuid4, an HTTP call."""
    async with httpx.AsyncClient(base_url="http://world.sim") as client:
        response = await client.post("/lookup", json={"name": "send_email"})
    out = {"time": time.time(), "random": random.random(), "uuid4": str(uuid.uuid4()),
           "lookup": response.json()}
    ctx.set("stray", out)
    return out


@clocks.handler()
async def entropy(ctx: restate.ObjectContext) -> str:
    """Reads the simulator cannot replay: the process's entropy."""
    import secrets

    token = secrets.token_hex(4)
    ctx.set("token", token)
    return token


@clocks.handler()
async def model(ctx: restate.ObjectContext) -> dict[str, Any]:
    async def complete() -> dict[str, Any]:
        async with httpx.AsyncClient(base_url="http://world.sim") as client:
            response = await client.post("/model/complete", json={
                "session": ctx.key(), "turn": "t", "step": 0, "idempotency_key": "k1",
                "messages": [{"role": "user", "plan": []}]})
        if response.status_code >= 500:
            raise RuntimeError(f"model answered {response.status_code}")
        result: dict[str, Any] = response.json()
        return result

    return await ctx.run_typed("model", complete)


SERVICES = [counter, greeter, flow, racer, clocks]
