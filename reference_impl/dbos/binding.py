"""The binding's `Context` on DBOS: each handler invocation is a DBOS workflow.

`install(engine)` makes one process serve an `App`; the workflow `names.WORKFLOW` runs a
handler with a `DbosContext`:

- `run` -> a DBOS step (`DBOS.run_step_async`). A step that fails with anything but a
  `TerminalError` fails the *attempt*, as on Restate: its failure is not recorded, and the
  handler runs again from the top in the same workflow, replaying the recorded steps (DBOS
  returns their outputs by position) up to the one that failed, which runs again. Code
  outside steps runs again too, as a Restate retry re-runs it: the thread log's
  `take_ownership` takes a new epoch, so a turn whose thread moved meanwhile continues as
  its owner. Before each retry the attempt checks that its host still runs the workflow (a
  recovery may have moved it); if not, this execution stops, as a Restate attempt that
  lost its connection does;
- virtual objects: an exclusive handler is a workflow of the partitioned `OBJECTS_QUEUE`,
  one per partition `service/key` at a time (DBOS keeps the lock, across crashes too); a
  shared handler (`status`) only reads state, so a call to one is a step that
  reads the committed state, with no workflow of its own. State is a table in DBOS's system
  database, read once per invocation (a step) and written once when the handler ends (a
  step): a replay reads what the first attempt read and writes nothing twice;
- calls and sends -> `DBOS.enqueue_workflow_with_options_async` with a workflow id derived
  from the caller's and a counter (so a replay enqueues nothing new) and no application
  version: new work goes to the latest version, as a call from an old-pinned Restate
  invocation goes to the newest deployment. Sends and awakeable resolutions are issued at
  the next durable operation of the handler (or at its end), in the order they were made;
- awakeables -> messages on the waiting workflow's `INBOX` topic, read with `DBOS.recv`;
  `select` reads the inbox until one of the futures it races has its message;
- durable time: with a `TimerPort` (the harness's virtual clock), `sleep` registers a timer
  (a step) that the port fires by sending the sleep's message to the inbox, `time` is the
  port's clock and a delayed send is a registration the port turns into an enqueue at its
  deadline. The `recv` of a wait that races a sleep is bounded by the sleep's seconds too:
  without a port (or should the port never fire) that bound is the timer.

The one difference from Restate that matters here: DBOS has no suspension. A workflow
waiting in `recv` holds its place in a process of its own application version until the
message comes, and only a process of that version can recover it. That is the pinning the
hand-off removes: the reference waits in-call for at most `hand_off_after`, then the wait is
a row of PendingToolCall that any version can complete.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar, cast

from dbos import DBOS
from dbos._context import get_local_dbos_context
from dbos._error import DBOSBaseException, DBOSException

from contract import binding
from contract.binding import JSON, App, DurableFuture, HandlerRef
from contract.ports import TimerPort
from reference_impl.dbos.names import (
    INBOX,
    OBJECTS_QUEUE,
    SERVICES_QUEUE,
    WORKFLOW,
    inbox_message,
    partition,
    workflow_of,
)
from reference_impl.dbos.state import StateStore

__all__ = ["DbosContext", "DbosEngine", "install", "invoke"]

T = TypeVar("T")

# A wait with no bound of its own still gives `recv` one (DBOS needs a timeout).
_LONG_WAIT = 30 * 86400.0
# Real seconds between two attempts of a handler (faults last seconds here; no growth).
_RETRY_INTERVAL = 0.25
_RESULT_POLL = 0.05


class _AttemptFailed(BaseException):
    """A step failed with a retryable error: the attempt ends (see the module docstring).

    A BaseException so that DBOS does not record it as the step's outcome (it records an
    Exception), and the step runs again when the attempt is retried.
    """

    def __init__(self, step: str, cause: BaseException) -> None:
        super().__init__(f"step {step!r} failed: {type(cause).__name__}: {cause}")
        self.cause = cause


class Superseded(RuntimeError):
    """This execution no longer runs its workflow (a recovery gave it to another host)."""


@dataclass
class DbosEngine:
    """What one process serves: the app, its host name, durable time and the state store."""

    app: App
    host: str
    state: StateStore
    timers: TimerPort | None = None
    _kinds: dict[tuple[str, str], str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for service in self.app.services:
            for handler in service.handlers:
                self._kinds[(service.name, handler.name)] = (
                    "shared" if service.kind == "object" and handler.kind == "shared"
                    else service.kind)

    def kind(self, target: HandlerRef) -> str:
        """"object" (exclusive), "shared" or "service"."""
        return self._kinds.get((target.service, target.handler), "service")

    async def run_handler(self, service: str, handler: str, key: str | None, arg: JSON) -> JSON:
        workflow_id = DBOS.workflow_id
        assert workflow_id is not None, "a handler runs inside its workflow"
        fn = self.app.service(service).handler(handler).fn
        attempt = 0
        while True:
            attempt += 1
            ctx = DbosContext(self, service, key, workflow_id)
            try:
                try:
                    result = await fn(ctx, arg)
                except binding.TerminalError:
                    # The invocation is over: what it decided so far still happens (as on
                    # Restate, where a terminal error completes it with its state and sends).
                    await ctx.finish()
                    raise
                await ctx.finish()
                return result
            except (binding.TerminalError, DBOSException, DBOSBaseException):
                raise
            except (_AttemptFailed, Exception) as exc:
                failure = exc
            print(f"[{self.host}] {workflow_id} {service}/{handler} attempt {attempt} failed "
                  f"({failure}); retrying", flush=True)
            await asyncio.sleep(_RETRY_INTERVAL)
            try:
                ours = await asyncio.to_thread(self.state.runs_on, workflow_id, self.host)
            except Exception:
                ours = True  # cannot tell now: retry, and ask again after the next failure
            if not ours:
                raise Superseded(f"{workflow_id} is no longer run by {self.host}")
            # Replay from the first recorded operation (DBOS numbers them from 0 per run).
            dbos_ctx = get_local_dbos_context()
            assert dbos_ctx is not None
            dbos_ctx.function_id = 0


_ENGINE: DbosEngine | None = None


def install(engine: DbosEngine) -> None:
    """Serve `engine` in this process (before `DBOS.launch()`)."""
    global _ENGINE
    _ENGINE = engine


@DBOS.workflow(name=WORKFLOW)
async def invoke(service: str, handler: str, key: str | None, arg: Any) -> Any:
    """One handler invocation (see the module docstring)."""
    if _ENGINE is None:
        raise RuntimeError("no app installed in this process: call install(engine) first")
    return await _ENGINE.run_handler(service, handler, key, arg)


class _Awakeable:
    def __init__(self, ctx: DbosContext, awakeable_id: str) -> None:
        self.ctx = ctx
        self.id = awakeable_id

    def __await__(self) -> Generator[Any, Any, Any]:
        _name, value = yield from self.ctx._wait({self.id: "value"}, None).__await__()
        return value


class _Sleep:
    """A sleep: a timer registered with the port when first awaited or raced."""

    def __init__(self, ctx: DbosContext, awakeable_id: str, seconds: float) -> None:
        self.ctx = ctx
        self.id = awakeable_id
        self.seconds = seconds
        self.registered = False

    async def register(self) -> None:
        timers = self.ctx.engine.timers
        if self.registered or timers is None:
            return
        self.registered = True
        invocation = self.ctx.invocation_id()

        async def register() -> float:
            return await timers.sleep(timer_id=self.id, awakeable=self.id,
                                      seconds=self.seconds, invocation=invocation)

        await self.ctx._step(f"timer:{self.id}", register)

    async def _wait(self) -> None:
        await self.register()
        if self.ctx.engine.timers is None:
            await DBOS.sleep_async(self.seconds)
            return
        await self.ctx._wait({self.id: "timeout"}, self.seconds, "timeout")

    def __await__(self) -> Generator[Any, Any, None]:
        yield from self._wait().__await__()
        return None


class _Call:
    """A call's result, awaited once."""

    def __init__(self, coro: Awaitable[JSON]) -> None:
        self.coro = coro

    def __await__(self) -> Generator[Any, Any, JSON]:
        return (yield from self.coro.__await__())


