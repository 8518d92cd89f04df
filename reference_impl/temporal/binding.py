"""The binding's `Context` on Temporal, and an `App` as two generic workflows.

The reference code (Controller, doTurn, ChatToolExecutor, PendingToolCall) is written against
`contract.binding.Context`, whose model is Restate's: services, virtual objects (one
exclusive handler at a time per key, key/value state), journaled steps, awakeables, calls and
one-way sends. On Temporal each of those becomes a workflow:

- a **service invocation** (doTurn) is one `ServiceWorkflow` execution, workflow id = the
  invocation id, **PINNED**: it runs to its end on the worker deployment version that started
  it, as a Restate invocation stays on its deployment. A turn that hands its wait off ends its
  workflow, so its version is free after at most `hand_off_after`;
- a **virtual object** (Controller per session, PendingToolCall per tool call) is one
  long-lived `ObjectWorkflow` per key (workflow id `Service/key`) that takes invocations as
  signals, runs them one at a time in arrival order and keeps the object's state in the
  workflow. It is **AUTO_UPGRADE**: its next workflow task goes to the current version, so a
  wait kept as its state (an 8-day approval) never keeps an old version alive. The price of
  AUTO_UPGRADE is replay compatibility across versions: every version runs these same two
  workflow classes and the same handler code, which is why the handler code stays in
  `reference_impl` and only the binding knows about Temporal. It continues as new when
  Temporal suggests it, carrying its state and its queue;
- `ctx.run(name, action)` is a **local activity** of the worker that runs the workflow: the
  action (a closure over the ports) is put in a process-wide table under a deterministic key
  and the local activity runs it on the worker's own event loop. Its result is journaled as
  a marker: on replay the local activity is not run again, as a completed `ctx.run` is not on
  Restate; an action cut off by a crash runs again. A `binding.TerminalError` is a
  non-retryable failure; anything else is retried (as Restate retries a failed run);
- awakeables, call replies and invocations are **signals** (`resolve`, `reply`, `invoke`),
  sent by the local activity `deliver` with the worker's client: an object invocation is a
  signal-with-start of the object's workflow, a service invocation a start with a
  deterministic workflow id (a second start of the same id is a no-op), so a delivery
  retried after a crash happens once; objects also drop an invocation id they have seen;
- durable time is the `TimerPort`'s (the harness's virtual clock): a sleep is an awakeable the
  port resolves (a `resolve` signal) once its clock passes the deadline, a delayed send a
  registration the port turns into the delivery at its deadline, `time()` a journaled read of
  the port's clock. Temporal's own timers would cost real time on the dev server, which
  worker versioning needs (the time-skipping test server has no worker deployments).

Some I/O is deliberately outside any step: each attempt of a turn takes ownership of the
thread log (a new epoch) and reads the committed log, so that a replay on another host
fences off the host before it instead of replaying its epoch. On Temporal an attempt is an
execution of the workflow code from the top on a worker (a first run, or a replay after a
crash, a pause or an eviction). The worker hands the ports to the app through `Bridged`,
which runs a port's coroutine, when workflow code calls it, on an event loop of the worker
(a thread of its own) and waits for it: the workflow's event loop cannot do I/O. A wait
longer than Temporal's deadlock timeout (2 s) fails the workflow task, which is retried: one
more attempt, as when a Restate attempt fails.

Workflows run unsandboxed (`UnsandboxedWorkflowRunner`): the local activity must find the
closure the workflow registered in the same process, and the handler code is deterministic
by construction (every effect, clock read and random draw is inside `ctx.run`).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar, cast

from temporalio import activity, workflow
from temporalio.common import (
    RetryPolicy,
    VersioningBehavior,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import ActivityError, ApplicationError

from contract import binding
from contract.binding import JSON, App, DurableFuture, HandlerRef
from contract.ports import TimerPort

__all__ = [
    "ACTIVITIES",
    "HOST_ENV",
    "TASK_QUEUE",
    "WORKFLOWS",
    "Bridged",
    "ObjectWorkflow",
    "ServiceWorkflow",
    "WorkerRuntime",
    "awakeable_workflow",
    "install",
    "object_workflow_id",
]

T = TypeVar("T")

HOST_ENV = "DURABLE_CHAOS_HOST"
TASK_QUEUE = "durable-chaos"
OBJECT_WORKFLOW = "DurableChaosObject"
SERVICE_WORKFLOW = "DurableChaosService"
# An awakeable's id names the workflow that waits on it, so whoever resolves it (another
# workflow, the harness's clock, the person's answer) knows where to signal.
_AWAKEABLE_SEP = "|awk|"
_TERMINAL = "TerminalError"

# A step is retried as Restate retries a run: without end, backing off to a few seconds.
_STEP_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200),
                          maximum_interval=timedelta(seconds=2), maximum_attempts=0,
                          non_retryable_error_types=[_TERMINAL])
# A step that fails fails its attempt, as a failed `ctx.run` fails a Restate attempt: the
# workflow task fails, Temporal retries it, and the worker replays the workflow from the top,
# so the retry takes ownership of the thread log again (a stale epoch is not retried for
# ever). Deliveries are the engine's own plumbing: retried in place.
_ATTEMPT = RetryPolicy(maximum_attempts=1)
_STEP_TIMEOUT = timedelta(seconds=30)
# A workflow task of a crashed or frozen worker goes to another worker after this.
WORKFLOW_TASK_TIMEOUT = timedelta(seconds=2)


class AttemptFailed(RuntimeError):
    """A step failed: this attempt of the invocation ends and the engine retries it."""


@dataclass
class WorkerRuntime:
    """What one worker process gives its workflows: the app, the ports' clock, a client."""

    app: App
    timers: TimerPort | None
    client: Any  # temporalio.client.Client
    host: str


