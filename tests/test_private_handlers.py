"""Handlers private to an app's own services: the engine's ingress refuses them.

A handler another service calls with a body it built (a turn's start, a tool's result, the
end of a wait) could be forged by any client that reaches the ingress: Restate refuses a
handler marked `ingress_private` there with 400 ("the invoked service is not public"). The
simulator refuses it the same way, for the reference (`contract.binding.Handler.private`)
and for a user's restate-sdk services (`ingress_private` on the handler or its service),
while the app's own calls to it go on as before.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import restate
from refimpl_world import start

from contract.binding import App, Context, Handler, HandlerRef, Service
from harness.adapters.base import RunContext
from harness.errors import IngressRefused
from harness.history import History
from harness.run import status_of
from harness.sdk import SdkSimRuntime
from harness.sim import Simulator
from reference_impl.app import build_app


def _toy() -> App:
    async def inner(ctx: Context, arg: Any) -> Any:
        return f"inner {arg}"

    async def outer(ctx: Context, arg: Any) -> Any:
        return await ctx.service_call(HandlerRef("Svc", "inner"), arg)

    return App("v1", (Service("Svc", (Handler("outer", outer),
                                      Handler("inner", inner, private=True))),))


def test_the_simulator_refuses_a_private_handler_at_its_ingress_only() -> None:
    sim = Simulator(seed=1)
    sim.register(_toy())
    with pytest.raises(IngressRefused, match="Svc/inner: the invoked service is not public") \
            as refused:
        sim.invoke("Svc", "inner", "x")
    # What the client sees: Restate's status, read as the runner reads any refusal.
    assert status_of(refused.value) == 400
    assert sim.invocations == {}  # refused before it was an invocation
    # The app's own call to it is not the ingress's business.
    inv = sim.invoke("Svc", "outer", "x")
    sim.run()
    assert sim.invocation(inv).result == "inner x"


def test_the_reference_exposes_only_what_a_client_may_ask() -> None:
    """Public: a message, an answer, a background request, a cancel, the status reads, and
    PendingToolCall's `expire` (its own delayed send, which the harness's clock fires through
    Restate's ingress). Every other handler reports or commands between the services."""
    sim, _ = start(build_app)
    app = sim.latest.app
    public = {f"{s.name}/{h.name}" for s in app.services for h in s.handlers if not h.private}
    assert public == {"Controller/onMessage", "Controller/background", "Controller/cancel",
                      "Controller/status", "PendingToolCall/answer", "PendingToolCall/expire",
                      "PendingToolCall/status"}
    for service in app.services:
        for handler in service.handlers:
            if handler.private:
                with pytest.raises(IngressRefused):
                    sim.invoke(service.name, handler.name, {}, key="s1")
    assert sim.invocations == {}


def test_a_users_sdk_handler_marked_ingress_private_is_refused_on_the_simulator() -> None:
    svc = restate.Service("Greeter")

    @svc.handler()
    async def greet(ctx: restate.Context, name: str) -> str:
        return await ctx.service_call(secret, name)

    @svc.handler(ingress_private=True)
    async def secret(ctx: restate.Context, name: str) -> str:
        return f"secret {name}"

    hidden = restate.Service("Hidden", ingress_private=True)

    @hidden.handler()
    async def anything(ctx: restate.Context, name: str) -> str:
        return name

    rt = SdkSimRuntime(RunContext(seed=3, history=History()), [svc, hidden])
    try:
        for target in ("Greeter/secret", "Hidden/anything"):
            with pytest.raises(IngressRefused):
                rt.send(target, "bob")
        inv = rt.send("Greeter/greet", "bob")
        rt.sim.run()
        assert json.loads(rt.sim.invocations[inv].result) == "secret bob"
    finally:
        rt.close()
