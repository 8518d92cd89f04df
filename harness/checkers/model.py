"""One model of a run, built from its history in one pass, which the checkers and the report's
timeline read instead of each folding the history again.

`model_of(history)` builds it (once per history: the checkers of one run share it) as frozen
values:

- `fault_windows`: every fault the runner injected, with when it started and ended, as its
  fault kind says (`harness.faults`: a duration, the record that ends it, the heal);
- `faults`: the windows as the checkers count them (hosts down, services failing or holding a
  call, the clock jumping), when the last of them ended and whether one never healed;
- `sessions`: each session's busy stretches (a turn in progress and not waiting on a person,
  or a queued message without its turn), and what kept it busy when the run ended;
- `invocations`: each invocation's active stretches (queued, running or paused: holding its
  key), and its state when the run ended;
- `hosts`, `epochs`: which host crashed or paused when, which epoch of a session's thread
  was assigned to which owner;
- `effects`: the effects the world saw attempted, deduplicated and delivered, and every
  delivery of a key or of a logical effect that had been delivered before;
- `calls`: each tool call's records, sorted by what they say of it: what asked the person
  (its cards, its hand-off), the answers given and those refused, its runs (intents,
  re-runs), its results and holds, the effects delivered naming it; and what follows from
  them: its approve, its final outcome, the run going on at any record;
- `turns`: each turn's session and message, when it started and when (and why) it ended;
- `identity`: the users' access to tools revoked and granted, and the user each session and
  tool call names, as of any record.

Some parts answer "as of record i" (a host paused, a revocation standing, the deployments
registered, an invocation's last start, a call's run going on): a checker that judges a
record by what was known when it was recorded asks the model at that record's index.

Observations are at-least-once: a record whose (kind, event_id) was seen is skipped where
the checkers skipped it (see `harness.checkers._common.Dedup`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from harness.checkers._common import (
    FAULT_KINDS,
    Dedup,
    Faults,
    Interval,
    attr,
    merge,
    run_end,
)
from harness.checkers.base import root_of
from harness.history import History, Record

if TYPE_CHECKING:
    from harness.faults import FaultKind

# -- values


@dataclass(frozen=True, slots=True)
class FaultWindow:
    """One injected fault: from `start` to `end` (None: an instant, or a window that had not
    ended when the history did; `open_until_end` tells which)."""

    start: float
    end: float | None
    kind: str  # the record kind without "fault.": gc-pause, crash, redeploy, heal, ...
    target: str | None  # the host, the deployment or the service it hit, if it names one
    record: Record
    open_until_end: bool = False


@dataclass(frozen=True, slots=True)
class FaultState:
    """The fault windows as the checkers count them (see `_common.Faults`)."""

    downtime: tuple[Interval, ...]  # hosts down (paused, crashed), merged
    down: tuple[tuple[str, float, float], ...]  # (host, from, to): each host's downtime
    provider: tuple[Interval, ...]  # world services failing, merged
    held: tuple[Interval, ...]  # calls a service held, clock jumps, merged
    # The deployment each host last ran (from the fault records and `deployment.registered`).
    host_deployment: dict[str, str]
    # When the last fault ended (a heal, a resume, a restart, a timed pause running out).
    last_end: float | None
    # The latest end of a fault record (its time plus its duration), a heal aside.
    records_end: float | None
    unhealed: bool  # a host paused or down, or a service failing, that never healed

    def downtime_of(self, hosts: set[str]) -> list[Interval]:
        """Merged downtime of the given hosts."""
        return merge([(a, b) for h, a, b in self.down if h in hosts])


@dataclass(frozen=True, slots=True)
class HostModel:
    """One host's crashes and pauses, as of any record of the run."""

    id: str
    crashes: tuple[Record, ...]  # host.crashed, fault.crash
    # (record index, until when the host is paused from that record on): a pause extends it
    # (forever without a duration), a resume, a crash or the heal ends it; a pause recorded
    # while the host is crashed (before its restart) does not start one.
    paused: tuple[tuple[int, float], ...]

    def crash_before(self, index: int) -> Record | None:
        """The host's last crash recorded before record `index`."""
        found = None
        for crash in self.crashes:
            if crash.index >= index:
                break
            found = crash
        return found

    def paused_until(self, index: int) -> float:
        """Until when the host was paused, as recorded before record `index` (-inf: not)."""
        until = -_INF
        for at_index, value in self.paused:
            if at_index >= index:
                break
            until = value
        return until


@dataclass(frozen=True, slots=True)
class Assignment:
    """A session's thread assigned to `epoch` (`threadlog.assigned`), owned by `owner`."""

    record: Record
    epoch: int
    owner: str | None


@dataclass(frozen=True, slots=True)
class Suspension:
    start: Record  # invocation.suspended
    deployment: str | None  # the deployment it was pinned to
    end: Record | None  # what ended it (resumed, completed, paused); None: the run did


@dataclass(frozen=True, slots=True)
class Pin:
    """An invocation pinned to `deployment` from `since` (its `start` record) to `until`
    (None: still when the run ended)."""

    deployment: str
    since: float
    start: Record
    until: float | None


