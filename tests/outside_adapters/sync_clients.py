"""Services written with restate-sdk and synchronous or other HTTP clients, as a user deploys
them: no durable-chaos import. tests/test_sdk_clients.py registers them on the simulator."""

from __future__ import annotations

import urllib.request
from typing import Any

import httpx
import requests
import restate

WORLD = "http://world.sim"
mailer = restate.VirtualObject("Mailer")

# Made at import, before any run, as a user's module-level client often is.
SESSION = requests.Session()


def complete(session: str) -> dict[str, Any]:
    response = requests.post(f"{WORLD}/model/complete", json={
        "session": session, "turn": "t", "step": 0, "idempotency_key": f"{session}:0",
        "messages": [{"role": "user", "plan": []}]}, timeout=30)
    if response.status_code >= 500:
        raise RuntimeError(f"model answered {response.status_code}: {response.text}")
    result: dict[str, Any] = response.json()
    return result


@mailer.handler()
async def model(ctx: restate.ObjectContext) -> dict[str, Any]:
    key = ctx.key()
    return await ctx.run_typed("model", lambda: complete(key))


@mailer.handler()
async def mail(ctx: restate.ObjectContext, subject: str) -> str:
    def send() -> str:
        response = SESSION.post(f"{WORLD}/email", json={
            "message_id": f"mail-{subject}", "to": "bob@example.com", "subject": subject,
            "body": "hi", "tool_call": f"tc-{subject}"})
        response.raise_for_status()
        body = b"".join(response.iter_content(8))  # as a streaming reader would
        return f"{response.status_code} {response.headers['content-type']} {len(body)}"

    return await ctx.run_typed("email", send)


@mailer.handler()
async def sync_httpx(ctx: restate.ObjectContext) -> dict[str, Any]:
    def lookup() -> dict[str, Any]:
        with httpx.Client(base_url=WORLD) as client:
            result: dict[str, Any] = client.post("/lookup", json={"name": "send_email"}).json()
        return result

    return await ctx.run_typed("lookup", lookup)


@mailer.handler()
async def outside(ctx: restate.ObjectContext, url: str) -> str:
    try:
        requests.get(url, timeout=5)
    except requests.ConnectionError as err:
        return f"{type(err).__name__}: {err}"
    return "reached"


@mailer.handler()
async def with_aiohttp(ctx: restate.ObjectContext) -> str:
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(f"{WORLD}/lookup") as response:
        return str(response.status)


@mailer.handler()
async def with_urllib(ctx: restate.ObjectContext, url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.status)
    except Exception as err:  # a user's catch-all must not turn the refusal into a result
        return f"caught {err}"


SERVICES = [mailer]
