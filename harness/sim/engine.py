"""A deterministic, single-threaded simulator of durable execution (Restate's model).

The lifecycle of a run, written once:

1. `register(app)` makes a deployment (with simulated hosts) the latest; new invocations go
   to the latest deployment and stay pinned to it until they complete.
2. `invoke()` (ingress) or a handler's call/send creates an invocation. Exclusive handlers of a
   virtual object run one at a time per key; later ones queue in order.
3. An attempt runs the handler's coroutine on one host. The simulator drives the coroutine
   itself (`send`/`throw`), with no event loop: each `await` of a durable future yields the
   journal entry it waits for; an I/O wait yields a virtual-time delay; a fault point may yield
   a pause or a crash of the host at exactly that point.
4. Journal: every context operation writes an entry; a replay feeds completed entries back
   without re-running them and checks that the code issues the same commands (else journal
   mismatch). A side effect in flight when its host crashed runs again (at-least-once).
5. Faults: a paused host makes no progress; an attempt stuck on it is abandoned after
   `abort_timeout` and retried on another host of the same deployment; when the host resumes,
   the stale attempt can no longer write the journal, but what it does outside the journal
   still happens. A crash throws the coroutines away; they replay on the same deployment.
6. `run(until)` steps every ready attempt, then autojumps the virtual clock to the next timer,
   until nothing is left or `until` is reached. Every step is recorded in the history.
   Attempts ready at the same instant run in an order the seed draws (`interleave`), as a
   real engine's concurrent handlers reach their journal points in any order: a result's
   send may overtake the send its turn made an instant before. Each attempt has at most one
   step ready, so any order is one the real engine could take.

The same seed gives the same history, byte for byte.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import random
from collections import deque
from collections.abc import Awaitable, Callable, Generator
from datetime import timedelta
from types import CoroutineType
from typing import Any, Literal

from contract import faultpoints
from contract.binding import App, DurableFuture, HandlerRef, TerminalError
from harness.clock import VirtualClock, wall_clock_follows
from harness.errors import IngressRefused, JournalMismatch, SimulationError, UsageError
from harness.faults import RESTART_AFTER
from harness.history import History, Record, RecordType
from harness.sim.model import Attempt, Deployment, Entry, Host, Invocation

FaultAction = tuple[Literal["pause"], float] | tuple[Literal["crash"], None]
FaultPointHandler = Callable[[str, Host], "FaultAction | None"]


class Fenced(BaseException):
    """Raised inside a stale attempt that tries to write its invocation's journal.

    A BaseException so that handler code catching `Exception` cannot swallow the fence.
    """


class IoWait:
    """A wait on the world's latency. A client that cannot suspend its handler
    (harness.sdk.transport's synchronous path) drives it by hand."""

    __slots__ = ("delay",)

    def __init__(self, delay: float) -> None:
        self.delay = delay

    def __await__(self) -> Generator[Any, Any, None]:
        yield self


class _HostAction:
    __slots__ = ("action", "point")

    def __init__(self, action: FaultAction, point: str) -> None:
        self.action = action
        self.point = point

    def __await__(self) -> Generator[Any, Any, None]:
        yield self


class _Ready:
    """An awaitable that is already complete: `await` returns without yielding."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, Any, Any]:
        return self.value
        yield  # pragma: no cover - makes this a generator


class EntryFuture:
    """A durable future: awaiting it waits until its journal entry completes."""

    __slots__ = ("entry",)

    def __init__(self, entry: Entry) -> None:
        self.entry = entry

    def __await__(self) -> Generator[Any, Any, Any]:
        entry = self.entry
        if not entry.done:
            yield entry
        if entry.error is not None:
            raise TerminalError(entry.error)
        return entry.value


class Simulator:
    """See the module docstring for the lifecycle of a run."""

    def __init__(
        self,
        *,
        seed: int = 0,
        clock: VirtualClock | None = None,
        history: History | None = None,
        abort_timeout: float = 60.0,
        retry_base: float = 1.0,
        retry_max: float = 30.0,
        max_attempts: int = 200,
        restart_after: float = RESTART_AFTER,
        record_journal: bool = True,
        record_state: bool = False,
        interleave: bool = True,
    ) -> None:
        self.clock = clock or VirtualClock()
        self.history = history if history is not None else History()
        self.history.bind_clock(self.clock.now)
        # The simulator's own records (see History.add_simulated); what running code
        # observes goes through `observe`, to History.add.
        self._add: Callable[..., Record] = self.history.add_simulated
        self.random = random.Random(seed)
        # Its own stream: which of the ready attempts runs next (see the module docstring).
        self._pick: Callable[[], float] | None = (
            random.Random(f"interleave/{seed}").random if interleave else None)
        self.abort_timeout = abort_timeout
        self.retry_base = retry_base
        self.retry_max = retry_max
        self.max_attempts = max_attempts
        self.restart_after = restart_after
        self.record_journal = record_journal
        # State reads and writes (get, set, clear) are journal entries too, but a handler
        # makes many (the controller reads each of its keys on every call): recorded, they
        # were two fifths of a run's history, read by no checker and shown by no report.
        self._unrecorded = frozenset() if record_state else _STATE_COMMANDS
        self.deployments: list[Deployment] = []
        self.hosts: dict[str, Host] = {}
        self.invocations: dict[str, Invocation] = {}
        self.on_fault_point: FaultPointHandler | None = None
        self._ready: deque[tuple[Attempt, Any, BaseException | None]] = deque()
        self._objects: dict[tuple[str, str], _ObjectSlot] = {}
        self._awakeables: dict[str, Entry] = {}
        self._current: Attempt | None = None
        self._order = 0
        self._steps = 0
        # Attempts abandoned while their host was paused: they may still run after it resumes.
        self._stale: list[Attempt] = []
        self._closed = False

    # ------------------------------------------------------------------ deployments

    @property
    def latest(self) -> Deployment:
        if not self.deployments:
            if self._closed:
                raise SimulationError("the simulator was closed: its run is over")
            raise SimulationError("no deployment registered: call register(app) first")
        return self.deployments[-1]

    def host(self, selector: str) -> Host:
        """The host a schedule step names: a host id, `owner` (the one that last took a
        thread, else the one that last ran an attempt), `any` (a live host of the latest
        deployment, drawn from the run's seed) or `latest/N`. A UsageError names the valid
        ones otherwise. Every runtime on the simulator selects hosts here."""
        if selector in self.hosts:
            return self.hosts[selector]
        latest = self.latest
        if selector == "owner":
            for record in reversed(self.history.records):
                if (record.kind in ("threadlog.assigned", "attempt.started")
                        and record.host in self.hosts):
                    return self.hosts[record.host]
            return latest.hosts[0]
        if selector == "any":
            live = [h for h in latest.hosts if h.available] or latest.hosts
            return self.random.choice(live)
        if selector.startswith("latest/"):
            with contextlib.suppress(ValueError, IndexError):
                return latest.hosts[int(selector.split("/", 1)[1]) - 1]
        raise UsageError(
            f"unknown host {selector!r}: use 'owner', 'any', 'latest/N' (N from 1 to "
            f"{len(latest.hosts)}) or one of {sorted(self.hosts)}"
        )

    def register(self, app: App, *, hosts: int = 1, name: str | None = None) -> Deployment:
        """Register a new deployment; new invocations are routed to it from now on."""
        now = self.clock.now()
        dep = Deployment(name or f"dep{len(self.deployments) + 1}", app, now)
        for i in range(hosts):
            host = Host(f"{dep.id}.h{i + 1}", dep)
            dep.hosts.append(host)
            self.hosts[host.id] = host
        previous = self.deployments[-1] if self.deployments else None
        self.deployments.append(dep)
        self._add(
            "deployment.registered",
            deployment=dep.id,
            data={"version": app.version, "hosts": [h.id for h in dep.hosts]},
        )
        if previous is not None:
            previous.superseded_at = now
            self._add(
                "deployment.superseded",
                deployment=previous.id,
                data={"by": dep.id, "pinned": previous.pinned},
            )
            self._check_drained(previous)
        return dep

    def deployment(self, dep_id: str) -> Deployment:
        for dep in self.deployments:
            if dep.id == dep_id:
                return dep
        raise SimulationError(f"unknown deployment {dep_id!r}")

    # ------------------------------------------------------------------ ingress

    def invoke(
        self,
        service: str,
        handler: str,
        arg: Any = None,
        *,
        key: str | None = None,
        delay: float = 0.0,
    ) -> str:
        """Start an invocation from outside (ingress); returns its id. A handler private to
        the app's own services is refused here, before it is an invocation."""
        if self.latest.app.service(service).handler(handler).private:
            raise IngressRefused(f"{service}/{handler}: the invoked service is not public", 400)
        inv = self._new_invocation(service, handler, key, arg, None)
        if delay > 0:
            self.clock.call_later(delay, lambda: self._enqueue(inv))
        else:
            self._enqueue(inv)
        return inv.id

    def resolve_awakeable(self, awakeable_id: str, value: Any) -> None:
        self._awakeable(awakeable_id)  # unknown id: raise before recording
        self._add("awakeable.resolved", data={"id": awakeable_id})
        self._complete(self._awakeable(awakeable_id), value, None)

    def reject_awakeable(self, awakeable_id: str, reason: str) -> None:
        self._awakeable(awakeable_id)
        self._add("awakeable.rejected", data={"id": awakeable_id, "reason": reason})
        self._complete(self._awakeable(awakeable_id), None, reason)

    def _awakeable(self, awakeable_id: str) -> Entry:
        try:
            return self._awakeables[awakeable_id]
        except KeyError:
            raise SimulationError(f"unknown awakeable {awakeable_id!r}") from None

    def awakeable_pending(self, awakeable_id: str) -> bool:
        entry = self._awakeables.get(awakeable_id)
        return entry is not None and not entry.done

    # ------------------------------------------------------------------ faults

    def pause_host(self, host_id: str, duration: float | None = None) -> None:
        """Stop all progress on a host (a GC pause); resume it after `duration` if given."""
        host = self._host(host_id)
        if host.crashed or host.paused:
            return
        host.paused = True
        self._add("host.paused", host=host.id, deployment=host.deployment.id,
                     data={"duration": duration} if duration is not None else None)
        if duration is not None:
            self.clock.call_later(duration, lambda: self.resume_host(host.id))

    def resume_host(self, host_id: str) -> None:
        host = self._host(host_id)
        if not host.paused:
            return
        host.paused = False
        self._add("host.resumed", host=host.id, deployment=host.deployment.id)
        parked, host.parked = host.parked, []
        self._ready.extend(parked)
        self._drain_waiting(host.deployment)

    def crash_host(self, host_id: str, restart_after: float | None = None) -> None:
        """Lose the host's memory; its invocations replay from their journals."""
        host = self._host(host_id)
        if host.crashed:
            return
        host.crashed = True
        host.paused = False
        host.parked = []
        self._add("host.crashed", host=host.id, deployment=host.deployment.id)
        victims = [inv for inv in self.invocations.values()
                   if inv.attempt is not None and inv.attempt.host is host]
        for att in list(self._attempts_on(host)):
            self._close(att)
        for inv in victims:
            inv.attempt = None
            self._schedule_retry(inv, self.retry_base)
        delay = self.restart_after if restart_after is None else restart_after
        self.clock.call_later(delay, lambda: self._restart(host))

    def _restart(self, host: Host) -> None:
        if not host.crashed:
            return
        host.crashed = False
        self._add("host.restarted", host=host.id, deployment=host.deployment.id)
        self._drain_waiting(host.deployment)

    def repin(self, invocation_id: str, dep_id: str) -> None:
        """Move an invocation to another deployment (the rejected alternative of the design).

        Its journal then replays against that deployment's code: a mismatch if the code
        issues different commands.
        """
        inv = self.invocations[invocation_id]
        dep = self.deployment(dep_id)
        if inv.attempt is not None:
            self._close(inv.attempt)
            inv.attempt = None
        if inv.deployment is not None:
            inv.deployment.pinned -= 1
            self._check_drained(inv.deployment)
        inv.deployment = dep
        dep.pinned += 1
        self._add("invocation.repinned", invocation=inv.id, deployment=dep.id)
        self._new_attempt(inv)

    # ------------------------------------------------------------------ running

    def run(self, until: float | None = None, *, follow_wall_clock: bool = False) -> None:
        """Step until nothing is left to do, or virtual time reaches `until`."""
        if follow_wall_clock:
            with wall_clock_follows(self.clock):
                self._run(until)
        else:
            self._run(until)

    def _run(self, until: float | None) -> None:
        previous_hook = faultpoints.install(self._fault_point)
        ready = self._ready
        step = self._step
        clock = self.clock
        try:
            pick = self._pick
            while True:
                while ready:
                    if pick is not None and len(ready) > 1:
                        i = int(pick() * len(ready))
                        ready.rotate(-i)
                        att, value, exc = ready.popleft()
                        ready.rotate(i)
                    else:
                        att, value, exc = ready.popleft()
                    step(att, value, exc)
                deadline = clock.next_deadline()
                if deadline is None:
                    if until is not None and until > clock.now():
                        clock.advance_to(until)
                    return
                if until is not None and deadline > until:
                    clock.advance_to(max(until, clock.now()))
                    return
                clock.autojump()
        finally:
            faultpoints.install(previous_hook)

    def at(self, when: float, action: Callable[[], None]) -> None:
        """Run `action` (a schedule step from outside) at virtual time `when`."""
        self.clock.call_at(when, action)

    def io(self, delay: float) -> Awaitable[None]:
        """An I/O wait of `delay` virtual seconds (world latency), outside the journal."""
        return IoWait(delay)

    @property
    def steps(self) -> int:
        return self._steps

    def close(self) -> None:
        """End of the run: throw the coroutines away and cut the cycles of its objects.

        A run's objects reference each other in cycles: a host and its deployment, the app's
        ports that reach back into the simulator (the world's sleep and observer), an
        invocation and its attempt, a journal entry whose listener holds the attempt waiting
        on it, the clock's timers that call the simulator. Left to the cyclic garbage
        collector, a whole run (its history included) survives into the collector's older
        generations, whose collections then took a fifth of the 8-day flow (1.81 -> 1.46 ms
        per flow, median of 20 interleaved rounds). Cut here, reference counting frees the
        run as soon as its last outside reference goes. A closed simulator is not run again.
        """
        self.on_fault_point = None
        for inv in self.invocations.values():
            if inv.attempt is not None:
                # What a crash does: the coroutine is thrown away (its `finally` runs now,
                # not whenever the garbage collector would have reached it).
                self._close(inv.attempt)
                inv.attempt = None
            for entry in inv.journal:
                entry.listeners.clear()
        for att in self._stale:
            self._close(att)
        for dep in self.deployments:
            for host in dep.hosts:
                host.parked.clear()
            dep.hosts.clear()
            dep.waiting.clear()
        self.clock.clear()
        self.deployments.clear()
        self.hosts.clear()
        self.invocations.clear()
        self._objects.clear()
        self._awakeables.clear()
        self._ready.clear()
        self._stale.clear()
        self._closed = True

    # ------------------------------------------------------------------ observation

    def current_attempt(self) -> Attempt | None:
        return self._current

    def observe(
        self, kind: str, type: RecordType = "event", *, data: dict[str, Any] | None = None,
        host: str | None = None, deployment: str | None = None, invocation: str | None = None,
        session: str | None = None, turn: str | None = None, tool_call: str | None = None,
        epoch: int | None = None, key: str | None = None, process: str | None = None,
        time: float | None = None,
    ) -> Record:
        """Record an event from running code, stamped with where it ran: the host,
        deployment and invocation of the running attempt, where not given.

        `History.add`'s parameters, named (no `**fields` dict built per call and searched).
        """
        att = self._current
        if att is not None:
            inv = att.invocation
            if host is None:
                host = att.host.id
            if deployment is None:
                deployment = att.host.deployment.id
            if invocation is None:
                invocation = inv.id
            if att is not inv.attempt:
                if data is None:
                    data = {}
                data["stale"] = True
        return self.history.add(kind, type, data=data, host=host, deployment=deployment,
                                invocation=invocation, session=session, turn=turn,
                                tool_call=tool_call, epoch=epoch, key=key, process=process,
                                time=time)

    def state(self, service: str, key: str) -> dict[str, Any]:
        slot = self._objects.get((service, key))
        return dict(slot.state) if slot else {}

    def invocation(self, invocation_id: str) -> Invocation:
        return self.invocations[invocation_id]

    def pinned(self) -> dict[str, int]:
        return {dep.id: dep.pinned for dep in self.deployments}

    # ------------------------------------------------------------------ internals

    def _record(
        self, kind: str, type: RecordType = "event", data: dict[str, Any] | None = None,
        **fields: Any,
    ) -> Record:
        return self.history.add(kind, type, data=data, **fields)

    def _host(self, host_id: str) -> Host:
        try:
            return self.hosts[host_id]
        except KeyError:
            raise SimulationError(
                f"unknown host {host_id!r}; hosts: {sorted(self.hosts)}"
            ) from None

    def _attempts_on(self, host: Host) -> list[Attempt]:
        seen: list[Attempt] = []
        for inv in self.invocations.values():
            att = inv.attempt
            if att is not None and att.host is host:
                seen.append(att)
        seen.extend(a for a in self._stale if a.host is host and a.coro is not None)
        return seen

    def _new_invocation(
        self,
        service: str,
        handler: str,
        key: str | None,
        arg: Any,
        caller: tuple[Invocation, Entry] | None,
    ) -> Invocation:
        inv = Invocation(
            f"inv{len(self.invocations) + 1}", service, handler, key, arg,
            self.clock.now(), caller,
        )
        self.invocations[inv.id] = inv
        return inv

    def _enqueue(self, inv: Invocation) -> None:
        service = self.latest.app.service(inv.service)
        handler = service.handler(inv.handler)
        inv.exclusive = service.kind == "object" and handler.kind == "exclusive"
        self._add(
            "invocation.created",
            invocation=inv.id,
            data={"target": inv.target, "key": inv.key,
                  "caller": inv.caller[0].id if inv.caller else None},
        )
        if inv.exclusive and inv.key is not None:
            slot = self._slot(inv.service, inv.key)
            if slot.holder is not None:
                inv.status = "queued"
                slot.queue.append(inv)
                return
            slot.holder = inv
        self._start(inv)

    def _slot(self, service: str, key: str) -> _ObjectSlot:
        slot = self._objects.get((service, key))
        if slot is None:
            slot = self._objects[(service, key)] = _ObjectSlot()
        return slot

    def _start(self, inv: Invocation) -> None:
        dep = self.latest
        inv.deployment = dep
        dep.pinned += 1
        inv.started_at = self.clock.now()
        self._add("invocation.started", invocation=inv.id, deployment=dep.id,
                     data={"target": inv.target, "key": inv.key})
        self._new_attempt(inv)

    def _pick_host(self, dep: Deployment) -> Host | None:
        # Host.available, spelled out: a property call per host per attempt.
        candidates = [h for h in dep.hosts if not h.paused and not h.crashed]
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        return self.random.choice(candidates)

    def _new_attempt(self, inv: Invocation) -> None:
        if inv.status == "completed":
            return
        dep = inv.deployment
        assert dep is not None
        host = self._pick_host(dep)
        if host is None:
            inv.status = "backing-off"
            if inv not in dep.waiting:
                dep.waiting.append(inv)
            return
        inv.attempts += 1
        att = Attempt(inv, inv.attempts, host)
        inv.attempt = att
        handler = dep.app.service(inv.service).handler(inv.handler)
        att.coro = handler.fn(SimContext(self, att), inv.arg)  # type: ignore[assignment]
        self._add(
            "attempt.started",
            invocation=inv.id,
            deployment=dep.id,
            host=host.id,
            data={"attempt": att.number, "replay": len(inv.journal)},
        )
        if inv.status == "suspended":
            self._add("invocation.resumed", invocation=inv.id, deployment=dep.id,
                         host=host.id)
            inv.suspended_since = None
        inv.status = "running"
        self._ready.append((att, None, None))

    def _drain_waiting(self, dep: Deployment) -> None:
        while dep.waiting and any(h.available for h in dep.hosts):
            inv = dep.waiting.popleft()
            if inv.attempt is None and inv.status != "completed":
                self._new_attempt(inv)

    def _step(self, att: Attempt, value: Any, exc: BaseException | None) -> None:
        coro = att.coro
        if coro is None:
            return
        host = att.host
        if host.crashed:
            return
        if host.paused:
            host.parked.append((att, value, exc))
            self._arm_abort(att)
            return
        self._steps += 1
        att.busy = False
        self._current = att
        try:
            waited = coro.throw(exc) if exc is not None else coro.send(value)
        except StopIteration as stop:
            self._finish(att, stop.value, None)
        except TerminalError as err:
            self._finish(att, None, err.message, err.status_code)
        except Fenced:
            self._fenced(att)
        except JournalMismatch as err:
            self._mismatch(att, err)
        except Exception as err:  # a retryable failure of the attempt
            self._failed(att, err)
        else:
            self._wait(att, waited)
        finally:
            self._current = None

    def _wait(self, att: Attempt, waited: Any) -> None:
        if type(waited) is Entry:
            if waited.done:
                self._ready.append((att, None, None))
                return
            att.waiting_on = waited
            waited.listeners.append(lambda entry: self._entry_done(att, entry))
            inv = att.invocation
            if inv.attempt is att and inv.status == "running":
                inv.status = "suspended"
                inv.suspended_since = self.clock.now()
                self._add("invocation.suspended", invocation=inv.id,
                             deployment=att.host.deployment.id, host=att.host.id,
                             data={"on": waited.kind})
        elif type(waited) is IoWait:
            att.busy = True
            self.clock.call_later(waited.delay, lambda: self._ready.append((att, None, None)))
        elif type(waited) is _HostAction:
            self._ready.append((att, None, None))
            if waited.action[0] == "pause":
                self.pause_host(att.host.id, waited.action[1])
            else:
                self.crash_host(att.host.id)
        else:
            self._close(att)
            raise SimulationError(
                f"handler {att.invocation.target} awaited {waited!r}, which the simulator"
                " cannot drive: await only context futures and world endpoints"
            )

    def _entry_done(self, att: Attempt, entry: Entry) -> None:
        if att.coro is None or att.waiting_on is not entry:
            return
        att.waiting_on = None
        inv = att.invocation
        if inv.attempt is att and inv.status == "suspended":
            inv.status = "running"
            inv.suspended_since = None
            self._add("invocation.resumed", invocation=inv.id,
                         deployment=att.host.deployment.id, host=att.host.id)
        self._ready.append((att, None, None))

    def _arm_abort(self, att: Attempt) -> None:
        inv = att.invocation
        if att.abort_timer is not None or inv.attempt is not att:
            return
        att.abort_timer = self.clock.call_later(self.abort_timeout, lambda: self._abort(att))

    def _abort(self, att: Attempt) -> None:
        att.abort_timer = None
        inv = att.invocation
        if inv.attempt is not att or not att.host.paused:
            return
        self._add("attempt.abandoned", invocation=inv.id, host=att.host.id,
                     deployment=att.host.deployment.id,
                     data={"attempt": att.number, "after": self.abort_timeout})
        inv.attempt = None
        self._stale.append(att)
        self._new_attempt(inv)

    def _close(self, att: Attempt) -> None:
        coro, att.coro = att.coro, None
        if att.abort_timer is not None:
            att.abort_timer.cancel()
            att.abort_timer = None
        if coro is not None:
            try:
                coro.close()
            except BaseException:  # handler code misbehaving on close must not stop the sim
                pass

    def _fenced(self, att: Attempt) -> None:
        inv = att.invocation
        self._add("attempt.fenced", invocation=inv.id, host=att.host.id,
                     deployment=att.host.deployment.id, data={"attempt": att.number})
        self._close(att)

    def _failed(self, att: Attempt, err: Exception) -> None:
        inv = att.invocation
        self._close(att)
        stale = inv.attempt is not att
        self._add("attempt.failed", invocation=inv.id, host=att.host.id,
                     deployment=att.host.deployment.id,
                     data={"attempt": att.number, "error": f"{type(err).__name__}: {err}",
                           "error_type": type(err).__name__, "stale": stale})
        if stale:
            return
        inv.attempt = None
        if inv.attempts >= self.max_attempts:
            inv.status = "paused"
            self._add("invocation.paused", invocation=inv.id,
                         deployment=inv.deployment.id if inv.deployment else None,
                         data={"reason": "max attempts"})
            return
        delay = min(self.retry_base * 2 ** (inv.attempts - 1), self.retry_max)
        self._schedule_retry(inv, delay)

    def _schedule_retry(self, inv: Invocation, delay: float) -> None:
        inv.status = "backing-off"
        self.clock.call_later(delay, lambda: self._retry(inv))

    def _retry(self, inv: Invocation) -> None:
        if inv.attempt is None and inv.status == "backing-off":
            self._new_attempt(inv)

    def _mismatch(self, att: Attempt, err: JournalMismatch) -> None:
        inv = att.invocation
        self._close(att)
        self._add("journal.mismatch", invocation=inv.id, host=att.host.id,
                     deployment=att.host.deployment.id, data={"detail": str(err)})
        if inv.attempt is att:
            inv.attempt = None
            inv.status = "paused"
            self._add("invocation.paused", invocation=inv.id,
                         deployment=att.host.deployment.id, data={"reason": "journal mismatch"})

    def _finish(self, att: Attempt, value: Any, error: str | None,
                status: int | None = None) -> None:
        inv = att.invocation
        self._close(att)
        if inv.attempt is not att:
            self._fenced(att)
            return
        inv.attempt = None
        inv.status = "completed"
        inv.completed_at = self.clock.now()
        inv.result, inv.error = value, error
        dep = inv.deployment
        assert dep is not None
        dep.pinned -= 1
        self._add("invocation.completed", "ok" if error is None else "fail",
                     invocation=inv.id, deployment=dep.id, host=att.host.id,
                     data={"target": inv.target, "error": error, "status": status} if error
                     else {"target": inv.target})
        if inv.exclusive and inv.key is not None:
            slot = self._slot(inv.service, inv.key)
            slot.holder = None
            if slot.queue:
                nxt = slot.queue.popleft()
                slot.holder = nxt
                self._start(nxt)
        if inv.caller is not None:
            self._complete(inv.caller[1], value, error)
        self._check_drained(dep)

    def _check_drained(self, dep: Deployment) -> None:
        if dep.superseded_at is not None and dep.pinned == 0 and dep.drained_at is None:
            dep.drained_at = self.clock.now()
            self._add("deployment.drained", deployment=dep.id,
                         data={"superseded_at": dep.superseded_at,
                               "after": dep.drained_at - dep.superseded_at})

    def _complete(self, entry: Entry, value: Any, error: str | None) -> None:
        if entry.done:
            return
        self._order += 1
        entry.complete(value, error, self._order)

    def _fault_point(self, name: str) -> Awaitable[None] | None:
        att = self._current
        if att is None:
            return None
        host = att.host
        handler = self.on_fault_point
        action = handler(name, host) if handler is not None else None
        self._add("faultpoint.reached", host=host.id, deployment=host.deployment.id,
                     invocation=att.invocation.id,
                     data={"point": name, "action": action[0] if action else None})
        return _HostAction(action, name) if action is not None else None

    # -- journal access for SimContext

    def _replay(self, att: Attempt, kind: str, name: str) -> Entry | None:
        inv = att.invocation
        if inv.attempt is not att:
            raise Fenced()
        idx = att.cursor
        journal = inv.journal
        if idx < len(journal):
            entry = journal[idx]
            if entry.kind != kind or entry.name != name:
                raise JournalMismatch(
                    f"{inv.target} ({inv.id}) journal entry {idx} is {entry.kind} "
                    f"{entry.name!r} but the code on deployment "
                    f"{att.host.deployment.id} now issues {kind} {name!r}"
                )
            att.cursor = idx + 1
            return entry
        return None

    def _append(self, att: Attempt, entry: Entry) -> Entry:
        inv = att.invocation
        if inv.attempt is not att:
            raise Fenced()
        inv.journal.append(entry)
        att.cursor = len(inv.journal)
        if self.record_journal and entry.kind not in self._unrecorded:
            self._add("journal.entry", invocation=inv.id, host=att.host.id,
                         data={"index": att.cursor - 1, "entry": entry.kind,
                               "name": entry.name})
        return entry


_STATE_COMMANDS: frozenset[str] = frozenset({"get", "set", "clear"})


class _ObjectSlot:
    __slots__ = ("holder", "queue", "state")

    def __init__(self) -> None:
        self.holder: Invocation | None = None
        self.queue: deque[Invocation] = deque()
        self.state: dict[str, Any] = {}


def _seconds(delta: timedelta | float) -> float:
    return delta.total_seconds() if isinstance(delta, timedelta) else float(delta)


class SimContext:
    """The handler-facing context on the simulator (see contract.binding.Context)."""

    __slots__ = ("_att", "_sim", "_state_of")

    def __init__(self, sim: Simulator, att: Attempt) -> None:
        self._sim = sim
        self._att = att
        # The object's state, found on first use: a handler reads and writes it many times.
        self._state_of: dict[str, Any] | None = None

    @property
    def simulator(self) -> Simulator:
        """The simulator running this attempt (for other contexts built over it)."""
        return self._sim

    @property
    def attempt(self) -> Attempt:
        return self._att

    def key(self) -> str:
        key = self._att.invocation.key
        if key is None:
            raise TerminalError("key() is only available in virtual object handlers")
        return key

    def invocation_id(self) -> str:
        return self._att.invocation.id

    def host(self) -> str:
        return self._att.host.id

    async def run(self, name: str, action: Callable[[], Any]) -> Any:
        sim, att = self._sim, self._att
        entry = sim._replay(att, "run", name)
        if entry is not None:
            if entry.error is not None:
                raise TerminalError(entry.error)
            return entry.value
        try:
            result = action()
            # Most actions are coroutine functions: one type check before inspect's three.
            if type(result) is CoroutineType or inspect.isawaitable(result):
                result = await result
        except TerminalError as err:
            sim._append(att, Entry("run", name, done=True, error=err.message))
            raise
        sim._append(att, Entry("run", name, done=True, value=result))
        return result

    def time(self) -> Awaitable[float]:
        clock = self._sim.clock
        return self.run("time", clock.now)

    def sleep(self, delta: timedelta | float) -> EntryFuture:
        sim, att = self._sim, self._att
        entry = sim._replay(att, "sleep", "")
        if entry is None:
            entry = sim._append(att, Entry("sleep", ""))
            wake = sim.clock.now() + _seconds(delta)
            inv_id = att.invocation.id

            def fire(entry: Entry = entry) -> None:
                sim._add("timer.fired", invocation=inv_id, data={"at": wake})
                sim._complete(entry, None, None)

            sim.clock.call_at(wake, fire)
        return EntryFuture(entry)

    def awakeable(self) -> tuple[str, EntryFuture]:
        sim, att = self._sim, self._att
        inv = att.invocation
        awk_id = f"awk.{inv.id}.{att.cursor}"
        entry = sim._replay(att, "awakeable", awk_id)
        if entry is None:
            entry = sim._append(att, Entry("awakeable", awk_id))
            sim._awakeables[awk_id] = entry
        return awk_id, EntryFuture(entry)

    def resolve_awakeable(self, awakeable_id: str, value: Any) -> None:
        sim, att = self._sim, self._att
        if sim._replay(att, "resolve", awakeable_id) is None:
            sim._append(att, Entry("resolve", awakeable_id, done=True))
            sim.resolve_awakeable(awakeable_id, value)

    def reject_awakeable(self, awakeable_id: str, reason: str) -> None:
        sim, att = self._sim, self._att
        if sim._replay(att, "reject", awakeable_id) is None:
            sim._append(att, Entry("reject", awakeable_id, done=True))
            sim.reject_awakeable(awakeable_id, reason)

    def _call(self, target: HandlerRef, key: str | None, arg: Any) -> EntryFuture:
        sim, att = self._sim, self._att
        name = f"{target}" if key is None else f"{target}:{key}"
        entry = sim._replay(att, "call", name)
        if entry is None:
            entry = sim._append(att, Entry("call", name))
            child = sim._new_invocation(target.service, target.handler, key, arg,
                                        (att.invocation, entry))
            sim._enqueue(child)
        return EntryFuture(entry)

    def service_call(self, target: HandlerRef, arg: Any) -> EntryFuture:
        return self._call(target, None, arg)

    def object_call(self, target: HandlerRef, key: str, arg: Any) -> EntryFuture:
        return self._call(target, key, arg)

    def _send(self, target: HandlerRef, key: str | None, arg: Any,
              send_delay: timedelta | float | None) -> None:
        sim, att = self._sim, self._att
        name = f"{target}" if key is None else f"{target}:{key}"
        if sim._replay(att, "send", name) is not None:
            return
        sim._append(att, Entry("send", name, done=True))
        child = sim._new_invocation(target.service, target.handler, key, arg, None)
        delay = _seconds(send_delay) if send_delay is not None else 0.0
        sim._add("send", invocation=att.invocation.id, host=att.host.id,
                    data={"target": name, "child": child.id, "delay": delay})
        if delay > 0:
            sim.clock.call_later(delay, lambda: sim._enqueue(child))
        else:
            sim._enqueue(child)

    def service_send(self, target: HandlerRef, arg: Any,
                     send_delay: timedelta | float | None = None) -> None:
        self._send(target, None, arg, send_delay)

    def object_send(self, target: HandlerRef, key: str, arg: Any,
                    send_delay: timedelta | float | None = None) -> None:
        self._send(target, key, arg, send_delay)

    def _state(self) -> dict[str, Any]:
        state = self._state_of
        if state is None:
            inv = self._att.invocation
            if inv.key is None:
                raise TerminalError("state is only available in virtual object handlers")
            state = self._state_of = self._sim._slot(inv.service, inv.key).state
        return state

    def get(self, name: str) -> _Ready:
        sim, att = self._sim, self._att
        entry = sim._replay(att, "get", name)
        if entry is None:
            entry = sim._append(att, Entry("get", name, done=True,
                                           value=self._state().get(name)))
        return _Ready(entry.value)

    def set(self, name: str, value: Any) -> None:
        sim, att = self._sim, self._att
        if sim._replay(att, "set", name) is None:
            sim._append(att, Entry("set", name, done=True))
            self._state()[name] = value

    def clear(self, name: str) -> None:
        sim, att = self._sim, self._att
        if sim._replay(att, "clear", name) is None:
            sim._append(att, Entry("clear", name, done=True))
            self._state().pop(name, None)

    def select(self, **futures: DurableFuture[Any]) -> EntryFuture:
        sim, att = self._sim, self._att
        members: dict[str, Entry] = {}
        for label, fut in futures.items():
            if not isinstance(fut, EntryFuture):
                raise TypeError(f"select() takes durable futures of this context, not {fut!r}")
            members[label] = fut.entry
        entry = sim._replay(att, "select", ",".join(members))
        if entry is None:
            entry = sim._append(att, Entry("select", ",".join(members)))
            done = [(e.order, label, e) for label, e in members.items() if e.done]
            if done:
                _, label, winner = min(done)
                sim._complete(entry, (label, winner.value) if winner.error is None else None,
                              winner.error)
            else:
                sel = entry

                def _on_member(member: Entry, label: str) -> None:
                    if not sel.done:
                        sim._complete(sel, (label, member.value) if member.error is None
                                      else None, member.error)

                for label, member in members.items():
                    member.listeners.append(functools.partial(_on_member, label=label))
        return EntryFuture(entry)