@dataclass(frozen=True, slots=True)
class Pinned:
    """An invocation's pins and suspensions over the whole run."""

    id: str
    target: str | None
    pins: tuple[Pin, ...]
    suspensions: tuple[Suspension, ...]
    paused: Record | None  # the last `invocation.paused`
    completed: Record | None
    starts: tuple[Record, ...] = ()  # every `invocation.started`, on a deployment or not

    @property
    def name(self) -> str:
        return f"{self.id} {self.target}" if self.target else self.id


@dataclass(frozen=True, slots=True)
class Deployments:
    """What happened to the deployments: versions, when each was superseded and drained."""

    versions: dict[str, str]
    superseded: dict[str, Record]  # in the order they were superseded
    drained: dict[str, Record]  # the first record saying it had no pin left
    retirements: tuple[Record, ...]  # every `deployment.drained` and `.retired`
    # Deployments superseded while something was pinned to them.
    pinned_when_superseded: int
    # Every `deployment.registered`, in order: the latest as of a record is the last before it.
    registered: tuple[Record, ...] = ()

    def registered_before(self, index: int) -> int:
        """How many deployments were registered before record `index`."""
        return sum(1 for r in self.registered if r.index < index)

    def name(self, dep: str | None) -> str:
        if dep is None:
            return "an unknown deployment"
        version = self.versions.get(dep)
        return f"{dep} ({version})" if version else dep


@dataclass(frozen=True, slots=True)
class Busy:
    """A session busy from `since` until `until` (None: still busy when the run ended)."""

    since: Record
    until: Record | None
    seq: int  # the order the stretches ended in, over every session


@dataclass(frozen=True, slots=True)
class SessionModel:
    id: str
    busy: tuple[Busy, ...]
    # What kept the session busy when the run ended: its turns in progress (turn id, the
    # record that started it) and its queued messages without a turn (message, record).
    busy_turns: tuple[tuple[str, Record], ...] = ()
    queued: tuple[tuple[str, Record], ...] = ()


@dataclass(frozen=True, slots=True)
class Active:
    """An invocation holding its key from `since` until `until` (None: still when the run
    ended); `state` is the state it was in when the stretch ended (or the run did)."""

    since: Record
    until: Record | None
    state: str
    seq: int  # the order the stretches ended in, over every invocation


@dataclass(frozen=True, slots=True)
class InvocationModel:
    id: str
    first: Record
    target: str | None
    key: str | None
    active: tuple[Active, ...]
    completed: bool
    # When the run ended: its state, why it was paused, and the invocation holding the key
    # it was queued on.
    state: str = "queued"
    reason: str | None = None
    holder: str | None = None

    @property
    def name(self) -> str:
        return f"{self.id} {self.target}" if self.target else self.id


@dataclass(frozen=True, slots=True)
class Redelivery:
    """An effect delivered `again` after its `first` delivery: under the same idempotency key
    (`by_key`), else as the same logical effect (under another key, or without one)."""

    first: Record
    again: Record
    by_key: bool


@dataclass(frozen=True, slots=True)
class Effects:
    """What the world saw of the effects (`effect.*`, every record: the world writes each
    once, so none is skipped as a repeat)."""

    attempted: int
    deduplicated: int
    delivered: int
    # In the order the second deliveries were recorded.
    redeliveries: tuple[Redelivery, ...]


