"""restate-sdk's handler context, implemented over the simulator's journal.

A user's handler gets `SdkContext`, a subclass of restate-sdk's own abstract context classes
(`restate.WorkflowContext` and `restate.WorkflowSharedContext`, which include `Context`,
`ObjectContext`, `ObjectSharedContext` and `KeyValueStore`): if a new SDK version adds an
abstract method, instantiating it fails at once instead of a handler meeting an
`AttributeError` mid-run. Each method either writes the simulator's journal the way
`harness.sim.engine.SimContext` does, or is refused (`REFUSED` in `harness.sdk.api`) with one
error naming the call.

Futures are subclasses of the SDK's `ServerDurableFuture` family, because `restate.select`,
`gather`, `wait_completed` and `as_completed` check for exactly that type and then talk to
`future.context` (`vm.is_completed(handle)`, `create_poll_or_cancel_coroutine(...)`). The
`context` they see is `_Poller`, this module's stand-in for the SDK's VM; so the user's own
calls of those helpers run unchanged. Rejected: handing out a `select` through the context
(user code calls the module-level function), and re-implementing the helpers (a new SDK's
helper would silently bypass the simulator).

Values cross the journal as bytes, through the serde the SDK would use (`DefaultSerde`
with the type hint, or the one the user passed): a replay deserialises again, so a mutated
result never leaks into the replay, and what the real SDK cannot serialise fails here too.

Deterministic replay of races: which futures count as completed when user code asks (the
first check in `wait_completed`, and after a poll) is itself journaled (`peek` entries), as
Restate's VM replays completions in their recorded order; otherwise a replay after a crash
could see a later completion and pick another winner.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Generator
from datetime import timedelta
from random import Random
from types import CoroutineType
from typing import Any, cast
from uuid import UUID

import restate
from restate.context import AttemptFinishedEvent, Request, RunOptions, ScopedContext, SendHandle
from restate.handler import Handler as SdkHandler
from restate.handler import handler_from_callable
from restate.serde import BytesSerde, DefaultSerde, Serde
from restate.server_context import (
    ServerCallDurableFuture,
    ServerDurableFuture,
    ServerDurableSleepFuture,
)
from restate.types import extract_core_type
from restate.vm import (
    AllCompletedUnresolvedFuture,
    FirstCompletedUnresolvedFuture,
    SingleUnresolvedFuture,
)

from harness.errors import SdkCallRefused
from harness.sim.engine import Fenced, Simulator
from harness.sim.model import Attempt, Entry, Invocation

__all__ = ["Refused", "SdkContext", "SdkState", "sdk_state"]


class Refused(BaseException):
    """Carries an `SdkCallRefused` out of the handler: a BaseException so that neither the
    simulator's retry (it retries `Exception`s) nor the user's `except Exception` keeps a run
    going whose handler asked for something the simulator does not model."""

    def __init__(self, error: SdkCallRefused) -> None:
        super().__init__(str(error))
        self.error = error


def refuse(call: str, why: str) -> Refused:
    return Refused(SdkCallRefused(
        f"{call} is not supported on the simulator: {why}. See docs/restate-sdk.md for the "
        "supported calls; run this handler on the real path (engine='restate') instead"))


class SdkState:
    """What the SDK layer keeps per simulator beyond the engine's own model."""

    __slots__ = ("calls", "error_codes", "headers", "promises", "run_failures", "seed",
                 "sent", "workflow_runs")

    def __init__(self, seed: int) -> None:
        self.seed = seed
        # Workflow durable promises: (workflow, key, name) -> the promise's own entry.
        self.promises: dict[tuple[str, str, str], Entry] = {}
        # A workflow's `run` handler runs once per key: (workflow, key) -> invocation id.
        self.workflow_runs: dict[tuple[str, str], str] = {}
        # Failed attempts of one `ctx.run` (invocation id, journal index) under max_attempts.
        self.run_failures: dict[tuple[str, int], int] = {}
        # Headers an invocation was called with (shown by `request().headers`).
        self.headers: dict[str, dict[str, str]] = {}
        # Sends with an idempotency key: (target, key, idempotency key) -> invocation id.
        self.sent: dict[tuple[str, str | None, str], str] = {}
        # The invocation each call entry started: (caller, journal index) -> invocation id.
        self.calls: dict[tuple[str, int], str] = {}
        # The status code of each invocation that ended with a terminal error.
        self.error_codes: dict[str, int] = {}


