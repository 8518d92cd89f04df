"""The kit for an adapter that runs a user's restate-sdk services on the simulator.

`SdkSimRuntime(ctx, services)` is a `Runtime` minus the two methods only the user knows
(`send_message`, `answer`: which handler a message and an answer go to). It registers the
user's service objects (`harness.sdk.services`), routes their httpx calls to the world
(`harness.sdk.transport`), records the turns (`turn_of`) and the approval cards, and has
every optional capability the simulator offers: redeploy, crash, GC pause, fault points
at the world's deliveries, clock jumps. The lifecycle is the simulator's (see
`harness.sim.engine`).

Determinism: `ctx.random()`, `ctx.uuid()` and `ctx.time()` are seeded by the run's seed and
read virtual time; from the runtime's first advance to its `close()`, the module `random`
draws from a generator seeded by the run's seed too (the process's own state is given back at
close), while it advances `uuid.uuid4()` draws from that generator, and the wall clock
(`time.time()`, `datetime.now()`) reads virtual time (the run path's freezegun scope). What
stays outside (`os.urandom`, `secrets`, `random.SystemRandom`, new threads) is left real, since
making a process's entropy predictable would reach the harness's own code too, and is named
instead: the first read of each in a run is recorded (`sdk.nondeterministic`, with the
source and the handler's invocation), so a user whose two runs of one seed differ sees why.
"""

from __future__ import annotations

import json
import os
import random
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from restate.handler import Handler as SdkHandler
from restate.handler import handler_from_callable

from harness.adapters.base import RunContext
from harness.errors import UsageError
from harness.history import Record
from harness.sdk.context import Refused, forget, sdk_state
from harness.sdk.services import encode_arg, sdk_app
from harness.sdk.transport import (
    EFFECT_POINTS,
    SIM_WORLD_URL,
    CardWatcher,
    routing_to,
    world_transport,
)
from harness.sim.engine import FaultAction, Simulator
from harness.sim.model import Host
from harness.world import World

__all__ = ["InvocationView", "SdkSimRuntime", "Services", "TurnOf"]

# The user's service objects, the same for every version, or one list per version label
# (a release that changes the code).
Services = Sequence[Any] | Callable[[str], Sequence[Any]]


@dataclass(frozen=True, slots=True)
class InvocationView:
    """An invocation as `turn_of` sees it; `arg` is its JSON argument (None if not JSON)."""

    id: str
    service: str
    handler: str
    key: str | None
    arg: Any


# Which invocations are turns of the agent: (session, turn, message id), else None.
TurnOf = Callable[[InvocationView], "tuple[str, str, str] | None"]