# Outcomes of `tool.result` that do not end the call: it went on in the background, or
# conservative recovery held it for the person to confirm.
NOT_FINAL: Final = frozenset({"background", "held"})
# What asked the person about a call: a card shown (the tool waits in-call), its wait handed
# off (the card stays up, the wait becomes state).
ASK_KINDS: Final = frozenset({"tool.awaiting", "tool.handoff", "turn.waiting"})


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call as its records tell it, each observation once (`Dedup`), in the order
    they were recorded. The records stay whole: a run's `run`, `epoch` and `key` are read from
    its intent as the runtime recorded them."""

    id: str
    session: str | None  # the first record naming a session
    turn: str | None  # the first record naming a turn
    tool: str | None  # the first record naming a tool
    asks: tuple[Record, ...]  # `ASK_KINDS`: what asked the person
    answers: tuple[Record, ...]  # op.answer naming it: invoke, then ok, fail or info
    refusals: tuple[Record, ...]  # answer.refused: an answer that was not applied
    intents: tuple[Record, ...]  # tool.intent: a run of the tool began
    reruns: tuple[Record, ...]  # tool.rerun: a run after the hand-off, access re-checked
    results: tuple[Record, ...]  # tool.result, every outcome (held and background too)
    # turn.held and tool.result held: conservative recovery asked the person to confirm.
    holds: tuple[Record, ...]
    deliveries: tuple[Record, ...]  # effect.delivered naming it (its model calls too)

    @property
    def cards(self) -> tuple[Record, ...]:
        """The cards shown (`tool.awaiting`)."""
        return tuple(r for r in self.asks if r.kind == "tool.awaiting")

    @property
    def approved(self) -> Record | None:
        """The first approving answer (`op.answer` invoke, decision approve)."""
        for r in self.answers:
            if r.type == "invoke" and r.data.get("decision") == "approve":
                return r
        return None

    @property
    def final(self) -> Record | None:
        """The call's final outcome: its first `tool.result` whose outcome ends it (a result
        without an outcome ends it too: nothing says it went on)."""
        for r in self.results:
            if str(r.data.get("outcome")) not in NOT_FINAL:
                return r
        return None

    @property
    def outcome(self) -> str | None:
        final = self.final
        return None if final is None else str(final.data.get("outcome"))

    @property
    def gated_from(self) -> int:
        """The index from which its effects needed a person: its first ask, when that ask is
        a confirmation (mode `confirm`: a tool that needs no approval ran, and conservative
        recovery held it); -1 when every run of it did."""
        if self.asks and self.asks[0].data.get("mode") == "confirm":
            return self.asks[0].index
        return -1

    def intent_before(self, index: int) -> Record | None:
        """The intent of the run going on at record `index`: the last one before it."""
        found = None
        for r in self.intents:
            if r.index >= index:
                break
            found = r
        return found


@dataclass(frozen=True, slots=True)
class TurnModel:
    """A turn (`turn.started`, first seen) of `session`, processing `message`, until `ended`
    (the first `turn.ended` after it; None: in progress when the run ended)."""

    id: str
    session: str
    message: str | None
    started: Record
    ended: Record | None

    @property
    def reason(self) -> str | None:
        """Why it ended (`completed`, `steered`, `cancelled`, `held`, ...)."""
        return None if self.ended is None else str(self.ended.data.get("reason"))


ANY_TOOL: Final = "*"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who may use which tool, and who acts in each session and tool call, as of any record
    (each observation once: `Dedup`)."""

    # identity.revoked and identity.granted naming a user, in order.
    changes: tuple[Record, ...]
    # The records naming the person acting (`data["user"]`: message.received, tool.rerun,
    # op.message).
    acting: tuple[Record, ...]

    def revoked(self, user: str, tool: str, index: int) -> Record | None:
        """The revocation of `tool` (`ANY_TOOL`: every tool) for `user` standing before
        record `index`: the last change of that slot, when it revoked."""
        found = None
        for r in self.changes:
            if r.index >= index:
                break
            if (str(r.data["user"]), str(r.data.get("tool", ANY_TOOL))) == (user, tool):
                found = r if r.kind == "identity.revoked" else None
        return found

    def users_of(self, tool: str, index: int) -> set[str]:
        """The users whose access to `tool` changed before record `index`."""
        return {str(r.data["user"]) for r in self.changes
                if r.index < index and str(r.data.get("tool", ANY_TOOL)) == tool}

    def session_user(self, session: str, index: int) -> str | None:
        """The first user a record of `session` named, up to record `index`."""
        for r in self.acting:
            if r.index > index:
                break
            if attr(r, "session") == session:
                return str(r.data["user"])
        return None

    def message_user(self, message: str, index: int) -> str | None:
        """Who sent `message`, up to record `index`: the runner's word (`op.message` names
        the user its step gave), else the runtime's (`message.received`)."""
        told = None
        for r in self.acting:
            if r.index > index:
                break
            if r.kind == "op.message" and r.data.get("message_id") == message:
                return str(r.data["user"])
            if told is None and r.kind == "message.received" and r.data.get("message") == message:
                told = str(r.data["user"])
        return told

    def call_user(self, tool_call: str, index: int) -> str | None:
        """The last user a record of the tool call named, up to record `index`."""
        found = None
        for r in self.acting:
            if r.index > index:
                break
            if attr(r, "tool_call") == tool_call:
                found = str(r.data["user"])
        return found


@dataclass(frozen=True, slots=True)
class RunModel:
    start: float  # the first record's time
    end: float  # the run's end (`run.end`, else the last record)
    fault_windows: tuple[FaultWindow, ...]
    faults: FaultState
    pins: dict[str, Pinned]  # by invocation, in the order they first appear
    deployments: Deployments
    sessions: dict[str, SessionModel]  # by session, in the order they first appear
    hosts: dict[str, HostModel]
    epochs: dict[str, tuple[Assignment, ...]]  # by session, every assignment in order
    # Every invocation: those that completed, in that order, then those that did not, in
    # the order they appeared (an id that appears again after completing is another one).
    invocations: tuple[InvocationModel, ...]
    effects: Effects
    # Every tool call, by id, in the order a record first named it.
    calls: dict[str, ToolCall]
    # Every turn, by id, in the order they started.
    turns: dict[str, TurnModel]
    identity: Identity

    @property
    def healed_at(self) -> float:
        """When the faults ended (the start when there were none)."""
        return max(x for x in (self.faults.last_end, self.faults.records_end, self.start)
                   if x is not None)

    @property
    def had_faults(self) -> bool:
        return self.faults.last_end is not None or self.faults.records_end is not None

    def due_in_uptime(self, start: float, bound: float) -> float | None:
        """When something the runtime must do within `bound` of `start` is due, counting only
        time in which no host was down and no call held (a paused or crashed host acts when
        it is back; a clock jump's hours pass at once): the fault that held it up excuses
        it, and only for as long as it lasted. None when a fault never healed."""
        if self.faults.unhealed:
            return None
        t, left = start, bound
        for a, b in merge([*self.faults.downtime, *self.faults.held]):
            if b <= t:
                continue
            if a > t:
                if a - t >= left:
                    return t + left
                left -= a - t
            t = b
        return t + left

    def due(self, start: float, bound: float) -> float | None:
        """When something that began at `start` and must follow within `bound` is due:
        `bound` after the later of `start` and the heal of the faults (a fault may hold it up
        until it ends). None when a fault never healed: no such deadline can be judged."""
        if self.faults.unhealed:
            return None
        return max(start, self.healed_at) + bound


