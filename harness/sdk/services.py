"""A user's restate-sdk service objects as an app the simulator runs.

`sdk_app(services, version)` reads what restate-sdk's decorators recorded on the user's
`restate.Service` / `restate.VirtualObject` / `restate.Workflow` objects (their
`service_tag` and `handlers`), and wraps each handler so that the simulator drives it with
an `SdkContext`. The user's objects are not changed or copied: the handlers run as written.

How each kind maps onto the simulator's model:

| restate-sdk | simulator |
|---|---|
| `Service` handler | a service handler (no key, no state, runs concurrently) |
| `VirtualObject` handler, exclusive | an exclusive handler: one at a time per key, queued |
| `VirtualObject` handler, `kind="shared"` | a shared handler: concurrent, reads state |
| `Workflow` `@main` (`run`) | an exclusive handler that runs once per key |
| `Workflow` other handlers | shared handlers (signals, queries, promises) |

Arguments and results cross as bytes through each handler's own serde (`handler_io`), as
over Restate's protocol; `restate.TerminalError` ends the invocation with that error, any
other exception fails the attempt and the simulator retries it (Restate's default).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal, cast

import restate
from restate.handler import Handler as SdkHandler

from contract.binding import App, Handler, HandlerFn, Service, TerminalError
from harness.errors import SdkCallRefused, UsageError
from harness.sdk.context import SdkContext, sdk_state
from harness.sim.engine import SimContext

__all__ = ["SdkService", "handler_kinds", "sdk_app"]

SdkService = restate.Service | restate.VirtualObject | restate.Workflow


def sdk_app(services: Sequence[Any], version: str) -> App:
    """An `App` of the user's restate-sdk service objects, for `Simulator.register`."""
    out: list[Service] = []
    for service in services:
        if not isinstance(service, restate.Service | restate.VirtualObject | restate.Workflow):
            raise UsageError(
                f"expected restate.Service, restate.VirtualObject or restate.Workflow, got "
                f"{service!r} (type={type(service).__name__})")
        tag = service.service_tag
        if getattr(service, "context_managers", None):
            raise SdkCallRefused(
                f"service {tag.name}: invocation_context_managers are not supported on the "
                "simulator (they run around the SDK's own asyncio task)")
        handlers = []
        for name, handler in service.handlers.items():
            if handler.context_managers:
                raise SdkCallRefused(
                    f"handler {tag.name}/{name}: context_managers are not supported on the "
                    "simulator")
            # Private to the app's own services (the handler's or its service's
            # `ingress_private`): the simulator's ingress refuses it, as Restate's does.
            private = bool(handler.ingress_private or getattr(service, "ingress_private", None))
            handlers.append(Handler(name, _wrap(handler, tag.kind), _kind(handler), private))
        out.append(Service(tag.name, tuple(handlers),
                           "service" if tag.kind == "service" else "object"))
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise UsageError(f"two services share a name: {sorted(names)}")
    return App(version, tuple(out))


def handler_kinds(services: Sequence[Any]) -> dict[str, str]:
    """`service/handler` -> kind, for documentation and tests."""
    return {f"{s.service_tag.name}/{n}": str(h.kind or s.service_tag.kind)
            for s in services for n, h in s.handlers.items()}


def _kind(handler: SdkHandler[Any, Any]) -> Literal["exclusive", "shared"]:
    return "shared" if handler.kind == "shared" else "exclusive"


def _wrap(handler: SdkHandler[Any, Any], service_kind: str) -> HandlerFn:
    io = handler.handler_io
    fn: Any = handler.fn
    is_workflow_run = service_kind == "workflow" and handler.kind == "workflow"

    async def run(sim_ctx: SimContext, arg: Any) -> Any:
        sim, att = sim_ctx.simulator, sim_ctx.attempt
        state = sdk_state(sim)
        inv = att.invocation
        payload = encode_arg(arg)
        if is_workflow_run:
            first = state.workflow_runs.setdefault((inv.service, inv.key or ""), inv.id)
            if first != inv.id:
                state.error_codes[inv.id] = 409
                raise TerminalError(f"workflow {inv.service}/{inv.key} already ran "
                                    f"(invocation {first})", 409)
        ctx = SdkContext(sim, att, state, kind=service_kind, input_bytes=payload)
        try:
            if handler.arity == 2:
                try:
                    value = io.input_serde.deserialize(payload)
                except Exception as exc:
                    raise restate.TerminalError(
                        f"Unable to parse an input argument. {exc}") from exc
                out = await fn(ctx, value)
            else:
                out = await fn(ctx)
            return bytes(io.output_serde.serialize(out))
        except restate.TerminalError as err:
            state.error_codes[inv.id] = err.status_code
            raise TerminalError(err.message, err.status_code) from None

    return cast(HandlerFn, run)


def encode_arg(arg: Any) -> bytes:
    """An invocation's argument as bytes: what a handler sent is bytes already; what the
    harness sends is a JSON value, encoded as restate's ingress takes a JSON body."""
    if isinstance(arg, bytes):
        return arg
    return b"" if arg is None else json.dumps(arg).encode()