class SdkSimRuntime:
    """One run of a user's restate-sdk services on the simulator (see the module doc)."""

    world_endpoints: tuple[str, ...] = ("provider", "identity")
    points: tuple[str, ...] = tuple(sorted(EFFECT_POINTS.values()))

    def __init__(self, ctx: RunContext, services: Services, *, turn_of: TurnOf | None = None,
                 world_url: str = SIM_WORLD_URL) -> None:
        self.ctx = ctx
        self.history = ctx.history
        self.sim = Simulator(seed=ctx.seed, history=ctx.history)
        self.state = sdk_state(self.sim, ctx.seed)
        self.world = World(ctx.history, now=self.sim.clock.now, sleep=self.sim.io,
                           observe=self.sim.observe)
        self.cards = CardWatcher(ctx.history, self.world)
        self.transport = world_transport(self.world, self.sim, after=self.cards)
        self.world_url = world_url
        self._services = services
        self._turn_of = turn_of
        self._turns: dict[str, tuple[str, str, str]] = {}
        self._armed: dict[str, list[FaultAction]] = {}
        self._random = random.Random(f"globals/{ctx.seed}")
        self._stray_sources: set[str] = set()
        self.sim.on_fault_point = self._fault_point
        if turn_of is not None:
            self.history.subscribe(self._on_record)
        self.deploy("v1")

    # -- driving

    def now(self) -> float:
        return self.sim.clock.now()

    def advance(self, until: float) -> None:
        with routing_to(self.transport, self.world_url), self._deterministic_globals():
            try:
                self.sim.run(until=until)
            except Refused as refused:
                raise refused.error from None

    def send(self, handler: Any, arg: Any = None, *, key: str | None = None,
             delay: float = 0.0) -> str:
        """Invoke one of the user's handlers from outside (Restate's ingress) with a JSON
        argument; `handler` is "Service/handler" or the handler function itself. Returns
        the invocation id."""
        if isinstance(handler, str):
            service, _, name = handler.partition("/")
        else:
            target: SdkHandler[Any, Any] = handler_from_callable(handler)
            service, name = target.service_tag.name, target.name
        return self.sim.invoke(service, name, encode_arg(arg), key=key, delay=delay)

    def resolve_awakeable(self, awakeable_id: str, value: Any) -> None:
        self.sim.resolve_awakeable(awakeable_id, encode_arg(value))

    def reject_awakeable(self, awakeable_id: str, reason: str) -> None:
        self.sim.reject_awakeable(awakeable_id, reason)

    def object_state(self, service: str, key: str) -> dict[str, Any]:
        """A virtual object's state, each value decoded as JSON (bytes if it is not)."""
        out: dict[str, Any] = {}
        for name, raw in self.sim.state(service, key).items():
            try:
                out[name] = json.loads(raw) if raw else None
            except ValueError:
                out[name] = raw
        return out

    def finish(self) -> None:
        self.cards()

    def close(self) -> None:
        _release_random(self)
        self.sim.close()
        forget(self.sim)

    # -- capabilities

    def deploy(self, version: str) -> str:
        version = version or f"v{len(self.sim.deployments) + 1}"
        services = self._services(version) if callable(self._services) else self._services
        return self.sim.register(sdk_app(services, version), hosts=self.ctx.hosts).id

    def crash_host(self, host: str) -> str:
        target = self.sim.host(host)
        self.sim.crash_host(target.id)
        return target.id

    def pause_host(self, host: str, duration: float) -> str:
        target = self.sim.host(host)
        self.sim.pause_host(target.id, duration)
        return target.id

    def arm(self, point: str, action: str, duration: float, times: int) -> None:
        if point not in self.points:
            raise UsageError(f"unknown fault point {point!r}; this runtime stops at "
                             f"{list(self.points)}")
        fault: FaultAction = ("pause", duration) if action == "pause" else ("crash", None)
        self._armed.setdefault(point, []).extend([fault] * times)

    def clock_jump(self, seconds: float) -> None:
        self.sim.clock.jump(seconds)

    # -- internals

    def _fault_point(self, name: str, host: Host) -> FaultAction | None:
        armed = self._armed.get(name)
        return armed.pop(0) if armed else None

    @contextmanager
    def _deterministic_globals(self) -> Iterator[None]:
        """Module `random` and `uuid.uuid4` draw from this run's seeded generator; reads of
        the process's entropy and new threads are named in the history (see the module
        docstring)."""
        _own_random(self)
        original_uuid4 = uuid.uuid4
        original_urandom, system_urandom = os.urandom, random._urandom  # type: ignore[attr-defined]
        original_start = threading.Thread.start

        def uuid4() -> uuid.UUID:
            return uuid.UUID(int=random.getrandbits(128), version=4)

        def urandom(n: int) -> bytes:
            self._stray("os.urandom (secrets, random.SystemRandom)")
            return original_urandom(n)

        def start(thread: threading.Thread) -> None:
            self._stray("threading.Thread.start")
            original_start(thread)

        uuid.uuid4 = uuid4
        os.urandom = random._urandom = urandom  # type: ignore[attr-defined]
        threading.Thread.start = start  # type: ignore[method-assign,assignment]
        try:
            yield
        finally:
            threading.Thread.start = original_start  # type: ignore[method-assign]
            os.urandom, random._urandom = original_urandom, system_urandom  # type: ignore[attr-defined]
            uuid.uuid4 = original_uuid4

    def _stray(self, source: str) -> None:
        """A read the simulator cannot replay: named once per run, where it happened."""
        if source in self._stray_sources:
            return
        self._stray_sources.add(source)
        attempt = self.sim.current_attempt()
        self.history.add("sdk.nondeterministic",
                         invocation=attempt.invocation.id if attempt is not None else None,
                         data={"source": source, "why": "not seeded by the run: two runs of "
                               "one seed may differ from here"})

    def _on_record(self, record: Record) -> None:
        kind = record.kind
        if kind == "invocation.started" and self._turn_of is not None:
            inv = self.sim.invocations.get(record.invocation or "")
            if inv is None:
                return
            turn = self._turn_of(InvocationView(inv.id, inv.service, inv.handler, inv.key,
                                                _json(inv.arg)))
            if turn is not None:
                session, turn_id, message = turn
                self._turns[inv.id] = turn
                self.history.add("turn.started", session=session, turn=turn_id,
                                 invocation=inv.id,
                                 data={"event_id": f"{turn_id}.started", "message": message})
        elif kind == "invocation.completed":
            turn = self._turns.pop(record.invocation or "", None)
            if turn is not None:
                self.cards()  # the cards the turn closed first: a turn ends last
                session, turn_id, _ = turn
                self.history.add("turn.ended", session=session, turn=turn_id,
                                 invocation=record.invocation,
                                 data={"event_id": f"{turn_id}.ended",
                                       "reason": "completed" if record.type == "ok"
                                       else "failed"})


# Which run's generator the module `random` holds, and the process's own state to give back.
# The module's generator is swapped when a different run advances (or at a run's close), not
# around every advance: copying a Mersenne Twister state out and in costs 0.3 ms, and a
# schedule advances about fifty times.
_random_owner: SdkSimRuntime | None = None
_process_random: Any = None


def _own_random(runtime: SdkSimRuntime) -> None:
    global _random_owner, _process_random
    owner = _random_owner
    if owner is runtime:
        return
    if owner is None:
        _process_random = random.getstate()
    else:
        owner._random.setstate(random.getstate())
    random.setstate(runtime._random.getstate())
    _random_owner = runtime


def _release_random(runtime: SdkSimRuntime) -> None:
    global _random_owner, _process_random
    if _random_owner is not runtime:
        return
    runtime._random.setstate(random.getstate())
    random.setstate(_process_random)
    _random_owner = _process_random = None


def _json(arg: Any) -> Any:
    try:
        return json.loads(arg) if isinstance(arg, bytes) and arg else None
    except ValueError:
        return None


def seconds(delta: timedelta | float) -> float:
    return delta.total_seconds() if isinstance(delta, timedelta) else float(delta)