class DbosContext:
    """`binding.Context` inside a DBOS workflow (see the module docstring)."""

    def __init__(self, engine: DbosEngine, service: str, key: str | None,
                 workflow_id: str) -> None:
        self.engine = engine
        self._service = service
        self._key = key
        self._id = workflow_id
        self._counter = 0
        self._pending: list[Callable[[], Awaitable[Any]]] = []
        self._state: dict[str, JSON] | None = None
        self._dirty: dict[str, JSON] = {}
        self._inbox: dict[str, dict[str, Any]] = {}

    # -- identity

    def key(self) -> str:
        return self._key or ""

    def invocation_id(self) -> str:
        return self._id

    def host(self) -> str:
        return self.engine.host

    def _next_id(self, what: str) -> str:
        # Handler code is deterministic, so the n-th id of an invocation is the same on
        # every attempt: a replay enqueues or registers nothing new.
        self._counter += 1
        digest = hashlib.sha1(f"{self._id}/{self._counter}".encode()).hexdigest()[:16]
        return f"{what}-{digest}"

    # -- durable operations

    async def _flush(self) -> None:
        while self._pending:
            await self._pending.pop(0)()

    async def _step(self, name: str, action: Callable[[], Any]) -> Any:
        async def step() -> Any:
            try:
                result = action()
                if inspect.isawaitable(result):
                    result = await result
            except binding.TerminalError as exc:
                # Recorded as the step's outcome: a replay raises it again, no retry.
                raise binding.TerminalError(exc.message, exc.status_code) from None
            except Exception as exc:
                raise _AttemptFailed(name, exc) from exc
            return result

        return await DBOS.run_step_async({"name": name}, step)

    def run(self, name: str, action: Callable[[], Awaitable[T] | T]) -> Awaitable[T]:
        async def run() -> T:
            await self._flush()
            result: T = await self._step(name, action)
            return result

        return run()

    async def finish(self) -> None:
        """Before the workflow ends: issue what is pending and write the state once."""
        await self._flush()
        if self._dirty and self._key is not None:
            changes = dict(self._dirty)
            store, service, key = self.engine.state, self._service, self._key

            async def save() -> None:
                await asyncio.to_thread(store.write, service, key, changes)

            await self._step("state.save", save)
            self._dirty.clear()

    # -- time

    def sleep(self, delta: timedelta) -> DurableFuture[None]:
        return _Sleep(self, f"{self._id}::{self._next_id('t')}", delta.total_seconds())

    def time(self) -> Awaitable[float]:
        timers = self.engine.timers
        if timers is not None:
            return self.run("time", timers.now)

        def now() -> float:
            return time.time()

        return self.run("time", now)

    # -- awakeables and the inbox

    def awakeable(self) -> tuple[str, DurableFuture[JSON]]:
        awakeable_id = f"{self._id}::{self._next_id('a')}"
        return awakeable_id, _Awakeable(self, awakeable_id)

    def _resolve(self, awakeable_id: str, message: dict[str, object]) -> None:
        async def send() -> None:
            await DBOS.send_async(workflow_of(awakeable_id), message, topic=INBOX)

        self._pending.append(send)

    def resolve_awakeable(self, awakeable_id: str, value: JSON) -> None:
        self._resolve(awakeable_id, inbox_message(awakeable_id, value))

    def reject_awakeable(self, awakeable_id: str, reason: str) -> None:
        self._resolve(awakeable_id, inbox_message(awakeable_id, error=reason))

    async def _wait(self, ids: dict[str, str], bound: float | None,
                    timeout: str | None = None) -> tuple[str, Any]:
        """Read the inbox until one of `ids` (awakeable id -> name) has its message; returns
        (name, value).

        `bound`: the seconds of the shortest raced sleep (named `timeout`), given to `recv`
        as its timeout, so the wait is bounded even if the sleep's timer never fires.
        """
        await self._flush()
        while True:
            for awakeable_id, name in ids.items():
                message = self._inbox.pop(awakeable_id, None)
                if message is not None:
                    if message.get("error") is not None:
                        raise binding.TerminalError(str(message["error"]))
                    return name, message.get("value")
            message = await DBOS.recv_async(INBOX, timeout_seconds=bound or _LONG_WAIT)
            if message is None:
                if timeout is not None:
                    return timeout, None
                continue
            # A message for another future (a timer whose race was lost) waits here; a
            # replay reads the same messages in the same order.
            self._inbox[str(message["id"])] = dict(message)

    async def select(self, **futures: DurableFuture[Any]) -> tuple[str, Any]:
        ids: dict[str, str] = {}
        bound: float | None = None
        timeout: str | None = None
        for name, future in futures.items():
            if isinstance(future, _Sleep):
                await future.register()
                ids[future.id] = name
                if bound is None or future.seconds < bound:
                    bound, timeout = future.seconds, name
            elif isinstance(future, _Awakeable):
                ids[future.id] = name
            else:
                # All the reference code races is an awakeable against a sleep; a call's
                # result is awaited alone.
                raise TypeError(f"select on DBOS races awakeables and sleeps, not {name!r}")
        return await self._wait(ids, bound, timeout)

    # -- calls and sends

    def _options(self, target: HandlerRef, key: str | None, what: str) -> dict[str, Any]:
        options: dict[str, Any] = {
            "workflow_name": WORKFLOW, "workflow_id": self._next_id(what),
            "queue_name": SERVICES_QUEUE,
        }
        if key is not None and self.engine.kind(target) == "object":
            options["queue_name"] = OBJECTS_QUEUE
            options["queue_partition_key"] = partition(target.service, key)
        return options

    async def _enqueue(self, options: dict[str, Any], target: HandlerRef, key: str | None,
                       arg: JSON) -> Any:
        return await DBOS.enqueue_workflow_with_options_async(
            cast(Any, options), target.service, target.handler, key, arg)

    def _call(self, target: HandlerRef, key: str | None, arg: JSON) -> DurableFuture[JSON]:
        if key is not None and self.engine.kind(target) == "shared":
            return _Call(self._shared(target, key, arg))
        options = self._options(target, key, "call")

        async def call() -> JSON:
            await self._flush()
            handle = await self._enqueue(options, target, key, arg)
            return await handle.get_result(polling_interval_sec=_RESULT_POLL)

        return _Call(call())

    async def _shared(self, target: HandlerRef, key: str, arg: JSON) -> JSON:
        """A shared handler reads committed state only: run it inside one step here."""
        engine = self.engine
        fn = engine.app.service(target.service).handler(target.handler).fn

        async def read() -> JSON:
            state = await asyncio.to_thread(engine.state.read, target.service, key)
            return await fn(_ReadOnlyContext(self, key, state), arg)

        return await self.run(f"call:{target}:{key}", read)

    def service_call(self, target: HandlerRef, arg: JSON) -> DurableFuture[JSON]:
        return self._call(target, None, arg)

    def object_call(self, target: HandlerRef, key: str, arg: JSON) -> DurableFuture[JSON]:
        return self._call(target, key, arg)

    def _send(self, target: HandlerRef, key: str | None, arg: JSON,
              send_delay: timedelta | None) -> None:
        options = self._options(target, key, "send")
        delay = send_delay.total_seconds() if send_delay is not None else 0.0
        timers = self.engine.timers
        if send_delay is not None and timers is not None:
            timer_id = str(options["workflow_id"])

            async def register() -> float:
                return await timers.send(timer_id=timer_id, service=target.service,
                                         handler=target.handler, key=key, arg=arg,
                                         seconds=delay)

            async def registration() -> None:
                await self._step(f"timer:{timer_id}", register)

            self._pending.append(registration)
            return
        if delay > 0:
            options["delay_seconds"] = delay

        async def send() -> None:
            await self._enqueue(options, target, key, arg)

        self._pending.append(send)

    def service_send(
        self, target: HandlerRef, arg: JSON, send_delay: timedelta | None = None
    ) -> None:
        self._send(target, None, arg, send_delay)

    def object_send(
        self, target: HandlerRef, key: str, arg: JSON, send_delay: timedelta | None = None
    ) -> None:
        self._send(target, key, arg, send_delay)

    # -- state

    async def _load(self) -> dict[str, JSON]:
        if self._state is None:
            store, service, key = self.engine.state, self._service, self.key()

            async def load() -> dict[str, JSON]:
                return await asyncio.to_thread(store.read, service, key)

            await self._flush()
            state: dict[str, JSON] = dict(await self._step("state.load", load))
            # Writes made before the first read show in it.
            for name, value in self._dirty.items():
                if value is None:
                    state.pop(name, None)
                else:
                    state[name] = value
            self._state = state
        return self._state

    def get(self, name: str) -> Awaitable[JSON | None]:
        async def get() -> JSON | None:
            state = await self._load()
            return state.get(name)

        return get()

    def set(self, name: str, value: JSON) -> None:
        # A JSON round trip: the handler must not see its own later mutations of `value`.
        value = json.loads(json.dumps(value))
        if self._state is not None:
            self._state[name] = value
        self._dirty[name] = value

    def clear(self, name: str) -> None:
        if self._state is not None:
            self._state.pop(name, None)
        self._dirty[name] = None


class _ReadOnlyContext:
    """What a shared handler gets: the key and committed state, nothing durable."""

    def __init__(self, parent: DbosContext, key: str, state: dict[str, JSON]) -> None:
        self._parent = parent
        self._key = key
        self._state = state

    def key(self) -> str:
        return self._key

    def invocation_id(self) -> str:
        return self._parent.invocation_id()

    def host(self) -> str:
        return self._parent.host()

    def get(self, name: str) -> Awaitable[JSON | None]:
        async def get() -> JSON | None:
            return self._state.get(name)

        return get()

    def __getattr__(self, name: str) -> Any:
        raise binding.TerminalError(f"a shared handler on DBOS only reads state ({name})", 500)