_STATES: dict[int, tuple[Simulator, SdkState]] = {}


def sdk_state(sim: Simulator, seed: int | None = None) -> SdkState:
    """The SDK layer's state of `sim` (made on first use)."""
    found = _STATES.get(id(sim))
    if found is not None and found[0] is sim:
        return found[1]
    state = SdkState(seed if seed is not None else 0)
    _STATES[id(sim)] = (sim, state)
    return state


def forget(sim: Simulator) -> None:
    _STATES.pop(id(sim), None)


# ---------------------------------------------------------------------------- futures


class _Poller:
    """What the SDK's `restate.asyncio` helpers call on `future.context`: `vm.is_completed`
    and `create_poll_or_cancel_coroutine`. One per context (attempt)."""

    def __init__(self, ctx: SdkContext) -> None:
        self.ctx = ctx
        self.vm = self
        self.futures: list[_Future] = []

    def register(self, future: _Future) -> int:
        self.futures.append(future)
        return len(self.futures) - 1

    def is_completed(self, handle: int) -> bool:
        return self.ctx._peek(self.futures[handle])

    async def create_poll_or_cancel_coroutine(self, unresolved: Any) -> None:
        if isinstance(unresolved, SingleUnresolvedFuture):
            await self.futures[unresolved.handle]._settle()
            return
        members = [self.futures[c.handle] for c in _leaves(unresolved)]
        if isinstance(unresolved, AllCompletedUnresolvedFuture):
            for member in members:
                await member._settle()
            return
        assert isinstance(unresolved, FirstCompletedUnresolvedFuture)
        # Restate's VM runs pending `ctx.run` closures while it polls: the first one here.
        for member in members:
            if member._pending_run is not None:
                await member._settle()
                return
        entries = [m._entry for m in members]
        if any(e.done for e in entries):
            return
        first = Entry("first-of", ",".join(e.name for e in entries))

        def done(_: Entry) -> None:
            first.complete(None)

        for entry in entries:
            entry.listeners.append(done)
        await _Wait(first)


def _leaves(unresolved: Any) -> list[SingleUnresolvedFuture]:
    if isinstance(unresolved, SingleUnresolvedFuture):
        return [unresolved]
    out: list[SingleUnresolvedFuture] = []
    for child in unresolved.children:
        out.extend(_leaves(child))
    return out


class _Wait:
    """Awaiting it yields the journal entry to the simulator until the entry completes."""

    __slots__ = ("entry",)

    def __init__(self, entry: Entry) -> None:
        self.entry = entry

    def __await__(self) -> Generator[Any, Any, None]:
        if not self.entry.done:
            yield self.entry


class _Future:
    """The simulator's side of an SDK future (mixed into the SDK's future classes)."""

    context: Any  # a _Poller; typed as the SDK's own context by its classes
    handle: int
    _entry: Entry
    _decode: Callable[[Any], Any]
    _pending_run: Callable[[], Awaitable[None]] | None

    def _setup(self, poller: _Poller, entry: Entry, decode: Callable[[Any], Any],
               run: Callable[[], Awaitable[None]] | None = None) -> None:
        self.context = poller
        self._entry = entry
        self._decode = decode
        self._pending_run = run
        self.handle = poller.register(self)

    async def _settle(self) -> None:
        run, self._pending_run = self._pending_run, None
        if run is not None and not self._entry.done:
            await run()
        await _Wait(self._entry)

    async def _result(self) -> Any:
        await self._settle()
        entry = self._entry
        if entry.error is not None:
            raise restate.TerminalError(entry.error, status_code=self._code())
        return self._decode(entry.value)

    def _code(self) -> int:
        value = self._entry.value
        return value if isinstance(value, int) else 500

    def is_completed(self) -> bool:
        return bool(self.context.ctx._peek(self))

    def __await__(self) -> Generator[Any, Any, Any]:
        return self._result().__await__()


