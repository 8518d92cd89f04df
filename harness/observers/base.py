"""What every engine observer shares: poll the engine's own state, write what changed.

An engine observer turns what a durable engine says about itself (Restate's `sys_invocation`,
Temporal's workflow descriptions, DBOS's `workflow_status`) into the records the checkers
judge: `invocation.*` (which deployment each invocation is pinned to, when it waits, when it
completes) and `deployment.*` (registered, superseded, drained). Each engine module only
writes `snapshot()`, one read of the engine's state as plain values; this base compares each
snapshot with the one before and records the differences, on a thread of its own.

Why poll, not hook: the point is to judge the engine by what it reports, not by what the
application believes it did; and a user's adapter then only drives its application.

What a poll cannot see it does not invent: an invocation that starts and completes between
two polls is recorded as created, started and completed at the poll that first saw it. The
interval (default 0.1 s real) bounds how late a record can be; checkers judge bounds of
seconds to days, with a tolerance.

What every engine is judged by the same way, whatever its own words:

- a turn starts when its handler starts (its invocation is first seen not pending), not when
  its message is queued (a Restate virtual object's inbox, a DBOS queue), and ends when its
  invocation completes;
- an invocation whose turn has an open approval card waits on a person: it counts as
  `suspended`, though the engine may say running (Restate before its inactivity timeout, a
  DBOS workflow in `DBOS.recv`);
- the cards are recorded when the world shows and closes them (a listener on the world's
  card board), not at the next poll, so a card comes before any answer to it; a card of a
  turn not yet seen started first reads the engine, so the turn starts before its card.
"""

from __future__ import annotations

import threading
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final, Literal

from harness.history import History
from harness.world import Card, World, record_card

__all__ = [
    "DeploymentState",
    "EngineObserver",
    "InvocationState",
    "Snapshot",
    "Status",
    "TurnEnd",
    "TurnOf",
]

Status = Literal["pending", "running", "suspended", "paused", "completed"]
STATUSES: Final = ("pending", "running", "suspended", "paused", "completed")


@dataclass(frozen=True, slots=True)
class InvocationState:
    """One invocation (a Restate invocation, a Temporal workflow, a DBOS workflow) as the
    engine reports it. `deployment` is the deployment it is pinned to, None while it has none.
    """

    id: str
    status: Status
    deployment: str | None = None
    target: str | None = None
    key: str | None = None
    # Why it is paused, or how it completed ("succeeded", "failed", ...).
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class DeploymentState:
    """One deployment: `current` when the engine routes new work to it."""

    id: str
    version: str
    current: bool = False


@dataclass(frozen=True, slots=True)
class Snapshot:
    invocations: tuple[InvocationState, ...] = ()
    deployments: tuple[DeploymentState, ...] = ()


# Which invocations are turns of the agent: (session, turn, message id), else None. With it
# the observer also records `turn.started` / `turn.ended`, so an adapter whose agent runs one
# workflow per message needs no observations of its own.
TurnOf = Callable[[InvocationState], "tuple[str, str, str] | None"]
# Called when a turn's invocation completed, before its `turn.ended` is recorded (where an
# adapter closes the cards the engine's result settles).
TurnEnd = Callable[[tuple[str, str, str], InvocationState], None]