_INF: Final = float("inf")
STATES: Final = {"invocation.created": "queued", "invocation.started": "running",
                 "invocation.resumed": "running", "invocation.repinned": "running",
                 "invocation.suspended": "suspended", "invocation.paused": "paused"}

# -- building

_SESSION_KINDS: Final = frozenset(
    {"turn.started", "turn.waiting", "turn.resumed", "turn.ended", "message.queued",
     "tool.awaiting"}
)
# What closes an open card: the turn is no longer waiting on a person in-call.
_CARD_CLOSERS: Final = frozenset(
    {"op.answer", "tool.handoff", "tool.result", "turn.resumed", "tool.background"}
)
_INVOCATION_KINDS: Final = frozenset(
    {"invocation.created", "invocation.started", "invocation.suspended", "invocation.resumed",
     "invocation.repinned", "invocation.paused", "invocation.completed"}
)
_EFFECT_KINDS: Final = frozenset(
    {"effect.attempted", "effect.deduplicated", "effect.delivered"})
_DEPLOYMENT_KINDS: Final = frozenset(
    {"deployment.registered", "deployment.superseded", "deployment.drained",
     "deployment.retired"}
)
# The host records of crashes and pauses (the heal ends every pause), and the restarts that
# end a crash's downtime: what `RunModel.hosts` is made of.
HOST_KINDS: Final = frozenset(
    {"host.paused", "host.resumed", "host.crashed", "host.restarted", "fault.gc-pause",
     "fault.crash", "fault.heal"}
)
# The runner's `op.message` names who sent it (a test driving the runtime may leave it out).
_IDENTITY_KINDS: Final = frozenset(
    {"identity.revoked", "identity.granted", "message.received", "op.message", "tool.rerun"})
# The records of a tool call (`RunModel.calls`).
_CALL_KINDS: Final = ASK_KINDS | frozenset(
    {"op.answer", "answer.refused", "tool.intent", "tool.rerun", "tool.result", "turn.held",
     "effect.delivered"})
KINDS: Final = (_SESSION_KINDS | _CARD_CLOSERS | _INVOCATION_KINDS | _DEPLOYMENT_KINDS
                | _EFFECT_KINDS | _CALL_KINDS | _IDENTITY_KINDS | FAULT_KINDS
                | {"fault.*", "host.*", "threadlog.assigned", "run.end"})
"""The record kinds the model reads (a kind ending in `.*`: every kind with that prefix)."""


@dataclass(slots=True)
class _Turn:
    started: Record
    waiting: bool = False  # as state, after turn.waiting
    cards: set[str] = field(default_factory=set)  # open cards: waiting in-call

    @property
    def busy(self) -> bool:
        return not self.waiting and not self.cards


@dataclass(slots=True)
class _Session:
    turns: dict[str, _Turn] = field(default_factory=dict)
    queued: dict[str, Record] = field(default_factory=dict)
    since: Record | None = None
    busy: list[Busy] = field(default_factory=list)


@dataclass(slots=True)
class _Invocation:
    first: Record
    target: str | None
    key: str | None
    state: str = "queued"
    since: Record | None = None  # start of the current active stretch
    reason: str | None = None
    active: list[Active] = field(default_factory=list)


@dataclass(slots=True)
class _Pinned:
    """An invocation's pins and suspensions so far: the ended ones as values, the open ones
    as (deployment, since, record) and (record, deployment)."""

    id: str
    target: str | None = None
    pins: list[Pin] = field(default_factory=list)
    pin: tuple[str, float, Record] | None = None
    deployment: str | None = None  # of its last pin, open or ended
    suspensions: list[Suspension] = field(default_factory=list)
    open: tuple[Record, str | None] | None = None
    paused: Record | None = None
    completed: Record | None = None
    starts: list[Record] = field(default_factory=list)