class SimFuture(_Future, ServerDurableFuture[Any]):
    def __init__(self, poller: _Poller, entry: Entry, decode: Callable[[Any], Any],
                 run: Callable[[], Awaitable[None]] | None = None) -> None:
        # The SDK's __init__ builds an asyncio task factory: not wanted, nothing of it used.
        self._setup(poller, entry, decode, run)


class SimSleepFuture(_Future, ServerDurableSleepFuture):
    def __init__(self, poller: _Poller, entry: Entry) -> None:
        self._setup(poller, entry, lambda _: None)

    def __await__(self) -> Generator[Any, Any, None]:
        return self._result().__await__()


class SimCallFuture(_Future, ServerCallDurableFuture[Any]):
    def __init__(self, poller: _Poller, entry: Entry, decode: Callable[[Any], Any],
                 child: str) -> None:
        self._setup(poller, entry, decode)
        self._child = child

    def _code(self) -> int:
        # The simulator carries a terminal error's message to the caller; its status code
        # travels beside it, as Restate's failure carries both.
        return int(self.context.ctx._state_obj.error_codes.get(self._child, 500))

    async def invocation_id(self) -> str:
        return self._child

    async def cancel_invocation(self) -> None:
        raise refuse("RestateDurableCallFuture.cancel_invocation()",
                     "the simulator does not model cancelling an invocation")


class SimSendHandle(SendHandle):
    def __init__(self, child: str) -> None:
        self._child = child

    async def invocation_id(self) -> str:
        return self._child

    async def cancel_invocation(self) -> None:
        raise refuse("SendHandle.cancel_invocation()",
                     "the simulator does not model cancelling an invocation")


class _NeverFinished(AttemptFinishedEvent):
    """An attempt on the simulator ends when its coroutine does; nothing waits on it."""

    def is_set(self) -> bool:
        return False

    async def wait(self) -> None:
        raise refuse("request().attempt_finished_event.wait()",
                     "an attempt's teardown is not an event on the simulator")


class SimPromise(restate.DurablePromise[Any]):
    def __init__(self, ctx: SdkContext, name: str, serde: Serde[Any]) -> None:
        super().__init__(name, serde)
        self._ctx = ctx

    def _shared(self) -> Entry:
        inv = self._ctx._inv
        key = (inv.service, inv.key or "", self.name)
        state = self._ctx._state_obj
        entry = state.promises.get(key)
        if entry is None:
            entry = state.promises[key] = Entry("promise", f"{key[0]}/{key[1]}/{key[2]}")
        return entry

    def value(self) -> SimFuture:
        ctx = self._ctx
        entry = ctx._command("promise", self.name)
        if not entry.done:
            shared = self._shared()

            def copy(source: Entry, mine: Entry = entry) -> None:
                ctx._sim._complete(mine, source.value, source.error)

            if shared.done:
                copy(shared)
            else:
                shared.listeners.append(copy)
        return ctx._future(entry, self.serde)

    def resolve(self, value: Any) -> Awaitable[None]:
        return self._complete(self.serde.serialize(value), None)

    def reject(self, message: str, code: int = 500) -> Awaitable[None]:
        return self._complete(code, message)

    def _complete(self, value: Any, error: str | None) -> Awaitable[None]:
        ctx = self._ctx
        entry = ctx._journal("complete-promise", self.name)
        if entry is None:
            shared = self._shared()
            already = shared.done
            if not already:
                ctx._sim._complete(shared, value, error)
            entry = ctx._append(Entry("complete-promise", self.name, done=True,
                                      value=500 if already else None,
                                      error=f"promise {self.name!r} was already completed"
                                      if already else None))
        return ctx._future(entry, BytesSerde())

    def peek(self) -> Awaitable[Any]:
        ctx = self._ctx
        entry = ctx._journal("peek-promise", self.name)
        if entry is None:
            shared = self._shared()
            value = shared.value if shared.done and shared.error is None else None
            entry = ctx._append(Entry("peek-promise", self.name, done=True, value=value))
        return ctx._future(entry, self.serde)

    def __await__(self) -> Generator[Any, Any, Any]:
        return self.value().__await__()