class EngineObserver(ABC):
    """Polls `snapshot()` every `interval` real seconds on its own thread; records changes.

    Records are stamped by the history's clock (bind the runtime's clock to the history, so
    they are in schedule time). Give `world` to also record the approval cards as the
    agent shows and closes them (`tool.awaiting`, `tool.result` with the card's outcome).
    """

    def __init__(self, history: History, *, interval: float = 0.1,
                 turn_of: TurnOf | None = None, world: World | None = None,
                 on_turn_end: TurnEnd | None = None) -> None:
        self.history = history
        self.interval = interval
        self.turn_of = turn_of
        self.world = world
        self.on_turn_end = on_turn_end
        self._lock = threading.RLock()
        self._poll_lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._invocations: dict[str, InvocationState] = {}
        self._pinned: dict[str, str] = {}  # invocation -> deployment it was started on
        self._deployments: dict[str, DeploymentState] = {}
        self._superseded: set[str] = set()
        self._drained: set[str] = set()
        self._was_current: set[str] = set()
        self._ended: list[tuple[tuple[str, str, str], InvocationState]] = []
        self._starting: list[tuple[str, str, str]] = []
        self._cards: dict[str, str | None] = {}  # tool call -> outcome it was closed with
        self._started_turns: set[str] = set()
        self.polls = 0
        self.last_error: str | None = None
        if world is not None:
            world.cards.listeners.append(self._card_changed)

    # -- what an engine module writes

    @abstractmethod
    def snapshot(self) -> Snapshot:
        """One read of the engine's state. May raise: the poll is retried next interval."""

    def close_engine(self) -> None:
        """Release the engine client (called on the observer's thread when it stops)."""
        return None

    # -- running

    def start(self) -> EngineObserver:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=type(self).__name__,
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self.world is not None and self._card_changed in self.world.cards.listeners:
            self.world.cards.listeners.remove(self._card_changed)
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> EngineObserver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.poll()
                self._wake.wait(self.interval)
                self._wake.clear()
        finally:
            self.close_engine()

    def poll(self) -> bool:
        """Read the engine once and record what changed; False when the read failed."""
        try:
            with self._poll_lock:  # an engine client may serve one read at a time
                snap = self.snapshot()
        except Exception as exc:  # the engine may be restarting: try again next interval
            where = traceback.extract_tb(exc.__traceback__)[-1]
            self.last_error = (f"{type(exc).__name__}: {exc} "
                               f"({where.filename.rsplit('/', 1)[-1]}:{where.lineno})")
            return False
        with self._lock:
            self._apply(snap)
            self._watch_cards()
            # What one read shows happened in between: the turns that ended did so before
            # the ones that started (a message queued behind a turn runs once it ends), so
            # their ends come first, each after its own start.
            starting = {t[1]: t for t in self._starting}
            for turn, state in self._ended:
                if starting.pop(turn[1], None) is not None:
                    self._record_start(turn)
                if self.on_turn_end is not None:
                    self.on_turn_end(turn, state)
                session, turn_id, _ = turn
                detail = state.detail
                self.history.add("turn.ended", session=session, turn=turn_id,
                                 data={"event_id": f"{turn_id}.ended",
                                       "reason": "completed" if detail in (None, "succeeded")
                                       else str(detail)})
            for turn in starting.values():
                self._record_start(turn)
            self._ended.clear()
            self._starting.clear()
            self.polls += 1
            self.last_error = None
        return True

    def refresh(self, timeout: float = 10.0) -> bool:
        """Read the engine now and return once its changes are recorded.

        On the observer's own thread when it runs: an engine client may belong to that
        thread's event loop, and the caller may be inside an event loop of its own (the
        world server's request threads are).
        """
        if self._thread is None or threading.current_thread() is self._thread:
            return self.poll()
        target = self.polls + 2  # the first may have read the engine before the call
        deadline = time.monotonic() + timeout
        while self.polls < target:
            if time.monotonic() > deadline:
                return False
            self._wake.set()
            time.sleep(0.005)
        return True

    def wait_polls(self, count: int = 2, timeout: float = 10.0) -> bool:
        """Block until `count` more successful polls happened (a fresh view), or timeout."""
        target = self.polls + count
        deadline = time.monotonic() + timeout
        while self.polls < target:
            if time.monotonic() > deadline:
                return False
            time.sleep(self.interval / 4)
        return True

    def settle(self, timeout: float = 30.0, polls: int = 2) -> bool:
        """Block until the engine has nothing left to run: `polls` fresh reads in a row in
        which every invocation is completed, suspended or paused (waiting on a person, a
        timer or a signal), or until `timeout` real seconds; False then.

        Why: a run ends at its horizon, which on a scaled clock can come while the engine
        is still applying the last step (an answer at 3 days whose email goes out 0.4 real
        seconds later, hours of scenario time at 8640 per real second). A record written
        after `run.end` is judged by nobody: the answer reads as silently dropped. So the
        runtime's `finish` waits for the engine to settle first, as the Restate reference
        adapter waits for quiescence. Delayed work not yet due (Restate's scheduled sends)
        is not listed by the observers, so it does not hold the run up.
        """
        deadline = time.monotonic() + timeout
        calm = 0
        while calm < polls:
            left = deadline - time.monotonic()
            if left <= 0 or not self.wait_polls(1, timeout=left):
                return False
            with self._lock:
                busy = any(s.status in ("pending", "running")
                           for s in self._invocations.values())
            calm = 0 if busy else calm + 1
        return True

    # -- what the adapter may ask

    def deployment_of(self, invocation: str) -> str | None:
        with self._lock:
            return self._pinned.get(invocation)

    def pinned_to(self, deployment: str) -> list[str]:
        """Invocations not completed and pinned to `deployment`."""
        with self._lock:
            return [i for i, d in self._pinned.items()
                    if d == deployment and self._invocations[i].status != "completed"]

    def current(self) -> str | None:
        """The deployment the engine routes new work to, as last seen (None: none yet)."""
        with self._lock:
            return next((d.id for d in self._deployments.values() if d.current), None)

    def invocations(self) -> dict[str, InvocationState]:
        with self._lock:
            return dict(self._invocations)

    # -- recording

    def _apply(self, snap: Snapshot) -> None:
        add = self.history.add
        for dep in snap.deployments:
            if dep.id not in self._deployments:
                add("deployment.registered", deployment=dep.id, data={"version": dep.version})
            self._deployments[dep.id] = dep
        waiting = self._waiting_turns()
        for inv in snap.invocations:
            if inv.status == "running" and self.turn_of is not None:
                turn = self.turn_of(inv)
                if turn is not None and turn[1] in waiting:
                    inv = replace(inv, status="suspended")  # waits on a person
            self._invocation(self._invocations.get(inv.id), inv)
        # A deployment is superseded once another one is current; it drains once nothing
        # running or waiting is pinned to it.
        # Only a deployment that once took new work can be superseded: a version registered
        # and never promoted was never live.
        self._was_current.update(d.id for d in self._deployments.values() if d.current)
        if any(d.current for d in self._deployments.values()):
            for dep in self._deployments.values():
                if dep.current or dep.id in self._superseded or dep.id not in self._was_current:
                    continue
                self._superseded.add(dep.id)
                add("deployment.superseded", deployment=dep.id,
                    data={"version": dep.version, "pinned": len(self.pinned_to(dep.id))})
        for dep_id in sorted(self._superseded - self._drained):
            if not self.pinned_to(dep_id):
                self._drained.add(dep_id)
                add("deployment.drained", deployment=dep_id)

    def _invocation(self, old: InvocationState | None, new: InvocationState) -> None:
        add = self.history.add
        inv = new.id
        data = {k: v for k, v in (("target", new.target), ("key", new.key)) if v is not None}
        turn = self.turn_of(new) if self.turn_of is not None else None
        if old is None:
            add("invocation.created", invocation=inv, data=dict(data))
        if turn is not None and new.status != "pending":
            self._turn_started(turn)
        pinned = self._pinned.get(inv)
        if new.deployment is not None and new.deployment != pinned:
            kind = "invocation.started" if pinned is None else "invocation.repinned"
            self._pinned[inv] = new.deployment
            add(kind, invocation=inv, deployment=new.deployment, data=dict(data))
        before = old.status if old is not None else "pending"
        if new.status != before:
            dep = self._pinned.get(inv)
            if new.status == "suspended":
                add("invocation.suspended", invocation=inv, deployment=dep)
            elif new.status == "running" and before in ("suspended", "paused"):
                add("invocation.resumed", invocation=inv, deployment=dep)
            elif new.status == "paused":
                add("invocation.paused", invocation=inv, deployment=dep,
                    data={"reason": new.detail or "paused by the engine"})
            elif new.status == "completed":
                add("invocation.completed", invocation=inv, deployment=dep,
                    data={"outcome": new.detail or "completed"})
                if turn is not None:  # after the cards of this poll: a turn ends last
                    self._ended.append((turn, new))
        self._invocations[inv] = new

    def _turn_started(self, turn: tuple[str, str, str]) -> None:
        # Recorded at the end of the poll (see `poll`), once per turn.
        if turn[1] not in self._started_turns:
            self._started_turns.add(turn[1])
            self._starting.append(turn)

    def _record_start(self, turn: tuple[str, str, str]) -> None:
        session, turn_id, message = turn
        self.history.add("turn.started", session=session, turn=turn_id,
                         data={"event_id": f"{turn_id}.started", "message": message})

    def _waiting_turns(self) -> set[str]:
        """Turns with an open card: their invocations wait on a person."""
        if self.world is None:
            return set()
        return {c.turn for c in list(self.world.state.cards.values()) if c.closed is None}

    def _card_changed(self, card: Card) -> None:
        # Called by the world as the card is shown or closed, on the thread that did it.
        if card.closed is None and card.turn not in self._started_turns:
            # The card proves its turn's handler runs: read the engine first, so the turn
            # is recorded started before its card (outside the lock the poll needs).
            self.refresh(timeout=2.0)
        with self._lock:
            self._record_card(card)

    def _watch_cards(self) -> None:
        # What the listener did not see (cards shown before this observer was made).
        if self.world is None:
            return
        for card in list(self.world.state.cards.values()):
            self._record_card(card)

    def _record_card(self, card: Card) -> None:
        record_card(self.history, card, self._cards)