class _Pins:
    """The pins fold: which deployment each invocation is pinned to, when deployments were
    superseded and drained."""

    def __init__(self, host_deployment: dict[str, str]) -> None:
        self.invocations: dict[str, _Pinned] = {}
        self.versions: dict[str, str] = {}
        self.superseded: dict[str, Record] = {}
        self.drained: dict[str, Record] = {}
        self.live: dict[str, int] = {}
        self.pinned_when_superseded = 0
        self.retirements: list[Record] = []
        self.registered: list[Record] = []
        self.host_deployment = host_deployment

    def _unpin(self, inv: _Pinned, r: Record) -> None:
        if inv.pin is None:
            return
        dep, since, start = inv.pin
        inv.pins.append(Pin(dep, since, start, r.time))
        inv.pin = None
        live = self.live[dep] = self.live.get(dep, 1) - 1
        if live <= 0 and dep in self.superseded:
            self.drained.setdefault(dep, r)

    @staticmethod
    def _close(inv: _Pinned, r: Record) -> None:
        if inv.open is not None:
            inv.suspensions.append(Suspension(inv.open[0], inv.open[1], r))
            inv.open = None

    def invocation(self, r: Record) -> None:
        inv_id = r.invocation
        if inv_id is None:
            return
        inv = self.invocations.get(inv_id)
        if inv is None:
            inv = self.invocations[inv_id] = _Pinned(inv_id)
        if inv.target is None:
            target = r.data.get("target")
            if target is not None:
                inv.target = str(target)
        kind = r.kind
        if kind == "invocation.started" or kind == "invocation.repinned":
            dep = r.deployment
            if dep is not None:
                self._unpin(inv, r)
                inv.pin = (dep, r.time, r)
                inv.deployment = dep
                self.live[dep] = self.live.get(dep, 0) + 1
        elif kind == "invocation.suspended":
            if inv.open is None:
                inv.open = (r, r.deployment or inv.deployment)
        elif kind == "invocation.resumed":
            self._close(inv, r)
        elif kind == "invocation.completed":
            self._close(inv, r)
            self._unpin(inv, r)
            inv.completed = r
        elif kind == "invocation.paused":
            self._close(inv, r)
            inv.paused = r

    def deployment(self, r: Record) -> None:
        kind = r.kind
        dep = r.deployment
        if dep is None:
            return
        if kind == "deployment.registered":
            self.versions[dep] = str(r.data.get("version", "?"))
            for host in r.data.get("hosts") or ():
                self.host_deployment[str(host)] = dep
        elif kind == "deployment.superseded":
            if dep not in self.superseded:
                self.superseded[dep] = r
                if self.live.get(dep, 0) > 0 or r.data.get("pinned"):
                    self.pinned_when_superseded += 1
                if self.live.get(dep, 0) <= 0:
                    self.drained.setdefault(dep, r)
        elif kind == "deployment.retired":
            self.retirements.append(r)
        elif kind == "deployment.drained":
            self.retirements.append(r)
            first = self.drained.get(dep)
            if first is None or r.time < first.time:
                self.drained[dep] = r

    def finish(self) -> tuple[dict[str, Pinned], Deployments]:
        pins = {}
        for inv_id, inv in self.invocations.items():
            held, waits = inv.pins, inv.suspensions
            if inv.pin is not None:
                held = [*held, Pin(*inv.pin, None)]
            if inv.open is not None:
                waits = [*waits, Suspension(inv.open[0], inv.open[1], None)]
            pins[inv_id] = Pinned(inv_id, inv.target, tuple(held), tuple(waits), inv.paused,
                                  inv.completed, tuple(inv.starts))
        return pins, Deployments(dict(self.versions), dict(self.superseded),
                                 dict(self.drained), tuple(self.retirements),
                                 self.pinned_when_superseded, tuple(self.registered))


class _Effects:
    """The effects fold: counts, and the first delivery of each key and logical effect."""

    def __init__(self) -> None:
        self.attempted = self.deduplicated = self.delivered = 0
        self.by_key: dict[str, Record] = {}
        self.by_logical: dict[tuple[str, str], Record] = {}
        self.redeliveries: list[Redelivery] = []

    def feed(self, r: Record) -> None:
        kind = r.kind
        if kind == "effect.attempted":
            self.attempted += 1
            return
        if kind == "effect.deduplicated":
            self.deduplicated += 1
            return
        self.delivered += 1
        # No key (None or "") is no key: never the same delivery as another keyless one.
        key = attr(r, "key") or None
        if key is not None:
            first = self.by_key.get(key)
            if first is not None:
                # A repeat of a key is that key's failure, not also its logical effect's.
                self.redeliveries.append(Redelivery(first, r, True))
                return
            self.by_key[key] = r
        logical = r.data.get("logical")
        if logical is None:
            return
        slot = (str(r.data.get("effect", "effect")), str(logical))
        first = self.by_logical.get(slot)
        if first is None:
            self.by_logical[slot] = r
        else:
            self.redeliveries.append(Redelivery(first, r, False))

    def finish(self) -> Effects:
        return Effects(self.attempted, self.deduplicated, self.delivered,
                       tuple(self.redeliveries))


@dataclass(slots=True)
class _Call:
    id: str
    session: str | None = None
    turn: str | None = None
    tool: str | None = None
    asks: list[Record] = field(default_factory=list)
    answers: list[Record] = field(default_factory=list)
    refusals: list[Record] = field(default_factory=list)
    intents: list[Record] = field(default_factory=list)
    reruns: list[Record] = field(default_factory=list)
    results: list[Record] = field(default_factory=list)
    holds: list[Record] = field(default_factory=list)
    deliveries: list[Record] = field(default_factory=list)