# ---------------------------------------------------------------------------- the context


class SdkContext(restate.WorkflowContext, restate.WorkflowSharedContext):
    """restate-sdk's context for one attempt of one invocation on the simulator."""

    def __init__(self, sim: Simulator, att: Attempt, state: SdkState, *,
                 kind: str, input_bytes: bytes) -> None:
        self._sim = sim
        self._att = att
        self._inv: Invocation = att.invocation
        self._state_obj = state
        self._kind = kind  # "service", "object" or "workflow"
        self._input = input_bytes
        self._poller = _Poller(self)
        # Restate seeds the random generator from the invocation: the same on every attempt.
        self._random = Random(f"{state.seed}/{self._inv.id}")

    # -- journal plumbing

    def _journal(self, kind: str, name: str) -> Entry | None:
        return self._sim._replay(self._att, kind, name)

    def _append(self, entry: Entry) -> Entry:
        return self._sim._append(self._att, entry)

    def _command(self, kind: str, name: str) -> Entry:
        """The entry of a completable command: replayed, or appended open."""
        entry = self._journal(kind, name)
        if entry is None:
            entry = self._append(Entry(kind, name))
        return entry

    def _future(self, entry: Entry, serde: Serde[Any],
                run: Callable[[], Awaitable[None]] | None = None) -> SimFuture:
        return SimFuture(self._poller, entry, _decoder(serde), run)

    def _peek(self, future: _Future) -> bool:
        entry = future._entry
        name = f"{entry.kind}:{entry.name}"
        journaled = self._journal("peek", name)
        if journaled is not None:
            return bool(journaled.value)
        return bool(self._append(Entry("peek", name, done=True, value=entry.done)).value)

    def _object(self) -> dict[str, Any]:
        inv = self._inv
        if inv.key is None:
            raise restate.TerminalError("state is only available in virtual object and "
                                        "workflow handlers")
        return self._sim._slot(inv.service, inv.key).state

    # -- identity

    def key(self) -> str:
        key = self._inv.key
        if key is None:
            raise restate.TerminalError("key() is only available in virtual object and "
                                        "workflow handlers")
        return key

    def request(self) -> Request:
        inv = self._inv
        return Request(id=inv.id, headers=dict(self._state_obj.headers.get(inv.id, {})),
                       attempt_headers={}, body=self._input,
                       attempt_finished_event=_NeverFinished())

    # -- determinism

    def random(self) -> Random:
        return self._random

    def uuid(self) -> UUID:
        return UUID(int=self._random.getrandbits(128), version=4)

    def time(self) -> SimFuture:
        wall = self._sim.clock.wall
        return self.run_typed("timestamp", lambda: wall().timestamp())

    # -- side effects

    def run(self, name: str, action: Callable[..., Any], serde: Serde[Any] = DefaultSerde(),
            max_attempts: int | None = None, max_retry_duration: timedelta | None = None,
            type_hint: type[Any] | None = None,
            args: tuple[Any, ...] | None = None) -> SimFuture:
        options: RunOptions[Any] = RunOptions(serde=serde, type_hint=type_hint,
                                             max_attempts=max_attempts)
        return self.run_typed(name, action, options, *(args or ()))

    def run_typed(self, name: str, action: Callable[..., Any],
                  options: RunOptions[Any] = RunOptions(), /, *args: Any,
                  **kwargs: Any) -> SimFuture:
        serde = _run_serde(action, options)
        entry = self._command("run", name)
        if entry.done:
            return self._future(entry, serde)
        sim, att, state = self._sim, self._att, self._state_obj
        index = self._inv.journal.index(entry)
        call = functools.partial(action, *args, **kwargs)

        async def execute() -> None:
            try:
                result = call()
                if type(result) is CoroutineType or inspect.isawaitable(result):
                    result = await result
                elif att.host.paused:
                    # Paused inside a synchronous call (harness.sdk.transport): the handler
                    # hears back after the pause, as an async call's would.
                    await sim.io(0)
            except restate.TerminalError as err:
                _settle_run(sim, att, entry, err.status_code, err.message)
                return
            except Exception as err:
                if options.max_attempts is None:
                    raise  # the attempt fails; the simulator retries the invocation
                failures = state.run_failures.get((att.invocation.id, index), 0) + 1
                state.run_failures[(att.invocation.id, index)] = failures
                if failures < options.max_attempts:
                    raise
                _settle_run(sim, att, entry, 500,
                            f"{name} failed after {failures} attempts: {err!r}")
                return
            _settle_run(sim, att, entry, serde.serialize(result), None)

        return self._future(entry, serde, execute)

    # -- timers and awakeables

    def sleep(self, delta: timedelta, name: str | None = None) -> SimSleepFuture:
        sim, att = self._sim, self._att
        entry = self._journal("sleep", name or "")
        if entry is None:
            entry = self._append(Entry("sleep", name or ""))
            wake = sim.clock.now() + delta.total_seconds()
            inv_id = att.invocation.id

            def fire(entry: Entry = entry) -> None:
                sim._add("timer.fired", invocation=inv_id, data={"at": wake})
                sim._complete(entry, None, None)

            sim.clock.call_at(wake, fire)
        return SimSleepFuture(self._poller, entry)

    def awakeable(self, serde: Serde[Any] = DefaultSerde(),
                  type_hint: type[Any] | None = None) -> tuple[str, SimFuture]:
        if isinstance(serde, DefaultSerde):
            serde = serde.with_maybe_type(type_hint)
        awk_id = f"awk.{self._inv.id}.{self._att.cursor}"
        entry = self._journal("awakeable", awk_id)
        if entry is None:
            entry = self._append(Entry("awakeable", awk_id))
            self._sim._awakeables[awk_id] = entry
        return awk_id, self._future(entry, serde)

    def resolve_awakeable(self, name: str, value: Any,
                          serde: Serde[Any] = DefaultSerde()) -> None:
        if isinstance(serde, DefaultSerde):
            serde = serde.with_maybe_type(type(value))
        if self._journal("resolve", name) is None:
            self._append(Entry("resolve", name, done=True))
            self._sim.resolve_awakeable(name, serde.serialize(value))

    def reject_awakeable(self, name: str, failure_message: str,
                         failure_code: int = 500) -> None:
        if self._journal("reject", name) is None:
            self._append(Entry("reject", name, done=True))
            self._sim.reject_awakeable(name, failure_message)

    # -- calls and sends

    def _target(self, tpe: Any, want: str) -> tuple[str, str, Serde[Any], Serde[Any]]:
        handler: SdkHandler[Any, Any] = handler_from_callable(tpe)
        kind = handler.service_tag.kind
        if kind != want:
            raise restate.TerminalError(
                f"{want}_call/{want}_send was given {handler.service_tag.name}/{handler.name}, "
                f"a handler of a {kind}")
        return (handler.service_tag.name, handler.name, handler.handler_io.input_serde,
                handler.handler_io.output_serde)

    def _call(self, service: str, handler: str, key: str | None, payload: bytes,
              output: Serde[Any], idempotency_key: str | None,
              headers: dict[str, str] | None) -> SimCallFuture:
        if idempotency_key is not None:
            raise refuse("a call with idempotency_key=",
                         "calls are not deduplicated by key (sends are)")
        sim, att = self._sim, self._att
        name = f"{service}/{handler}" if key is None else f"{service}/{handler}:{key}"
        entry = self._journal("call", name)
        if entry is None:
            entry = self._append(Entry("call", name))
            child = sim._new_invocation(service, handler, key, payload, (att.invocation, entry))
            self._state_obj.calls[(att.invocation.id, att.cursor - 1)] = child.id
            if headers:
                self._state_obj.headers[child.id] = dict(headers)
            sim._enqueue(child)
        child_id = self._state_obj.calls.get((att.invocation.id, att.cursor - 1), "")
        return SimCallFuture(self._poller, entry, _decoder(output), child_id)

    def _send(self, service: str, handler: str, key: str | None, payload: bytes,
              send_delay: timedelta | None, idempotency_key: str | None,
              headers: dict[str, str] | None) -> SimSendHandle:
        sim, att = self._sim, self._att
        name = f"{service}/{handler}" if key is None else f"{service}/{handler}:{key}"
        entry = self._journal("send", name)
        if entry is not None:
            return SimSendHandle(str(entry.value))
        dedupe = (name, key, idempotency_key) if idempotency_key is not None else None
        if dedupe is not None and dedupe in self._state_obj.sent:
            child_id = self._state_obj.sent[dedupe]
            self._append(Entry("send", name, done=True, value=child_id))
            return SimSendHandle(child_id)
        child = sim._new_invocation(service, handler, key, payload, None)
        self._append(Entry("send", name, done=True, value=child.id))
        if dedupe is not None:
            self._state_obj.sent[dedupe] = child.id
        if headers:
            self._state_obj.headers[child.id] = dict(headers)
        delay = send_delay.total_seconds() if send_delay is not None else 0.0
        sim._add("send", invocation=att.invocation.id, host=att.host.id,
                 data={"target": name, "child": child.id, "delay": delay})
        if delay > 0:
            sim.clock.call_later(delay, lambda: sim._enqueue(child))
        else:
            sim._enqueue(child)
        return SimSendHandle(child.id)

    def service_call(self, tpe: Any, arg: Any, idempotency_key: str | None = None,
                     headers: dict[str, str] | None = None) -> SimCallFuture:
        service, handler, inp, out = self._target(tpe, "service")
        return self._call(service, handler, None, inp.serialize(arg), out, idempotency_key,
                          headers)

    def object_call(self, tpe: Any, key: str, arg: Any, idempotency_key: str | None = None,
                    headers: dict[str, str] | None = None) -> SimCallFuture:
        service, handler, inp, out = self._target(tpe, "object")
        return self._call(service, handler, key, inp.serialize(arg), out, idempotency_key,
                          headers)

    def workflow_call(self, tpe: Any, key: str, arg: Any, idempotency_key: str | None = None,
                      headers: dict[str, str] | None = None) -> SimCallFuture:
        service, handler, inp, out = self._target(tpe, "workflow")
        return self._call(service, handler, key, inp.serialize(arg), out, idempotency_key,
                          headers)

    def generic_call(self, service: str, handler: str, arg: bytes, key: str | None = None,
                     idempotency_key: str | None = None,
                     headers: dict[str, str] | None = None, scope: str | None = None,
                     limit_key: str | None = None) -> SimCallFuture:
        _no_scope("generic_call", scope, limit_key)
        return self._call(service, handler, key, arg, BytesSerde(), idempotency_key, headers)

    def service_send(self, tpe: Any, arg: Any, send_delay: timedelta | None = None,
                     idempotency_key: str | None = None,
                     headers: dict[str, str] | None = None) -> SimSendHandle:
        service, handler, inp, _ = self._target(tpe, "service")
        return self._send(service, handler, None, inp.serialize(arg), send_delay,
                          idempotency_key, headers)

    def object_send(self, tpe: Any, key: str, arg: Any, send_delay: timedelta | None = None,
                    idempotency_key: str | None = None,
                    headers: dict[str, str] | None = None) -> SimSendHandle:
        service, handler, inp, _ = self._target(tpe, "object")
        return self._send(service, handler, key, inp.serialize(arg), send_delay,
                          idempotency_key, headers)

    def workflow_send(self, tpe: Any, key: str, arg: Any, send_delay: timedelta | None = None,
                      idempotency_key: str | None = None,
                      headers: dict[str, str] | None = None) -> SimSendHandle:
        service, handler, inp, _ = self._target(tpe, "workflow")
        return self._send(service, handler, key, inp.serialize(arg), send_delay,
                          idempotency_key, headers)

    def generic_send(self, service: str, handler: str, arg: bytes, key: str | None = None,
                     send_delay: timedelta | None = None, idempotency_key: str | None = None,
                     headers: dict[str, str] | None = None, scope: str | None = None,
                     limit_key: str | None = None) -> SimSendHandle:
        _no_scope("generic_send", scope, limit_key)
        return self._send(service, handler, key, arg, send_delay, idempotency_key, headers)

    # -- state

    def get(self, name: str, serde: Serde[Any] = DefaultSerde(),
            type_hint: type[Any] | None = None,
            entry_name: str | None = None) -> SimFuture:
        if isinstance(serde, DefaultSerde):
            serde = serde.with_maybe_type(type_hint)
        entry = self._journal("get", name)
        if entry is None:
            entry = self._append(Entry("get", name, done=True,
                                       value=self._object().get(name)))
        return self._future(entry, serde)

    def state_keys(self, entry_name: str | None = None) -> SimFuture:
        entry = self._journal("get", "*keys")
        if entry is None:
            keys = sorted(self._object())
            entry = self._append(Entry("get", "*keys", done=True,
                                       value=json.dumps(keys).encode()))
        return self._future(entry, DefaultSerde())

    def set(self, name: str, value: Any, serde: Serde[Any] = DefaultSerde(),
            entry_name: str | None = None) -> None:
        if self._kind == "service":
            raise restate.TerminalError("state is only available in virtual object and "
                                        "workflow handlers")
        if isinstance(serde, DefaultSerde):
            serde = serde.with_maybe_type(type(value))
        if self._journal("set", name) is None:
            self._append(Entry("set", name, done=True))
            self._object()[name] = serde.serialize(value)

    def clear(self, name: str, entry_name: str | None = None) -> None:
        if self._journal("clear", name) is None:
            self._append(Entry("clear", name, done=True))
            self._object().pop(name, None)

    def clear_all(self, entry_name: str | None = None) -> None:
        if self._journal("clear", "*") is None:
            self._append(Entry("clear", "*", done=True))
            self._object().clear()

    # -- workflows

    def promise(self, name: str, serde: Serde[Any] | None = DefaultSerde(),
                type_hint: type[Any] | None = None) -> SimPromise:
        if self._kind != "workflow":
            raise restate.TerminalError("promise() is only available in workflow handlers")
        chosen: Serde[Any] = serde if serde is not None else DefaultSerde()
        if isinstance(chosen, DefaultSerde):
            chosen = chosen.with_maybe_type(type_hint)
        return SimPromise(self, name, chosen)

    # -- refused: what the simulator does not model

    def scope(self, scope: str) -> ScopedContext:
        raise refuse("ctx.scope()", "flow-control scopes (a restate-server 1.7 preview) are "
                     "not modelled")

    def signal(self, name: str, serde: Serde[Any] = DefaultSerde(),
               type_hint: type[Any] | None = None) -> SimFuture:
        raise refuse("ctx.signal()", "named signals between invocations are not modelled")

    def resolve_signal(self, invocation_id: str, name: str, value: Any,
                       serde: Serde[Any] = DefaultSerde()) -> None:
        raise refuse("ctx.resolve_signal()", "named signals are not modelled")

    def reject_signal(self, invocation_id: str, name: str, failure_message: str,
                      failure_code: int = 500) -> None:
        raise refuse("ctx.reject_signal()", "named signals are not modelled")

    def cancel_invocation(self, invocation_id: str) -> None:
        raise refuse("ctx.cancel_invocation()", "cancelling an invocation is not modelled")

    def attach_invocation(self, invocation_id: str, serde: Serde[Any] = DefaultSerde(),
                          type_hint: type[Any] | None = None) -> SimFuture:
        raise refuse("ctx.attach_invocation()", "attaching to another invocation is not "
                     "modelled")