_RUNTIME: WorkerRuntime | None = None
# Step key -> the action a workflow registered for its local activity (same process).
_STEPS: dict[str, Callable[[], Any]] = {}


def install(runtime: WorkerRuntime) -> None:
    """Called once by the worker process before it polls."""
    global _RUNTIME
    _RUNTIME = runtime


def _runtime() -> WorkerRuntime:
    if _RUNTIME is None:
        raise RuntimeError("reference_impl.temporal.binding.install() was not called: run "
                           "workflows with reference_impl.temporal.worker")
    return _RUNTIME


def object_workflow_id(service: str, key: str) -> str:
    return f"{service}/{key}"


def awakeable_workflow(awakeable_id: str) -> str:
    """The workflow id that waits on `awakeable_id`."""
    return awakeable_id.split(_AWAKEABLE_SEP, 1)[0]


def invocation_message(invocation: str, handler: str, arg: JSON,
                       reply_to: dict[str, str] | None = None) -> dict[str, Any]:
    return {"id": invocation, "handler": handler, "arg": arg, "reply_to": reply_to}


class Bridged:
    """A port whose coroutine methods, called from workflow code, run on `loop` (an event
    loop on a thread of its own) while the workflow's thread waits; called anywhere else (a
    step, on the worker's loop), they run as they are."""

    def __init__(self, inner: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._inner = inner
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            if not workflow.in_workflow():
                return await attr(*args, **kwargs)
            future = asyncio.run_coroutine_threadsafe(attr(*args, **kwargs), self._loop)
            return future.result()

        return call


# -- local activities ---------------------------------------------------------------------


@activity.defn(name="durable_chaos.step")
async def run_step(key: str) -> Any:
    action = _STEPS.get(key)
    if action is None:
        # The workflow that registered it was evicted from this worker; its next attempt
        # registers it again.
        raise ApplicationError(f"step {key} is not registered in this worker")
    try:
        result = action()
        if inspect.isawaitable(result):
            result = await result
    except binding.TerminalError as exc:
        raise ApplicationError(exc.message, exc.status_code, type=_TERMINAL,
                               non_retryable=True) from exc
    return result


@activity.defn(name="durable_chaos.deliver")
async def deliver(kind: str, target: str, payload: dict[str, Any]) -> bool:
    """Deliver a signal, an object invocation or a service invocation; idempotent."""
    return await deliver_with(_runtime().client, kind, target, payload)


async def deliver_with(client: Any, kind: str, target: str, payload: dict[str, Any]) -> bool:
    """What `deliver` does, with any client (the harness's too). Returns False when a signal
    has no one to go to (the workflow has completed: the other branch of its race won)."""
    from temporalio.exceptions import WorkflowAlreadyStartedError
    from temporalio.service import RPCError

    if kind == "object":
        await client.start_workflow(
            OBJECT_WORKFLOW, {"service": payload["service"], "key": payload["key"]},
            id=target, task_queue=TASK_QUEUE, start_signal="invoke",
            start_signal_args=[payload["message"]],
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            task_timeout=WORKFLOW_TASK_TIMEOUT)
        return True
    if kind == "service":
        try:
            await client.start_workflow(
                SERVICE_WORKFLOW, {"service": payload["service"], "message": payload["message"]},
                id=target, task_queue=TASK_QUEUE,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                task_timeout=WORKFLOW_TASK_TIMEOUT)
        except WorkflowAlreadyStartedError:
            pass  # delivered before this retry
        return True
    try:
        await client.get_workflow_handle(target).signal(kind, args=list(payload["args"]))
    except RPCError as exc:
        if "not found" in str(exc).lower() or "completed" in str(exc).lower():
            return False
        raise
    return True


ACTIVITIES: list[Callable[..., Any]] = [run_step, deliver]


# -- futures ------------------------------------------------------------------------------


class _Slot:
    """A value a signal will bring (an awakeable's or a call's result)."""

    def __init__(self, table: dict[str, tuple[bool, Any]], key: str) -> None:
        self.table = table
        self.key = key

    def ready(self) -> bool:
        return self.key in self.table

    def result(self) -> Any:
        ok, value = self.table[self.key]
        if not ok:
            raise binding.TerminalError(str(value))
        return value

    def __await__(self) -> Generator[Any, Any, Any]:
        yield from workflow.wait_condition(self.ready).__await__()
        return self.result()


class _PortSleep:
    """A sleep kept by the `TimerPort`: its registration step, then the awakeable."""

    def __init__(self, registration: Awaitable[Any], awakeable: _Slot) -> None:
        self._registration = registration
        self._registered = False
        self.awakeable = awakeable

    async def register(self) -> None:
        if not self._registered:
            self._registered = True
            await self._registration

    def __await__(self) -> Generator[Any, Any, None]:
        yield from self.register().__await__()
        yield from self.awakeable.__await__()
        return None


class _Once:
    """An awaitable that runs its coroutine at most once (a step awaited by `select` and
    again by the handler)."""

    def __init__(self, make: Callable[[], Awaitable[Any]]) -> None:
        self._make = make
        self._done = False
        self._value: Any = None

    def __await__(self) -> Generator[Any, Any, Any]:
        if not self._done:
            self._value = yield from self._make().__await__()
            self._done = True
        return self._value


# -- the context --------------------------------------------------------------------------


class _Base:
    """What both workflows share: awakeable and reply slots, filled by signals."""

    def __init__(self) -> None:
        self.resolved: dict[str, tuple[bool, Any]] = {}
        self.replies: dict[str, tuple[bool, Any]] = {}

    @workflow.signal(name="resolve")
    def resolve(self, awakeable_id: str, ok: bool, value: Any) -> None:
        self.resolved.setdefault(awakeable_id, (ok, value))

    @workflow.signal(name="reply")
    def reply(self, call_id: str, ok: bool, value: Any) -> None:
        self.replies.setdefault(call_id, (ok, value))


class TemporalContext:
    """`binding.Context` inside one of the two workflows, for one invocation."""

    def __init__(self, wf: _Base, invocation: str, key: str | None,
                 state: dict[str, Any] | None = None) -> None:
        self._wf = wf
        self._invocation = invocation
        self._key = key
        self._state = state if state is not None else {}
        self._seq = 0
        self._pending: list[Any] = []
        rt = _runtime()
        self._timers = rt.timers
        self._host = rt.host

    def _next(self, what: str) -> str:
        # Handler code is deterministic, so the n-th operation of an invocation is the same
        # operation on every replay: its id is stable.
        self._seq += 1
        return f"{self._invocation}>{what}{self._seq}"

    def key(self) -> str:
        if self._key is None:
            raise binding.TerminalError("key() outside a virtual object")
        return self._key

    def invocation_id(self) -> str:
        return self._invocation

    def host(self) -> str:
        return os.environ.get(HOST_ENV, self._host)

    def run(self, name: str, action: Callable[[], Awaitable[T] | T]) -> Awaitable[T]:
        step = f"{workflow.info().run_id}:{self._next('run')}"

        async def go() -> Any:
            _STEPS[step] = action
            try:
                return await workflow.execute_local_activity(
                    run_step, step, start_to_close_timeout=_STEP_TIMEOUT,
                    retry_policy=_ATTEMPT, summary=name)
            except (ActivityError, ApplicationError) as exc:
                # A local activity's last failure may come as the ApplicationError itself.
                cause = exc.cause if isinstance(exc, ActivityError) else exc
                if isinstance(cause, ApplicationError) and cause.type == _TERMINAL:
                    raise binding.TerminalError(cause.message) from None
                # Not a Temporal failure: fails the workflow task (see _ATTEMPT).
                raise AttemptFailed(f"step {name!r} failed: {cause or exc}") from None
            finally:
                _STEPS.pop(step, None)

        return cast(Awaitable[T], _Once(go))

    def _deliver(self, kind: str, target: str, payload: dict[str, Any]) -> Awaitable[Any]:
        return workflow.execute_local_activity(
            deliver, args=[kind, target, payload], start_to_close_timeout=_STEP_TIMEOUT,
            retry_policy=_STEP_RETRY, summary=f"{kind} {target}")

    def _fire(self, kind: str, target: str, payload: dict[str, Any]) -> None:
        # Sends are fire-and-forget in the binding; the invocation awaits them before it
        # ends (`flush`), so none is lost with the workflow.
        self._pending.append(self._deliver(kind, target, payload))

    async def flush(self) -> None:
        while self._pending:
            await self._pending.pop(0)

    def sleep(self, delta: timedelta) -> DurableFuture[None]:
        timers = self._timers
        if timers is None:
            return cast(DurableFuture[None], workflow.sleep(delta))
        awakeable_id, slot = self._awakeable()
        invocation = self._invocation

        async def register() -> float:
            return await timers.sleep(timer_id=awakeable_id, awakeable=awakeable_id,
                                      seconds=delta.total_seconds(), invocation=invocation)

        return cast(DurableFuture[None], _PortSleep(self.run(f"timer:{awakeable_id}",
                                                             register), slot))

    def _awakeable(self) -> tuple[str, _Slot]:
        awakeable_id = (f"{workflow.info().workflow_id}{_AWAKEABLE_SEP}"
                        f"{workflow.info().run_id[:8]}.{self._next('awk')}")
        return awakeable_id, _Slot(self._wf.resolved, awakeable_id)

    def awakeable(self) -> tuple[str, DurableFuture[JSON]]:
        awakeable_id, slot = self._awakeable()
        return awakeable_id, cast(DurableFuture[JSON], slot)

    def resolve_awakeable(self, awakeable_id: str, value: JSON) -> None:
        self._fire("resolve", awakeable_workflow(awakeable_id),
                   {"args": [awakeable_id, True, value]})

    def reject_awakeable(self, awakeable_id: str, reason: str) -> None:
        self._fire("resolve", awakeable_workflow(awakeable_id),
                   {"args": [awakeable_id, False, reason]})

    def _invoke(self, target: HandlerRef, key: str | None, arg: JSON,
                reply: bool) -> tuple[str, Awaitable[Any]]:
        invocation = self._next("call" if reply else "send")
        reply_to = ({"workflow": workflow.info().workflow_id, "call": invocation}
                    if reply else None)
        message = invocation_message(invocation, target.handler, arg, reply_to)
        if key is None:
            sent = self._deliver("service", f"{target.service}:{invocation}",
                                 {"service": target.service, "message": message})
        else:
            sent = self._deliver("object", object_workflow_id(target.service, key),
                                 {"service": target.service, "key": key, "message": message})
        return invocation, sent

    def _call(self, target: HandlerRef, key: str | None, arg: JSON) -> DurableFuture[JSON]:
        call_id, sent = self._invoke(target, key, arg, reply=True)
        slot = _Slot(self._wf.replies, call_id)

        async def call() -> Any:
            await sent
            return await slot

        return cast(DurableFuture[JSON], _Once(call))

    def service_call(self, target: HandlerRef, arg: JSON) -> DurableFuture[JSON]:
        return self._call(target, None, arg)

    def object_call(self, target: HandlerRef, key: str, arg: JSON) -> DurableFuture[JSON]:
        return self._call(target, key, arg)

    def _send(self, target: HandlerRef, key: str | None, arg: JSON,
              send_delay: timedelta | None) -> None:
        if send_delay is None:
            self._pending.append(self._invoke(target, key, arg, reply=False)[1])
            return
        timers = self._timers
        if timers is None:
            raise binding.TerminalError("a delayed send needs the TimerPort "
                                        "(DURABLE_CHAOS_TIMERS_URL)")
        timer_id = self._next("timer")

        async def register() -> float:
            return await timers.send(timer_id=timer_id, service=target.service,
                                     handler=target.handler, key=key, arg=arg,
                                     seconds=send_delay.total_seconds())

        self._pending.append(self.run(f"timer:{timer_id}", register))

    def service_send(self, target: HandlerRef, arg: JSON,
                     send_delay: timedelta | None = None) -> None:
        self._send(target, None, arg, send_delay)

    def object_send(self, target: HandlerRef, key: str, arg: JSON,
                    send_delay: timedelta | None = None) -> None:
        self._send(target, key, arg, send_delay)

    async def get(self, name: str) -> JSON | None:
        return self._state.get(name)

    def set(self, name: str, value: JSON) -> None:
        self._state[name] = value

    def clear(self, name: str) -> None:
        self._state.pop(name, None)

    async def select(self, **futures: DurableFuture[Any]) -> tuple[str, Any]:
        slots: dict[str, _Slot] = {}
        for name, future in futures.items():
            if isinstance(future, _PortSleep):
                await future.register()
                slots[name] = future.awakeable
            elif isinstance(future, _Slot):
                slots[name] = future
            else:
                raise TypeError(f"select() on Temporal races awakeables and sleeps, not "
                                f"{type(future).__name__}")
        await workflow.wait_condition(lambda: any(s.ready() for s in slots.values()))
        # In declaration order: what arrived in one workflow task is decided the same way on
        # every replay.
        for name, slot in slots.items():
            if slot.ready():
                return name, slot.result()
        raise AssertionError("unreachable")

    def time(self) -> Awaitable[float]:
        timers = self._timers
        if timers is not None:
            return self.run("time", timers.now)
        return self.run("time", time.time)


async def _run_handler(wf: _Base, service: str, message: dict[str, Any], key: str | None,
                       state: dict[str, Any] | None) -> tuple[bool, Any]:
    handler = _runtime().app.service(service).handler(str(message["handler"]))
    ctx = TemporalContext(wf, str(message["id"]), key, state)
    try:
        result = await handler.fn(ctx, message["arg"])
        await ctx.flush()
        outcome: tuple[bool, Any] = (True, result)
    except binding.TerminalError as exc:
        await ctx.flush()
        outcome = (False, exc.message)
    reply_to = message.get("reply_to")
    if reply_to:
        await ctx._deliver("reply", str(reply_to["workflow"]),
                           {"args": [reply_to["call"], outcome[0], outcome[1]]})
    return outcome


@workflow.defn(name=SERVICE_WORKFLOW, versioning_behavior=VersioningBehavior.PINNED)
class ServiceWorkflow(_Base):
    """One invocation of a service handler (doTurn): pinned to the version that started it."""

    @workflow.run
    async def run(self, start: dict[str, Any]) -> Any:
        ok, value = await _run_handler(self, str(start["service"]), start["message"], None,
                                       None)
        if not ok:
            raise ApplicationError(str(value), type=_TERMINAL, non_retryable=True)
        return value


@workflow.defn(name=OBJECT_WORKFLOW, versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class ObjectWorkflow(_Base):
    """One virtual object (one key): exclusive invocations in order, state kept here."""

    def __init__(self) -> None:
        super().__init__()
        self.queue: list[dict[str, Any]] = []
        self.seen: set[str] = set()

    @workflow.signal(name="invoke")
    def invoke(self, message: dict[str, Any]) -> None:
        invocation = str(message["id"])
        if invocation in self.seen:
            return  # a delivery retried after a crash
        self.seen.add(invocation)
        self.queue.append(message)

    @workflow.run
    async def run(self, start: dict[str, Any]) -> None:
        service, key = str(start["service"]), str(start["key"])
        state: dict[str, Any] = dict(start.get("state") or {})
        self.seen.update(start.get("seen") or ())
        self.queue[:0] = list(start.get("queue") or ())
        while True:
            await workflow.wait_condition(lambda: bool(self.queue))
            message = self.queue.pop(0)
            await _run_handler(self, service, message, key, state)
            if workflow.info().is_continue_as_new_suggested() and not self.queue:
                workflow.continue_as_new({"service": service, "key": key, "state": state,
                                          "seen": sorted(self.seen), "queue": self.queue})


WORKFLOWS = [ServiceWorkflow, ObjectWorkflow]