class _Calls:
    """The tool calls fold: each call's records, sorted by what they say of it. Fed only the
    fresh records (`Dedup`): an effect repeated is counted by `_Effects`, not listed twice."""

    def __init__(self) -> None:
        self.calls: dict[str, _Call] = {}
        # Where each kind goes, looked up once per record instead of an if-chain per kind.
        self.parts: dict[str, Callable[[_Call], list[Record]]] = {
            "op.answer": lambda c: c.answers, "answer.refused": lambda c: c.refusals,
            "tool.intent": lambda c: c.intents, "tool.rerun": lambda c: c.reruns,
            "turn.held": lambda c: c.holds, "effect.delivered": lambda c: c.deliveries,
            **{kind: (lambda c: c.asks) for kind in ASK_KINDS}}

    def feed(self, r: Record) -> None:
        tc = attr(r, "tool_call")
        if tc is None:
            return
        call = self.calls.get(tc)
        if call is None:
            call = self.calls[tc] = _Call(str(tc))
        if call.session is None:
            session = attr(r, "session")
            call.session = None if session is None else str(session)
        if call.turn is None:
            turn = attr(r, "turn")
            call.turn = None if turn is None else str(turn)
        if call.tool is None:
            tool = r.data.get("tool")
            call.tool = None if tool is None else str(tool)
        kind = r.kind
        if kind == "tool.result":
            call.results.append(r)
            if str(r.data.get("outcome")) == "held":
                call.holds.append(r)
            return
        self.parts[kind](call).append(r)

    def finish(self) -> dict[str, ToolCall]:
        return {tc: ToolCall(tc, c.session, c.turn, c.tool, tuple(c.asks), tuple(c.answers),
                             tuple(c.refusals), tuple(c.intents), tuple(c.reruns),
                             tuple(c.results), tuple(c.holds), tuple(c.deliveries))
                for tc, c in self.calls.items()}