def _no_scope(call: str, scope: str | None, limit_key: str | None) -> None:
    if scope is not None or limit_key is not None:
        raise refuse(f"ctx.{call}(scope=..., limit_key=...)",
                     "flow-control scopes are not modelled")


def _decoder(serde: Serde[Any]) -> Callable[[Any], Any]:
    def decode(value: Any) -> Any:
        if value is None:
            value = b""
        return serde.deserialize(value)

    return decode


def _run_serde(action: Callable[..., Any], options: RunOptions[Any]) -> Serde[Any]:
    """The serde restate-sdk's `run_typed` picks: the user's, else the default one with the
    type hint (given, or the action's return annotation, Optional[T] as T)."""
    if not isinstance(options.serde, DefaultSerde):
        return options.serde
    # A default serde holds only its type hint, so one per action's code object and given
    # hint serves every call (extracting the core type each time was a fiftieth of a
    # schedule of the example agent).
    code = getattr(action, "__code__", None)
    key: tuple[Any, Any] | None = (code, options.type_hint)
    if type(options.serde) is DefaultSerde and code is not None:
        try:
            cached = _SERDES.get(key)
        except TypeError:  # an unhashable type hint
            cached = key = None
        if cached is not None:
            return cached
    else:
        key = None
    serde = _pick_serde(action, options)
    if key is not None and len(_SERDES) < 4096:
        _SERDES[key] = serde
    return serde


