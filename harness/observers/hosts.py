"""Worker processes of a user's runtime, and the host faults on them.

Every example adapter needs the same thing besides its observer: one process group per worker
of each deployment, kill -9 with a restart of the same version after some downtime, SIGSTOP /
SIGCONT, and fault points at the world's deliveries ("after the email was sent, before the
engine recorded the step": the world has just recorded the delivery, the worker has not yet
heard back). `WorkerHosts` does that and records `host.*` and `faultpoint.reached`, so an
adapter gives it the command that starts a worker of a version and the observer's view of
which deployment runs what.

An app may also name fault points of its own (`app_points`) and ask the harness at each one
(the world server's synchronous `POST /faultpoint`, with its pid): `reach(point, pid)` kills
or stops the asking worker's process group while it waits for the answer, so the fault lands
exactly in the app's window, not one observer poll late.

Times are the runtime's clock (schedule seconds); `tick()` (call it from `advance`) restarts
and resumes what is due. With `tick_every`, a thread of its own also ticks every that many real
seconds: a pause ends and a crashed worker comes back on time even while the runner is held in
an adapter call. A real stall does not wait for the caller either; and a worker stopped while
it holds a lock (a SQLite write lock, say) would otherwise block the very call that has to
return before the runner ticks again, until the run's wall-clock limit.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Mapping
from typing import Final

from harness.components.procs import ProcessGroup
from harness.history import History, Record
from harness.observers.base import EngineObserver

__all__ = ["POINTS", "WorkerHosts", "turn_of_delivery"]

# Fault points at deliveries to the world: point -> what reaches it, the effect whose
# delivery does (`effect.delivered`) or a card shown (`tool.awaiting`, recorded as the card
# service shows it, while the app's request is still in flight).
CARD_SHOWN: Final = "tool.awaiting"
POINTS: Final[Mapping[str, str]] = {
    "effect.email.after_send": "email",
    "effect.charge.after_charge": "charge",
    "effect.model.after_call": "model",
    "card.after_show": CARD_SHOWN,
}


def turn_of_delivery(delivery: Record) -> str | None:
    """The turn a delivery to the world belongs to: its `turn`, else the turn its tool call
    names (the world's model provider names tool calls `TURN.tK`)."""
    if delivery.turn is not None:
        return delivery.turn
    return delivery.tool_call.rsplit(".t", 1)[0] if delivery.tool_call else None


class WorkerHosts:
    """Worker process groups by host id (`DEPLOYMENT/w1`), with crash, pause and fault points.

    `start(deployment)` starts one worker of that deployment; the engine's `observer` says
    which deployment an invocation runs on (to find the host a fault point hits) and which
    deployments have work pinned (to pick the host of 'owner'); `invocation_of` maps a
    delivery record to that invocation (default `turn_of_delivery`: for agents that run one
    invocation per turn, named by the turn id).
    """

    def __init__(self, history: History, *, now: Callable[[], float],
                 start: Callable[[str], ProcessGroup], downtime: float,
                 observer: EngineObserver,
                 invocation_of: Callable[[Record], str | None] | None = None,
                 app_points: tuple[str, ...] = (), tick_every: float | None = None) -> None:
        self.history, self.now, self.start, self.downtime = history, now, start, downtime
        self.observer = observer
        self.invocation_of = invocation_of or turn_of_delivery
        self.hosts: dict[str, tuple[str, ProcessGroup]] = {}
        self._later: list[tuple[float, str, str]] = []  # (when, "restart" | "resume", host)
        self._armed: dict[str, list[tuple[str, str, float]]] = {}  # what -> (point, ...)
        self.app_points = app_points
        self._at_point: dict[str, list[tuple[str, float]]] = {}  # app point -> (action, ...)
        self._lock = threading.RLock()
        history.subscribe(self._delivered)
        self._closed = threading.Event()
        self._ticker: threading.Thread | None = None
        self._failed: Exception | None = None
        self._stopping = False
        if tick_every is not None:
            self._ticker = threading.Thread(target=self._tick_until_closed, args=(tick_every,),
                                            name="worker-hosts-tick", daemon=True)
            self._ticker.start()

    def _tick_until_closed(self, every: float) -> None:
        while not self._closed.wait(every):
            try:
                self._tick()
            except Exception as exc:  # a worker that cannot restart: the runner's tick says so
                self._failed = exc
                break
        # A worker's death signal follows the thread that started it (PR_SET_PDEATHSIG), so
        # this thread outlives every worker it restarted: it ends only when the hosts close.
        self._closed.wait()

    def add(self, deployment: str) -> str:
        """Start a worker of `deployment`; returns its host id."""
        with self._lock:
            host = f"{deployment}/w{sum(1 for d, _ in self.hosts.values() if d == deployment) + 1}"
            self.hosts[host] = (deployment, self.start(deployment))
            return host

    def rename(self, deployment: str, engine_id: str) -> None:
        """Key `deployment`'s hosts by `engine_id` from now on: the id the engine gave the
        deployment once a worker of it ran (Restate assigns one only when a running worker
        registers), which is what the observer says invocations are pinned to."""
        with self._lock:
            for host, (dep, group) in list(self.hosts.items()):
                if dep == deployment:
                    self.hosts[host] = (engine_id, group)

    def select(self, selector: str) -> str:
        """A schedule's host selector: 'latest/N', 'any' / 'owner' (the oldest live host
        whose deployment has work pinned to it, else the oldest live one), or an id."""
        with self._lock:
            live = [h for h, (_, group) in self.hosts.items() if group.alive]
            if not live:
                raise LookupError(f"no live worker host for selector {selector!r}")
            if selector.startswith("latest/"):
                return live[-min(len(live), int(selector.split("/")[1]))]
            if selector in ("any", "owner"):
                busy = [h for h in live if self.observer.pinned_to(self.hosts[h][0])]
                return (busy or live)[0]
            return selector

    def crash(self, host: str, downtime: float | None = None) -> str:
        """kill -9 the host's process group; a worker of the same version restarts after
        `downtime` (default: the constructor's)."""
        with self._lock:
            dep, group = self.hosts[host]
            group.kill()
            self.history.add("host.crashed", host=host, deployment=dep)
            wait = self.downtime if downtime is None else downtime
            self._later.append((self.now() + wait, "restart", host))
            return host

    def pause(self, host: str, duration: float) -> str:
        with self._lock:
            dep, group = self.hosts[host]
            group.pause()
            self.history.add("host.paused", host=host, deployment=dep,
                             data={"duration": duration})
            self._later.append((self.now() + duration, "resume", host))
            return host

    def arm(self, point: str, action: str, duration: float, times: int) -> None:
        if point in self.app_points:
            with self._lock:
                self._at_point.setdefault(point, []).extend([(action, duration)] * times)
            return
        what = POINTS.get(point)
        if what is None:
            raise ValueError(f"unknown fault point {point!r}; known: "
                             f"{sorted([*POINTS, *self.app_points])}")
        with self._lock:
            self._armed.setdefault(what, []).extend([(point, action, duration)] * times)

    def host_of(self, pid: int) -> str | None:
        """The live host whose process group holds process `pid`."""
        try:
            group_id = os.getpgid(pid)
        except OSError:
            return None
        with self._lock:
            return next((h for h, (_, g) in self.hosts.items() if g.alive and g.pgid == group_id),
                        None)

    def reach(self, point: str, pid: int) -> str | None:
        """Process `pid` of a worker reached app fault point `point` and waits for the answer:
        act now if it is armed ("crash": kill -9 its host; "pause": SIGSTOP it for the armed
        duration) and return the action, else None."""
        with self._lock:
            armed = self._at_point.get(point)
            host = self.host_of(pid)
            if not armed or host is None:
                return None
            action, duration = armed.pop(0)
            if action == "crash":
                self.crash(host)
            else:
                self.pause(host, duration)
            return action

    def tick(self) -> None:
        """Restart crashed hosts and resume paused ones whose time has come."""
        if self._failed is not None:
            raise self._failed
        self._tick()

    def _tick(self) -> None:
        with self._lock:
            if self._stopping:
                return
            due = [item for item in self._later if item[0] <= self.now()]
            for item in due:
                self._later.remove(item)
                _, what, host = item
                dep, group = self.hosts[host]
                if what == "resume":
                    group.resume()
                    self.history.add("host.resumed", host=host, deployment=dep)
                else:
                    self.hosts[host] = (dep, self.start(dep))
                    self.history.add("host.restarted", host=host, deployment=dep)

    def close(self) -> None:
        with self._lock:
            self._stopping = True  # no restart from here on
            for _, group in self.hosts.values():
                group.signal(signal.SIGCONT)  # a stopped group cannot act on TERM
                group.stop()
        self._closed.set()  # the ticker ends after the workers it may have started
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join()

    def _delivered(self, r: Record) -> None:
        if r.kind == "effect.delivered":
            what = str(r.data.get("effect"))
        elif r.kind == CARD_SHOWN:
            what = CARD_SHOWN
        else:
            return
        with self._lock:
            armed = self._armed.get(what)
            if not armed:
                return
            invocation = self.invocation_of(r)
            if invocation is None:
                return
            dep = self.observer.deployment_of(invocation)
            if dep is None:  # started since the last poll: read the engine now
                self.observer.refresh()
                dep = self.observer.deployment_of(invocation)
            live = {d for d, g in self.hosts.values() if g.alive}
            if dep is None and len(live) == 1:
                # The engine has not said yet where the invocation runs (its first task is
                # still being recorded), but only one deployment has a live worker: the
                # delivery came from it. Waiting for the engine would let the step record its
                # result first, and the point would miss the window it exists for.
                dep = next(iter(live))
            hosts = [h for h, (d, g) in self.hosts.items() if d == dep and g.alive]
            if not hosts:  # not one of ours (yet): the point stays armed
                return
            point, action, duration = armed.pop(0)
            host = hosts[0]
            self.history.add("faultpoint.reached", host=host, deployment=dep,
                             data={"point": point, "action": action})
            if action == "crash":
                self.crash(host)
            else:
                self.pause(host, duration)