class _Builder:
    """The one pass: each record goes to the folds that read its kind."""

    def __init__(self, kinds: Mapping[str, FaultKind]) -> None:
        self.kinds = kinds  # the fault kinds by record kind
        self.dedup = Dedup()
        self.faults = Faults()
        self.pins = _Pins(self.faults.host_deployment)
        self.crashes: dict[str, list[Record]] = {}
        self.paused: dict[str, list[tuple[int, float]]] = {}
        # Hosts crashed and not yet restarted: a pause of one of them stops nothing.
        self.down: set[str] = set()
        self.epochs: dict[str, list[Assignment]] = {}
        self.records_end: float | None = None
        self.windows: list[FaultWindow] = []
        self.open_windows: dict[tuple[str, str | None], list[int]] = {}
        self.sessions: dict[str, _Session] = {}
        self.card_turn: dict[str, tuple[str, str]] = {}
        self.invocations: dict[str, _Invocation] = {}
        self.done: list[InvocationModel] = []
        self.seq = 0
        self.holders: dict[tuple[str, str], str] = {}
        self.effects = _Effects()
        self.calls = _Calls()
        self.turns: dict[str, TurnModel] = {}
        self.changes: list[Record] = []
        self.acting: list[Record] = []

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    # sessions

    def _update(self, s: _Session, r: Record) -> None:
        busy = any(t.busy for t in s.turns.values()) if s.turns else bool(s.queued)
        if busy and s.since is None:
            s.since = r
        elif not busy and s.since is not None:
            s.busy.append(Busy(s.since, r, self._next()))
            s.since = None

    def _close_card(self, tc: str | None, r: Record) -> None:
        where = self.card_turn.pop(tc, None) if tc is not None else None
        if where is None:
            return
        sid, turn_id = where
        s = self.sessions[sid]
        turn = s.turns.get(turn_id)
        if turn is not None and tc in turn.cards:
            turn.cards.discard(tc)
            self._update(s, r)

    def session(self, r: Record) -> None:
        """Fed only the fresh records (`fold_of`)."""
        kind = r.kind
        if kind in _CARD_CLOSERS:
            self._close_card(attr(r, "tool_call"), r)
            if kind != "turn.resumed":
                return
        sid = attr(r, "session")
        if sid is None:
            return
        s = self.sessions.get(sid)
        if s is None:
            s = self.sessions[sid] = _Session()
        turn_id = attr(r, "turn")
        turn = s.turns.get(turn_id) if turn_id is not None else None
        if kind == "turn.started":
            message = r.data.get("message")
            if message is not None:
                s.queued.pop(message, None)
            if turn_id is not None and turn is None:
                s.turns[turn_id] = _Turn(r)
                if turn_id not in self.turns:
                    self.turns[turn_id] = TurnModel(
                        turn_id, sid, None if message is None else str(message), r, None)
        elif kind == "message.queued":
            message = r.data.get("message")
            if message is not None:
                s.queued.setdefault(message, r)
        elif turn is not None:
            if kind == "turn.ended":
                del s.turns[turn_id]
                seen = self.turns[turn_id]
                if seen.ended is None:
                    self.turns[turn_id] = replace(seen, ended=r)
                for tc in turn.cards:
                    self.card_turn.pop(tc, None)
            elif kind == "turn.waiting":
                turn.waiting = True
            elif kind == "turn.resumed":
                turn.waiting = False
            elif kind == "tool.awaiting":
                tc = attr(r, "tool_call")
                if tc is not None:
                    turn.cards.add(tc)
                    self.card_turn[tc] = (sid, turn_id)
        self._update(s, r)

    # invocations

    def invocation(self, r: Record) -> None:
        self.pins.invocation(r)
        inv_id = r.invocation
        if inv_id is None:
            return
        kind = r.kind
        if kind == "invocation.started" and self.dedup.fresh(r):
            # The starts as an observer reads them (each once), beside the pins and the
            # active stretches, which take every record as the engine wrote it.
            self.pins.invocations[inv_id].starts.append(r)
        inv = self.invocations.get(inv_id)
        if inv is None:
            target, key = r.data.get("target"), r.data.get("key")
            inv = self.invocations[inv_id] = _Invocation(
                r, None if target is None else str(target), None if key is None else str(key),
                since=r)
        if kind == "invocation.completed":
            if inv.since is not None:
                inv.active.append(Active(inv.since, r, inv.state, self._next()))
            if inv.target is not None and inv.key is not None:
                slot = (inv.target.split("/", 1)[0], inv.key)
                if self.holders.get(slot) == inv_id:
                    del self.holders[slot]
            del self.invocations[inv_id]
            # An invocation id completes once; one that shows up again starts afresh.
            self.done.append(InvocationModel(inv_id, inv.first, inv.target, inv.key,
                                             tuple(inv.active), True, inv.state, inv.reason))
            return
        state = STATES.get(kind, inv.state)
        if state == "suspended":
            if inv.since is not None:
                inv.active.append(Active(inv.since, r, inv.state, self._next()))
            inv.since = None
        elif inv.since is None:
            inv.since = r
        if state != inv.state:
            inv.state, inv.reason = state, r.data.get("reason")
        if kind == "invocation.started" and inv.target is not None and inv.key is not None:
            self.holders[(inv.target.split("/", 1)[0], inv.key)] = inv_id

    # faults

    def fold_of(self, kind: str) -> Callable[[Record], None] | None:
        """The fold that reads records of `kind`, if any."""
        if (kind in _SESSION_KINDS or kind in _CARD_CLOSERS or kind in _CALL_KINDS
                or kind in _IDENTITY_KINDS):
            return self._observation(kind)
        if kind in _INVOCATION_KINDS:
            return self.invocation
        if kind == "deployment.registered":
            return self.registered
        if kind in _DEPLOYMENT_KINDS:
            return self.pins.deployment
        if kind in _EFFECT_KINDS:
            return self.effects.feed
        if kind == "threadlog.assigned":
            return self.assigned
        if kind in FAULT_KINDS or kind.startswith(("fault.", "host.")):
            return self.fault
        return None

    def _observation(self, kind: str) -> Callable[[Record], None]:
        """The folds of a kind the sessions, the calls or the effects read. A record is asked
        `Dedup.fresh` once, whichever folds read it (a second ask would call it a repeat); the
        effects count every record (the world writes each once), the others the fresh ones."""
        fresh: list[Callable[[Record], None]] = []
        if kind in _SESSION_KINDS or kind in _CARD_CLOSERS:
            fresh.append(self.session)
        if kind in _CALL_KINDS:
            fresh.append(self.calls.feed)
        if kind in _IDENTITY_KINDS:
            fresh.append(self.identity)
        fresh_of = self.dedup.fresh
        if kind in _EFFECT_KINDS:
            every = self.effects.feed

            def counted(r: Record) -> None:
                every(r)
                if fresh_of(r):
                    for f in fresh:
                        f(r)

            return counted
        if len(fresh) == 1:
            # Most kinds have one reader: no loop over one fold for each of their records.
            (only,) = fresh

            def one(r: Record) -> None:
                if fresh_of(r):
                    only(r)

            return one

        def several(r: Record) -> None:
            if fresh_of(r):
                for f in fresh:
                    f(r)

        return several

    def identity(self, r: Record) -> None:
        if r.data.get("user") is None:
            return
        if r.kind.startswith("identity."):
            self.changes.append(r)
        else:
            self.acting.append(r)

    def registered(self, r: Record) -> None:
        self.pins.deployment(r)
        if self.dedup.fresh(r):
            self.pins.registered.append(r)

    def assigned(self, r: Record) -> None:
        session, epoch = attr(r, "session"), attr(r, "epoch")
        if session is None or epoch is None or not self.dedup.fresh(r):
            return
        owner = r.data.get("owner")
        self.epochs.setdefault(session, []).append(
            Assignment(r, int(epoch), None if owner is None else str(owner)))

    def host(self, r: Record) -> None:
        """When each host crashed, and until when it was paused."""
        kind, host = r.kind, r.host
        if kind == "fault.heal":
            for steps in self.paused.values():
                steps.append((r.index, -_INF))
            return
        if host is None:
            return
        if kind in ("host.paused", "fault.gc-pause"):
            if host in self.down:
                # The runner records the step even when it found the host down (the simulator
                # ignores a pause of a crashed host, and SIGSTOP has no process to stop): the
                # host comes back from its restart running, not paused.
                return
            steps = self.paused.setdefault(host, [])
            duration = r.data.get("duration")
            until = _INF if duration is None else r.time + float(duration)
            steps.append((r.index, max(steps[-1][1] if steps else -_INF, until)))
        elif kind == "host.resumed":
            self.paused.setdefault(host, []).append((r.index, -_INF))
        elif kind in ("host.crashed", "fault.crash"):
            self.crashes.setdefault(host, []).append(r)
            self.down.add(host)
            # A crash ends a pause: the stopped process is killed, and the one its restart
            # starts runs (the simulator clears the pause, and the pause's timed resume then
            # records nothing). Without this, a host crashed during a pause would look paused
            # until the pause's end, after it restarted and went on running.
            pauses = self.paused.get(host)
            if pauses and pauses[-1][1] != -_INF:
                pauses.append((r.index, -_INF))
        elif kind == "host.restarted":
            self.down.discard(host)

    def fault(self, r: Record) -> None:
        kind = r.kind
        if kind in HOST_KINDS and self.dedup.fresh(r):
            self.host(r)
        if kind in FAULT_KINDS:
            self.faults.feed(r)
        if not kind.startswith("fault."):
            # A host resumed or restarted ends the windows of the faults that stopped it.
            for i in self.open_windows.pop((kind, r.host), ()):
                self.windows[i] = _ended(self.windows[i], r.time)
            return
        if kind != "fault.heal":
            ends = r.time + float(r.data.get("duration") or 0.0)
            self.records_end = ends if self.records_end is None else max(self.records_end,
                                                                         ends)
        else:
            # The heal ends every window still open.
            for opened in self.open_windows.values():
                for i in opened:
                    self.windows[i] = _ended(self.windows[i], r.time)
            self.open_windows.clear()
        duration = r.data.get("duration")
        fault = self.kinds.get(kind)
        end: float | None = None
        if isinstance(duration, int | float) and not isinstance(duration, bool):
            end = r.time + float(duration)
        elif fault is not None and fault.ends_on is not None:
            self.open_windows.setdefault((fault.ends_on, r.host), []).append(
                len(self.windows))
        target = r.host or r.deployment or r.data.get("service")
        self.windows.append(FaultWindow(
            r.time, end, kind.removeprefix("fault."), None if target is None else str(target),
            r, fault is not None and fault.open_until_end))

    def finish(self, start: float, end: float) -> RunModel:
        unhealed = self.faults.unhealed
        last_end = self.faults.last_end
        downtime, provider = self.faults.finish(end)
        faults = FaultState(tuple(downtime), self.faults.down(), tuple(provider),
                            tuple(self.faults.held()), dict(self.faults.host_deployment),
                            last_end, self.records_end, unhealed)
        pins, deployments = self.pins.finish()
        sessions = {}
        for sid, s in self.sessions.items():
            busy = s.busy if s.since is None else [*s.busy, Busy(s.since, None, self._next())]
            sessions[sid] = SessionModel(
                sid, tuple(busy),
                tuple((tid, t.started) for tid, t in s.turns.items() if t.busy),
                tuple(s.queued.items()))
        invocations = list(self.done)
        for inv_id, inv in self.invocations.items():
            active = inv.active if inv.since is None else [
                *inv.active, Active(inv.since, None, inv.state, self._next())]
            holder = None
            if inv.state == "queued" and inv.target is not None and inv.key is not None:
                holder = self.holders.get((inv.target.split("/", 1)[0], inv.key))
            invocations.append(InvocationModel(inv_id, inv.first, inv.target, inv.key,
                                               tuple(active), False, inv.state, inv.reason,
                                               holder))
        hosts = {h: HostModel(h, tuple(self.crashes.get(h, ())), tuple(self.paused.get(h, ())))
                 for h in {**self.crashes, **self.paused}}
        epochs = {session: tuple(a) for session, a in self.epochs.items()}
        return RunModel(start, end, tuple(self.windows), faults, pins, deployments, sessions,
                        hosts, epochs, tuple(invocations), self.effects.finish(),
                        self.calls.finish(), dict(self.turns),
                        Identity(tuple(self.changes), tuple(self.acting)))