_SERDES: dict[Any, Serde[Any]] = {}


def _pick_serde(action: Callable[..., Any], options: RunOptions[Any]) -> Serde[Any]:
    default = cast(DefaultSerde[Any], options.serde)
    hint: Any = options.type_hint
    if hint is None:
        hint = _return_annotation(action)
    if hint is not None and hint is not inspect.Signature.empty:
        kind, core = extract_core_type(hint)
        if kind in ("simple", "optional"):
            hint = core
    else:
        hint = None
    return cast(Serde[Any], default.with_maybe_type(hint))


_ANNOTATIONS: dict[Any, Any] = {}


def _return_annotation(action: Callable[..., Any]) -> Any:
    # `inspect.signature(eval_str=True)` evaluates string annotations each time (a tenth of
    # a simulated schedule of the example agent); a function's code object names the same
    # annotations every call, so the result is kept per code object.
    code = getattr(action, "__code__", None)
    if code is not None and code in _ANNOTATIONS:
        return _ANNOTATIONS[code]
    try:
        hint = inspect.signature(action, eval_str=True).return_annotation
    except (TypeError, ValueError, NameError):
        hint = None
    if code is not None and len(_ANNOTATIONS) < 4096:
        _ANNOTATIONS[code] = hint
    return hint


def _settle_run(sim: Simulator, att: Attempt, entry: Entry, value: Any,
                error: str | None) -> None:
    # A stale attempt (its host paused past the abort timeout) cannot write the journal.
    if att.invocation.attempt is not att:
        raise Fenced()
    sim._complete(entry, value, error)