def _ended(window: FaultWindow, time: float) -> FaultWindow:
    return FaultWindow(window.start, time, window.kind, window.target, window.record,
                       window.open_until_end)


def build(history: History) -> RunModel:
    """The model of `history`, in one pass over its records."""
    # Imported here: harness.faults imports the adapters' protocols, whose module imports
    # the checkers.
    from harness.faults import BY_RECORD

    b = _Builder(BY_RECORD)
    records = history.records
    # Which fold reads each kind, looked up once per kind (most records, journal entries and
    # fault points, are read by none).
    folds: dict[str, Callable[[Record], None] | None] = {}
    for r in records:
        kind = r.kind
        try:
            fold = folds[kind]
        except KeyError:
            fold = folds[kind] = b.fold_of(kind)
        if fold is not None:
            fold(r)
    return b.finish(records[0].time if records else 0.0, run_end(history))


# The model of the last history asked for: the checkers of one run ask in turn.
_last: tuple[History, int, RunModel] | None = None


def model_of(history: History) -> RunModel:
    """The model of the run `history` is (a view of), built once while it does not grow.

    A checker given a view by `run_checkers` gets the model of the whole history; a checker
    that reads the model keeps the kinds it reads from it in its `reads` all the same, so
    that the model of its view alone says the same."""
    global _last
    history = root_of(history)
    cached = _last
    if cached is not None and cached[0] is history and cached[1] == len(history):
        return cached[2]
    model = build(history)
    _last = (history, len(history), model)
    return model
