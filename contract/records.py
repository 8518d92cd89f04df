"""The record vocabulary: every kind of record a history holds, as frozen data.

A history (`harness.history`) is one list of records. Each has a `kind` (`turn.started`), a
type (`event`, or `invoke`/`ok`/`fail`/`info` for an operation), a time, the named fields
`RECORD_FIELDS` (session, turn, tool call, invocation, deployment, host, epoch, key, process)
and a `data` dict for the rest. This module says, for every kind, who records it, which fields
it must carry and which it may, the values some fields take, and what it means; and, for every
checker, which records (and which of their fields) it is judged on.

It is the one copy: the harness checks each record against it when the record is appended
(an unknown kind or a missing field fails at once, naming the nearest kind), the conformance
suite checks an adapter against it, and `docs/events.md` is generated from it
(`python -m contract.docs > docs/events.md`).

A field named here may sit in the record's own slot or in its `data` under the same name: the
checkers read both (`RECORD_FIELDS` says which names have a slot). An adapter records its own
diagnostics under a namespace of its own (`myengine.started`); the namespaces of this
vocabulary are closed, so `turn.begun` is a typo, not a new kind.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

from contract import services
from contract.threadlog import REJECTIONS

__all__ = [
    "FIELDS",
    "JUDGED_ON",
    "KINDS",
    "NAMESPACES",
    "RECORD_FIELDS",
    "REQUIRED",
    "SCHEDULE_ACTIONS",
    "SOURCES",
    "Kind",
    "Reading",
    "bad_value",
    "marks",
    "missing_field",
    "nearest",
    "observations",
    "unknown_kind",
]

Source = Literal["runtime", "engine", "world", "runner", "final"]

# Who writes each kind of record, in the order the documentation lists them.
SOURCES: Final[Mapping[str, str]] = MappingProxyType({
    "runtime": "the runtime's own observations (`Observer.emit` in `contract.ports`), emitted "
               "from inside a journaled step, so they may repeat; each carries a deterministic "
               "`event_id` and consumers skip repeats",
    "engine": "the durable-execution engine: the simulator, or an engine observer / adapter "
              "reading a real engine's state (Restate, Temporal, DBOS)",
    "world": "the world the harness owns: the model provider, the outbox, the ledger, the "
             "identity directory, the approval card service",
    "runner": "the runner: the schedule's steps (operations `op.*`, faults `fault.*`) and the "
              "run's end",
    "final": "the adapter at the end of a run: the committed state it reads back",
})

# Fields with a slot of their own on a record; every other field lives in `data`.
RECORD_FIELDS: Final = (
    "process", "host", "deployment", "invocation", "session", "turn", "tool_call", "epoch",
    "key",
)

# What each field name means, wherever it appears.
FIELDS: Final[Mapping[str, str]] = MappingProxyType({
    "session": "the chat session (one thread of conversation)",
    "turn": "the turn id: one user message's processing, kept across hand-offs",
    "tool_call": "the tool call id, unique within the session",
    "invocation": "the engine's invocation (workflow run) id",
    "deployment": "the deployment (version of the code) the record is about or ran on",
    "host": "the process (worker) the record is about or ran on",
    "process": "the client process of an operation",
    "epoch": "the thread log's fencing epoch",
    "key": "an idempotency key (effects, model calls)",
    "event_id": "a deterministic id of the observation: a repeat of a retried step has the "
                "same one",
    "message": "the user message id (`{session}.m{n}`)",
    "message_id": "the user message id the runner sent",
    "origin": "where a message came from (the user, a tool result, ...)",
    "user": "the person (identity) acting",
    "tool": "the tool's name",
    "outcome": "how a tool call, a wait or an invocation ended",
    "reason": "why something ended, was rejected or paused",
    "access": "the result of re-checking the user's access before a re-run",
    "effect": "the kind of external effect",
    "logical": "the logical effect (a tool call, a model step): two deliveries of one logical "
               "effect are a duplicate even under different keys",
    "asked": "the tool call a model reply asked for (`{turn}.t{k}`)",
    "planned": "how many tools a user message asks the model to call",
    "version": "a deployment's version label",
    "hosts": "the hosts (worker processes) of a deployment",
    "pinned": "how many invocations are still pinned to a deployment",
    "target": "the invoked handler, `Service/handler`",
    "owner": "the host owning a thread (its log's only writer)",
    "after_seq": "the last seq committed when a thread got its new epoch (read under the "
                 "control row's lock): an older epoch's append at or below it came first",
    "seq": "a thread log entry's sequence number (1, 2, 3... without gaps)",
    "entry": "a thread log entry's id",
    "duration": "seconds (scenario time) a fault lasts",
    "point": "a fault point's name (`contract.faultpoints.POINTS`)",
    "action": "what happens at an armed fault point (pause, crash), or none; for a skipped "
              "step, the step's action",
    "step": "the schedule step's number (1-based, in the scenario file's order)",
    "lacks": "what the runtime lacks for the step: a capability, a world endpoint or a fault "
             "point it does not declare",
    "fault": "the service fault injected (`contract.services.SERVICE_FAULTS`)",
    "service": "the world service a fault is on (`contract.services.SERVICES`)",
    "throttled": "true when the fault is a 429 repeated because Retry-After had not passed",
    "op": "which call of the service met the fault: `show` or `close` (the card service)",
    "of": "the session that owns the call a request named, when not the session that asked",
    "named": "true when an answer named its tool call itself, whether or not a card was open "
             "(a client that races the card)",
    "malformed": "true when a request is malformed on purpose (a hostile or broken client): "
                 "an answer whose decision is neither approve nor deny, sent as is, must never "
                 "be applied; a message naming no id, a background request naming no call",
    "cards": "every approval card the world's card service showed, by tool call, with the "
             "outcome it was closed with (null: still open)",
    "closed_at": "when each closed approval card was closed, by tool call (the card service's "
                 "clock)",
    "shown": "what each approval card showed its call would do (the arguments the runtime "
             "put on it), by tool call, for the cards that showed any",
    "to": "whom an email was sent to",
    "amount": "how much a charge was for (cents)",
    "times": "how many times",
    "seconds": "real seconds",
    "replay": "true when the attempt replays a journal (a retry or a move to another host)",
    "stale": "true when recorded by an attempt that is no longer the invocation's current one",
    "skipped": "true when the runtime could not take the step (it lacks the capability)",
    "decision": "a person's answer to an approval card",
    "error": "what went wrong, in words",
    "status": "the HTTP status a request was refused with (of a terminal error: its code; of "
              "a refusal the client saw: the response's)",
    "at": "a time in scenario seconds",
    "id": "the awakeable's id",
    "since": "when the wait began (scenario seconds)",
    "mode": "how the tool waits (in-call, or handed off)",
    "run": "the runtime's own run counter of the tool call: 1 for its first run, N + 1 "
           "for the run a confirmation asks about after a hold of run N",
    "waited": "seconds the in-call wait lasted before the hand-off",
    "phase": "whether the call was backgrounded before or after its hand-off",
    "placeholder": "true when the result the turn continued with is a placeholder (the call "
                   "went to the background), not the call's real result",
    "background": "true when the tool call ran in the background",
    "in_catalog": "whether the tool was still in the catalog at the re-run",
    "entry_kind": "the thread log entry's kind",
    "kind": "an entry's kind (thread log), or a network fault's kind",
    "current_epoch": "the thread's epoch a stale append met (a StaleEpoch rejection; null: "
                     "the thread had none)",
    "current_owner": "the thread's owner a stale append met (a StaleEpoch rejection)",
    "held_since": "since when the transaction in the way held the control row (a LockTimeout "
                  "rejection, when the store knows it), in the run's time",
    "idle_timeout": "seconds after which the store's database ends a transaction idle holding "
                    "the control row (a LockTimeout rejection, when the store knows it)",
    "detail": "the error's words",
    "error_type": "the class name of the error an attempt failed on (e.g. StaleEpoch)",
    "on": "what a suspended invocation waits on",
    "caller": "the invocation that made the call",
    "superseded_at": "when the deployment was superseded (scenario seconds)",
    "after": "seconds after which something happened",
    "by": "the deployment that superseded this one",
    "attempt": "the attempt's number (1, 2, ...)",
    "index": "a journal entry's position",
    "name": "a journal entry's name",
    "child": "the invocation a send created",
    "delay": "a send's delay (scenario seconds)",
    "link": "the network link a fault is on",
    "active": "the engine's unfinished invocations that kept it busy",
})

# The schedule's actions (`harness.schedules.model.ACTIONS`); a step the runtime cannot take is
# recorded as `fault.<action>` with `skipped`, so each has a kind here.
SCHEDULE_ACTIONS: Final = (
    "message", "answer", "background", "cancel", "revoke", "grant", "deploy", "gc-pause",
    "crash", "service-fault", "arm", "network", "clock-jump",
)

# Value sets shared by several kinds.
TOOL_OUTCOMES: Final = (
    "answered", "denied", "expired", "ended_by_message", "background", "rejected_access",
    "held", "completed", "cancelled",
)
TURN_END_REASONS: Final = ("completed", "steered", "cancelled", "held")
EFFECTS: Final = ("email", "charge", "model")
# Why an answer was not applied: the call already had its answer or final outcome, it ended
# (a new message, a cancel), it expired, or the person answering is not the one asked.
ANSWER_REFUSALS: Final = ("already_decided", "ended", "expired", "not_yours")


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of record: who writes it, its fields, their values, what it means."""

    name: str
    source: Source
    meaning: str
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    # Field -> the values it takes. Closed sets are checked by the conformance suite; where
    # `open_values` says so, a runtime or engine may use words of its own too.
    values: tuple[tuple[str, tuple[str, ...]], ...] = ()
    types: tuple[str, ...] = ("event",)
    open_values: bool = False
    # Fields a conforming runtime records too (the conformance suite checks them), though the
    # checkers do without them: checked at append time are only `required`.
    expected: tuple[str, ...] = ()
    # Its label as a mark on the report's timeline (on the session's lane for the runtime's
    # observations, on the invocation's for the engine's); empty: not a mark of its own.
    mark: str = ""

    @property
    def promised(self) -> tuple[str, ...]:
        """What the conformance suite asks of a record of this kind: required and expected."""
        return self.required + self.expected

    @property
    def namespace(self) -> str:
        return self.name.split(".")[0]

    def value_set(self, field: str) -> tuple[str, ...]:
        for name, values in self.values:
            if name == field:
                return values
        return ()


_OBS = ("host", "deployment", "invocation", "event_id")  # where an observation ran
_RUN: Final[Source] = "runtime"

_KINDS: Final = (
    # -- the runtime's observations (the Controller, the tool executor, the thread log)
    Kind("message.received", _RUN, "a user message reached the session's controller",
         ("session", "message"), ("user", "origin", *_OBS), mark="message"),
    Kind("message.queued", _RUN, "the session is busy: the message waits in its FIFO",
         ("session", "message"), ("origin", *_OBS), mark="queued"),
    Kind("turn.started", _RUN, "a turn began processing a message",
         ("session", "turn"), ("message", "origin", *_OBS), expected=("message",)),
    Kind("turn.waiting", _RUN, "the turn handed its wait off: the invocation ends, nothing "
         "stays pinned", ("session", "turn", "tool_call"), ("since", *_OBS)),
    Kind("turn.resumed", _RUN, "a handed-off turn resumes (same turn id, new invocation)",
         ("session", "turn", "tool_call", "outcome"), ("since", *_OBS),
         (("outcome", TOOL_OUTCOMES),)),
    Kind("turn.ended", _RUN, "a turn ended", ("session", "turn", "reason"),
         ("tool_call", *_OBS), (("reason", TURN_END_REASONS),), open_values=True),
    Kind("turn.held", _RUN, "conservative recovery: an unresolved tool intent is not re-run "
         "but shown to the person", ("session", "turn", "tool_call"), ("tool", "run", *_OBS),
         mark="held"),
    Kind("tool.awaiting", _RUN, "an approval card is shown; the tool waits in-call",
         ("session", "turn", "tool_call"), ("tool", "mode", "run", *_OBS),
         expected=("tool",)),
    Kind("tool.handoff", _RUN, "the in-call wait passed `hand_off_after`: the wait becomes "
         "state", ("session", "turn", "tool_call"), ("tool", "mode", "run", "waited", *_OBS),
         mark="hand-off"),
    Kind("tool.rerun", _RUN, "an approved tool re-runs after a hand-off, access re-checked",
         ("session", "turn", "tool_call", "access"),
         ("tool", "user", "version", "in_catalog", "run", *_OBS),
         (("access", ("granted", "denied")),), mark="re-run"),
    Kind("tool.intent", _RUN, "a tool is about to run: its intent is in the thread log",
         ("session", "turn", "tool_call", "tool"), ("epoch", "key", "run", *_OBS)),
    Kind("tool.result", _RUN, "a tool call has its one final result",
         ("session", "turn", "tool_call", "outcome"), ("tool", "background", "run", *_OBS),
         (("outcome", TOOL_OUTCOMES),)),
    Kind("answer.refused", _RUN, "a person's answer was not applied, and the person is told "
         "why: the call already had its answer or outcome, ended, expired, or is not theirs",
         ("session", "tool_call", "reason"), ("turn", "decision", "user", "outcome", *_OBS),
         (("reason", ANSWER_REFUSALS),), mark="answer refused"),
    Kind("tool.background", _RUN, "the person sent a waiting tool call to the background",
         ("session", "turn", "tool_call"), ("tool", "phase", *_OBS), mark="background"),
    Kind("tool.finished", _RUN, "a backgrounded tool call finished (toolFinished delivered)",
         ("session", "turn", "tool_call", "outcome"),
         ("background", "placeholder", *_OBS), (("outcome", TOOL_OUTCOMES),)),
    Kind("threadlog.assigned", _RUN, "a host took ownership of the thread at a new epoch",
         ("session", "epoch"), ("owner", "after_seq", *_OBS), mark="assigned"),
    Kind("threadlog.appended", _RUN, "an entry was appended to the thread log",
         ("session", "epoch", "seq"),
         ("owner", "entry", "entry_kind", "turn", "tool_call", *_OBS)),
    Kind("threadlog.rejected", _RUN, "an append was rejected (stale epoch, aborted "
         "transaction, control row held), or taking ownership was (control row held; no "
         "`epoch` then)", ("session", "reason"),
         ("epoch", "owner", "entry", "detail", "stale", "current_epoch", "current_owner",
          "held_since", "idle_timeout", *_OBS),
         (("reason", REJECTIONS),),
         open_values=True, mark="append rejected"),
    # -- the engine (the simulator, or an observer of a real engine)
    Kind("deployment.registered", "engine", "a deployment (version of the code) is registered",
         ("deployment",), ("version", "hosts")),
    Kind("deployment.superseded", "engine", "another deployment now takes new work; this one "
         "lives on while something is pinned to it", ("deployment",),
         ("version", "pinned", "by")),
    Kind("deployment.drained", "engine", "nothing running or waiting is pinned to the "
         "deployment any more (the engine's own drainage where it has one)",
         ("deployment",), ("version", "after", "superseded_at")),
    Kind("deployment.retired", "engine", "the deployment was removed (its hosts stopped)",
         ("deployment",), ("version",)),
    Kind("invocation.created", "engine", "an invocation (workflow run) was created",
         ("invocation",), ("target", "key", "caller")),
    Kind("invocation.started", "engine", "an invocation started, pinned to a deployment",
         ("invocation", "deployment"), ("host", "target", "key")),
    Kind("invocation.repinned", "engine", "an invocation was moved to another deployment",
         ("invocation", "deployment"), mark="repinned"),
    Kind("invocation.suspended", "engine", "an invocation suspended (waiting); it stays pinned",
         ("invocation",), ("deployment", "host", "on")),
    Kind("invocation.resumed", "engine", "a suspended or paused invocation runs again",
         ("invocation",), ("deployment", "host")),
    Kind("invocation.paused", "engine", "the engine paused the invocation (needs an operator)",
         ("invocation",), ("deployment", "host", "reason")),
    Kind("invocation.completed", "engine", "an invocation completed, however it ended",
         ("invocation",), ("deployment", "host", "target", "outcome", "error", "status"),
         types=("ok", "fail", "event")),
    Kind("attempt.started", "engine", "an attempt of an invocation started on a host",
         ("invocation", "deployment"), ("host", "attempt", "replay")),
    Kind("attempt.abandoned", "engine", "an attempt was abandoned (its host crashed or hung)",
         ("invocation",), ("host", "deployment", "attempt", "after"), mark="attempt abandoned"),
    Kind("attempt.fenced", "engine", "a stale attempt was fenced off by the engine",
         ("invocation",), ("host", "deployment", "attempt"), mark="attempt fenced"),
    Kind("attempt.failed", "engine", "an attempt failed and will be retried",
         ("invocation",), ("host", "deployment", "attempt", "error", "error_type", "stale"),
         mark="attempt failed"),
    Kind("journal.entry", "engine", "an entry was added to an invocation's journal",
         ("invocation",), ("host", "index", "name", "entry")),
    Kind("journal.mismatch", "engine", "a replay met code issuing different commands",
         ("invocation",), ("host", "deployment", "detail"), mark="journal mismatch"),
    Kind("awakeable.resolved", "engine", "an awakeable (durable promise) was resolved",
         ("id",)),
    Kind("awakeable.rejected", "engine", "an awakeable was rejected", ("id",), ("reason",)),
    Kind("timer.fired", "engine", "a durable timer fired", (), ("invocation", "at"),
         mark="timer fired"),
    Kind("send", "engine", "a one-way call was sent", (), ("invocation", "host", "target",
                                                          "child", "delay")),
    Kind("host.paused", "engine", "a host stopped (GC pause, SIGSTOP)", ("host",),
         ("deployment", "duration")),
    Kind("host.resumed", "engine", "a paused host runs again", ("host",), ("deployment",)),
    Kind("host.crashed", "engine", "a host died (SIGKILL)", ("host",), ("deployment",)),
    Kind("host.restarted", "engine", "a crashed host was started again", ("host",),
         ("deployment",)),
    Kind("faultpoint.reached", "engine", "running code reached a named fault point",
         ("point",), ("host", "deployment", "invocation", "action"),
         (("action", ("pause", "crash")),)),
    Kind("clock.latency", "engine", "the longest real delay of the run between a timer due "
         "and its work settled; the checkers add it to their tolerance", ("seconds",)),
    Kind("clock.stalled", "engine", "a real engine stayed busy for `stall_after` real "
         "seconds outside any fault, and the virtual clock jumped all the same", ("seconds",),
         ("active",), types=("info",)),
    # -- the world
    Kind("effect.attempted", "world", "the world was asked for an effect",
         (), ("effect", "logical", "key", "session", "turn", "tool_call", "asked", "to",
              "amount"),
         (("effect", EFFECTS),), open_values=True),
    Kind("effect.delivered", "world", "the world delivered an effect (first time for its key; "
         "every time without a key); without `logical` only duplicates under one key are found; "
         "a model reply that calls a tool names the call (`asked`)",
         (), ("effect", "logical", "key", "session", "turn", "tool_call", "asked", "to",
              "amount"),
         (("effect", EFFECTS),),
         open_values=True),
    Kind("effect.deduplicated", "world", "a retry under a delivered key: nothing delivered",
         (), ("effect", "logical", "key", "session", "turn", "tool_call", "to", "amount"),
         (("effect", EFFECTS),), open_values=True),
    Kind("service.fault", "world", "a world service (the provider, email, payments, identity, "
         "cards) failed a call on purpose; an effect it did is recorded as delivered too",
         ("service", "fault"), ("session", "turn", "tool_call", "key", "throttled",
                                "duration", "op"),
         (("service", services.SERVICES), ("fault", services.FAULT_NAMES))),
    Kind("identity.revoked", "world", "a user lost access to a tool ('*': every tool)",
         ("user",), ("tool",)),
    Kind("identity.granted", "world", "a user got access to a tool back", ("user",),
         ("tool",)),
    # -- the runner: operations and faults, the schedule's steps
    Kind("op.message", "runner", "the runner sent a user message (invoke, then ok; the "
         "invoke names who sent it, `user`; fail: the runtime refused it by raising)",
         ("session",), ("message_id", "planned", "user", "malformed", "reason", "status"),
         types=("invoke", "ok", "fail", "info")),
    Kind("op.answer", "runner", "the runner answered the session's open card, or the call "
         "it names (`named`) with or without a card (fail: no card, or the runtime refused it "
         "by raising; `reason` says which)",
         (), ("session", "turn", "tool_call", "decision", "user", "reason", "named",
              "malformed", "status"),
         (("decision", ("approve", "deny")),), types=("invoke", "ok", "fail", "info")),
    Kind("op.background", "runner", "the runner sent the open tool call to the background "
         "(`session` asked; `of`: the session that owns the call, when another)",
         ("session",), ("turn", "tool_call", "of", "reason", "malformed", "status"),
         types=("invoke", "ok", "fail", "info")),
    Kind("op.cancel", "runner", "the runner cancelled the session's turn", ("session",),
         types=("invoke", "ok", "fail", "info")),
    Kind("fault.heal", "runner", "every fault is over from here (the liveness window starts)",
         (), ("at",)),
    Kind("fault.redeploy", "runner", "the runner deployed a new version", (),
         ("deployment", "version"), types=("info", "event")),
    Kind("run.end", "runner", "the run ended (with the world's card board, when it showed a "
         "card)", (), ("cards", "closed_at", "shown")),
    Kind("run.error", "runner", "the run stopped on an error", ("error",)),
    Kind("step.skipped", "runner", "a schedule step not applied: the runtime lacks what it "
         "needs (a capability, a world endpoint, a declared fault point)",
         ("step", "action", "lacks"), types=("info",)),
    *(Kind(f"fault.{action}", "runner",
           f"the schedule's `{action}` step (with `skipped` when the runtime lacks the "
           "capability)", (), ("host", "deployment", "duration", "point", "action", "fault",
                               "service", "times", "link", "kind", "skipped", "reason"),
           types=("info", "event"))
      for action in SCHEDULE_ACTIONS if action != "deploy"),
    Kind("fault.deploy", "runner", "a `deploy` step the runtime could not take (`skipped`)",
         (), ("skipped", "reason"), types=("info", "event")),
    # -- the final state, read back at the end of a run
    Kind("threadlog.committed", "final", "a committed thread log entry, read back at the end",
         ("session", "epoch", "seq"), ("owner", "entry", "kind", "turn"),
         (("kind", ("user", "model", "tool_intent", "tool_result", "tool_hold", "turn_end")),),
         open_values=True),
    Kind("threadlog.owner", "final", "a thread's control row at the end", ("session", "epoch"),
         ("owner",)),
)

KINDS: Final[Mapping[str, Kind]] = MappingProxyType({k.name: k for k in _KINDS})
if len(KINDS) != len(_KINDS):  # pragma: no cover - a guard for editors
    raise ImportError("contract.records: a kind is listed twice")
# The vocabulary's namespaces are closed: an unknown kind in one of them is a typo.
NAMESPACES: Final[frozenset[str]] = frozenset(k.namespace for k in _KINDS)

# Kind -> required fields, the check made on every appended record (`harness.history`).
REQUIRED: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {k.name: k.required for k in _KINDS})
_REQUIRED: Final = REQUIRED


def marks(source: Source) -> dict[str, str]:
    """Kind -> timeline label of the kinds from `source` that are marks of their own."""
    return {k.name: k.mark for k in _KINDS if k.mark and k.source == source}


def observations() -> dict[str, tuple[str, ...]]:
    """The runtime's observation kinds with the fields each carries (`Observer.emit`)."""
    return {k.name: k.promised for k in _KINDS if k.source == "runtime"}


def nearest(kind: str, n: int = 1) -> list[str]:
    """The vocabulary's kinds closest to `kind` (difflib), closest first; none if none is."""
    return difflib.get_close_matches(kind, list(KINDS), n=n, cutoff=0.6)


@functools.lru_cache(maxsize=4096)
def unknown_kind(kind: str) -> str | None:
    """Why `kind` may not be recorded, or None if it is a kind of the vocabulary or of an
    adapter's own namespace.

    The hint works within the namespace: 'turn.begun' lists the turn.* kinds (and names the
    closest verb among them only when one is close, so 'begun' does not read as 'ended'
    because both start with 'turn.'). A namespace one typo away from the vocabulary's with
    one of its verbs ('trun.started') is a typo too, not an adapter's own record.
    """
    if kind in _REQUIRED:
        return None
    namespace, dot, verb = kind.partition(".")
    verbs = _verbs()
    if dot and verb and namespace not in NAMESPACES:
        near = _typo_namespace(namespace, verb, verbs)
        if near is None:
            return None  # an adapter's own diagnostics ('myengine.started'): nobody judges them
        return (f"unknown record kind {kind!r}: did you mean {near!r}? {namespace!r} is a typo "
                f"of the vocabulary's namespace {near.partition('.')[0]!r}, not a namespace of "
                f"your own. {_WHERE}")
    if dot and namespace in verbs:
        listed = f"{namespace}.* kinds: {', '.join(verbs[namespace])}."
        close = difflib.get_close_matches(verb, verbs[namespace], n=1, cutoff=0.6)
        hint = f"did you mean '{namespace}.{close[0]}'? " if close else ""
        return f"unknown record kind {kind!r}: {hint}{listed} {_WHERE}"
    guesses = nearest(kind, 3)
    hint = ""
    if guesses:
        hint = f"did you mean {guesses[0]!r}? "
        if guesses[1:]:
            hint += f"Also close: {', '.join(map(repr, guesses[1:]))}. "
    return f"unknown record kind {kind!r}: {hint}{_WHERE}"


_WHERE: Final = ("The kinds are listed in docs/events.md (contract.records.KINDS); an adapter's "
                 "own records go under a namespace of its own, e.g. 'myengine.started'")


@functools.cache
def _verbs() -> dict[str, list[str]]:
    """Namespace -> the verbs of its kinds, in the vocabulary's order."""
    verbs: dict[str, list[str]] = {}
    for name in KINDS:
        namespace, dot, verb = name.partition(".")
        if dot:
            verbs.setdefault(namespace, []).append(verb)
    return verbs


def _typo_namespace(namespace: str, verb: str, verbs: Mapping[str, list[str]]) -> str | None:
    """The vocabulary kind `namespace.verb` misspells, when its namespace is one typo from a
    vocabulary namespace that has exactly this verb; else None (a namespace of its own)."""
    for near in difflib.get_close_matches(namespace, list(verbs), n=3, cutoff=0.75):
        if verb in verbs[near]:
            return f"{near}.{verb}"
    return None


def missing_field(kind: str, fields: Mapping[str, object],
                  data: Mapping[str, object] | None) -> str | None:
    """Why a `kind` record with these named fields and data lacks a required field, or None.

    A field may be in its slot (`fields`) or in `data`; None counts as missing.
    """
    for name in _REQUIRED.get(kind, ()):
        if fields.get(name) is None and (data is None or data.get(name) is None):
            spec = KINDS[kind]
            return (f"record {kind!r} lacks required field {name!r} ({FIELDS.get(name, name)}); "
                    f"it needs {', '.join(spec.required)} (docs/events.md)")
    return None


def bad_value(kind: str, fields: Mapping[str, object],
              data: Mapping[str, object] | None) -> str | None:
    """Why a `kind` record carries a value outside its field's value set, or None.

    Only closed value sets are judged (`Kind.open_values` is False): a misspelt outcome
    ('answerd') would make every checker that compares it misjudge the record. A field left
    out (None) is no value.
    """
    spec = KINDS.get(kind)
    if spec is None or spec.open_values:
        return None
    for name, values in spec.values:
        value = fields.get(name)
        if value is None and data is not None:
            value = data.get(name)
        if value is None or value in values:
            continue
        if name == "decision" and data is not None and data.get("malformed") is True:
            continue  # sent outside the set on purpose, and said so
        close = difflib.get_close_matches(str(value), values, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return (f"record {kind!r} has {name}={value!r}{hint}, which is not one of "
                f"{', '.join(values)} (docs/events.md)")
    return None


@dataclass(frozen=True, slots=True)
class Reading:
    """One kind of record a checker reads, and the fields of it that it uses."""

    kind: str
    fields: tuple[str, ...] = ()


def _reads(*pairs: tuple[str, tuple[str, ...]]) -> tuple[Reading, ...]:
    return tuple(Reading(kind, fields) for kind, fields in pairs)


# The fault records every fault-aware checker reads to know when faults were active.
_FAULTS: Final = (
    ("host.paused", ("host", "deployment", "duration")),
    ("host.resumed", ("host", "deployment")),
    ("host.crashed", ("host", "deployment")),
    ("host.restarted", ("host", "deployment")),
    ("fault.gc-pause", ("host", "duration")),
    ("fault.crash", ("host",)),
    ("fault.service-fault", ()),
    ("service.fault", ("duration",)),
    ("fault.clock-jump", ("duration",)),
    ("fault.heal", ("at",)),
)
# Read by every checker: the engine's measured latency and the run's end.
_EVERY: Final = (("clock.latency", ("seconds",)), ("run.end", ()))
_INVOCATIONS: Final = (
    ("invocation.created", ("invocation", "target", "key")),
    ("invocation.started", ("invocation", "deployment", "target", "key")),
    ("invocation.repinned", ("invocation", "deployment")),
    ("invocation.suspended", ("invocation", "deployment")),
    ("invocation.resumed", ("invocation",)),
    ("invocation.paused", ("invocation", "reason")),
    ("invocation.completed", ("invocation",)),
)

# Checker name -> the records it is judged on. Each checker class's `judged_on` is its entry.
JUDGED_ON: Final[Mapping[str, tuple[Reading, ...]]] = MappingProxyType({
    "no-duplicate-effects": _reads(
        ("effect.delivered", ("effect", "logical", "key", "tool_call", "session", "turn")),
        ("effect.attempted", ()),
        ("effect.deduplicated", ()),
        *_EVERY,
    ),
    "pinning-bound": _reads(
        *_INVOCATIONS,
        ("deployment.registered", ("deployment", "version", "hosts")),
        ("deployment.superseded", ("deployment", "pinned")),
        ("deployment.drained", ("deployment",)),
        ("deployment.retired", ("deployment",)),
        ("tool.awaiting", ("tool_call",)),
        ("tool.handoff", ("tool_call", "waited")),
        *_FAULTS, *_EVERY,
    ),
    "busy-rule": _reads(
        ("op.message", ("session", "message_id")),
        ("message.received", ("session", "message")),
        ("message.queued", ("session", "message")),
        ("turn.started", ("session", "turn", "message")),
        ("turn.waiting", ("session", "turn")),
        ("turn.resumed", ("session", "turn")),
        ("turn.ended", ("session", "turn")),
        *_FAULTS, *_EVERY,
    ),
    "fencing": _reads(
        ("threadlog.assigned", ("session", "epoch", "owner", "after_seq")),
        ("threadlog.appended", ("session", "epoch", "seq", "owner")),
        ("threadlog.rejected", ("session", "epoch", "owner", "reason", "current_epoch",
                                "current_owner", "held_since", "idle_timeout")),
        ("threadlog.committed", ("session", "epoch", "seq", "owner")),
        ("threadlog.owner", ("session", "epoch", "owner")),
        ("attempt.failed", ("error_type",)),
        *_EVERY,
    ),
    "turn-outcome": _reads(
        ("tool.awaiting", ("session", "turn", "tool_call")),
        ("tool.handoff", ("session", "turn", "tool_call")),
        ("tool.result", ("session", "turn", "tool_call", "outcome")),
        ("turn.waiting", ("session", "turn", "tool_call")),
        ("turn.resumed", ("session", "turn", "tool_call", "outcome")),
        ("turn.ended", ("session", "turn", "reason")),
        ("turn.held", ("session", "turn", "tool_call")),
        ("threadlog.appended", ("entry", "session", "turn", "tool_call")),
        ("threadlog.committed", ("entry",)),
        *_FAULTS, *_EVERY,
    ),
    "access-rechecked": _reads(
        ("deployment.registered", ("deployment", "version")),
        ("invocation.started", ("invocation", "deployment")),
        ("message.received", ("session", "user", "message")),
        ("op.message", ("session", "message_id", "user")),
        ("turn.started", ("session", "turn", "message")),
        ("op.answer", ("session", "tool_call", "decision", "user")),
        ("tool.awaiting", ("session", "tool_call", "tool")),
        ("tool.handoff", ("session", "tool_call")),
        ("turn.waiting", ("session", "tool_call")),
        ("tool.background", ("tool_call",)),
        ("tool.intent", ("session", "tool_call", "tool")),
        ("tool.rerun", ("session", "tool_call", "access", "tool", "user", "version",
                        "deployment", "invocation")),
        ("effect.delivered", ("tool_call", "effect", "asked")),
        ("identity.revoked", ("user", "tool")),
        ("identity.granted", ("user", "tool")),
        *_EVERY,
    ),
    "conservative-recovery": _reads(
        ("tool.intent", ("session", "turn", "tool_call", "epoch", "invocation", "host", "key")),
        ("effect.attempted", ("key", "tool_call")),
        ("threadlog.assigned", ("session", "epoch", "owner")),
        ("attempt.started", ("invocation", "replay")),
        ("tool.awaiting", ("session", "tool_call")),
        ("tool.handoff", ("session", "tool_call")),
        ("tool.rerun", ("session", "tool_call")),
        ("turn.waiting", ("session", "tool_call")),
        ("turn.resumed", ("session", "tool_call")),
        ("op.answer", ("session", "tool_call")),
        ("tool.result", ("session", "tool_call", "outcome")),
        ("turn.held", ("session", "turn", "tool_call")),
        ("turn.ended", ("session", "turn", "reason")),
        *_FAULTS, *_EVERY,
    ),
    "effect-authorized": _reads(
        ("tool.awaiting", ("tool_call",)),
        ("tool.handoff", ("tool_call",)),
        ("turn.waiting", ("tool_call",)),
        ("op.answer", ("tool_call", "decision")),
        ("tool.result", ("tool_call", "outcome")),
        ("turn.held", ("tool_call",)),
        ("tool.intent", ("tool_call",)),
        ("effect.delivered", ("tool_call", "effect", "to", "amount")),
        ("run.end", ("shown",)),
        *_EVERY,
    ),
    "answer-fate": _reads(
        ("op.answer", ("tool_call", "decision", "named", "malformed")),
        ("tool.result", ("tool_call", "outcome", "tool")),
        ("tool.awaiting", ("tool_call", "tool")),
        ("tool.handoff", ("tool_call",)),
        ("turn.waiting", ("tool_call",)),
        ("tool.intent", ("tool_call", "tool")),
        ("effect.delivered", ("asked",)),
        ("answer.refused", ("tool_call", "session", "turn", "decision", "reason",
                            "outcome")),
        ("turn.started", ("turn",)),
        ("turn.ended", ("turn",)),
        ("op.cancel", ("session",)),
        ("tool.background", ("tool_call",)),
        *_FAULTS, *_EVERY,
    ),
    "effect-done": _reads(
        ("tool.intent", ("tool_call", "tool")),
        ("tool.result", ("tool_call", "outcome", "tool")),
        ("tool.awaiting", ("tool_call", "tool")),
        ("effect.delivered", ("tool_call",)),
        *_EVERY,
    ),
    "outcome-justified": _reads(
        ("tool.result", ("session", "tool_call", "outcome")),
        ("tool.awaiting", ("tool_call",)),
        ("tool.intent", ("tool_call",)),
        ("turn.ended", ("session", "turn", "reason")),
        ("identity.revoked", ("tool",)),
        ("op.cancel", ("session",)),
        ("op.message", ("session",)),
        *_EVERY,
    ),
    "approval-asked": _reads(
        ("tool.awaiting", ("tool_call",)),
        ("op.answer", ("tool_call", "decision", "malformed")),
        ("service.fault", ("service", "fault", "op", "tool_call")),
        ("tool.intent", ("tool_call",)),
        ("tool.result", ("tool_call", "outcome")),
        *_EVERY,
    ),
    "hold-justified": _reads(
        ("tool.intent", ("session", "tool_call", "run", "epoch")),
        ("threadlog.assigned", ("session", "epoch")),
        ("turn.held", ("session", "tool_call", "run")),
        ("tool.awaiting", ("tool_call", "mode", "run")),
        *_EVERY,
    ),
    "turn-answered": _reads(
        ("effect.delivered", ("effect", "logical", "turn", "asked")),
        ("turn.ended", ("turn", "reason")),
        *_EVERY,
    ),
    "card-closed": _reads(
        ("tool.result", ("tool_call", "outcome")),
        ("run.end", ("cards",)),
        ("clock.latency", ("seconds",)),
        *_FAULTS,
    ),
    "malformed-refused": _reads(
        ("op.message", ("session", "malformed", "status")),
        ("op.answer", ("session", "decision", "malformed", "status")),
        ("op.background", ("session", "malformed", "status")),
        ("invocation.created", ("invocation",)),
        ("invocation.completed", ("invocation", "status")),
        ("clock.latency", ("seconds",)),
    ),
    "result-told": _reads(
        ("tool.result", ("tool_call", "turn", "outcome")),
        ("turn.started", ("session", "turn")),
        ("turn.ended", ("session", "turn")),
        *_FAULTS, *_EVERY,
    ),
    "no-code-error": _reads(
        ("invocation.created", ("invocation", "target", "key")),
        ("attempt.started", ("invocation",)),
        ("attempt.failed", ("invocation", "error", "error_type")),
        ("clock.latency", ("seconds",)),
    ),
    "context-kept": _reads(
        ("effect.delivered", ("effect", "logical", "key", "turn", "asked")),
        ("op.message", ("message_id", "planned")),
        ("turn.started", ("turn", "message")),
        *_EVERY,
    ),
    "message-logged": _reads(
        ("threadlog.assigned", ("session",)),
        ("threadlog.appended", ("entry_kind", "turn")),
        ("threadlog.committed", ("kind", "turn")),
        ("turn.started", ("turn",)),
        ("turn.ended", ("session", "turn", "reason")),
        *_EVERY,
    ),
    "liveness": _reads(
        *_INVOCATIONS,
        ("message.queued", ("session", "message")),
        ("op.answer", ("tool_call",)),
        ("tool.awaiting", ("session", "turn", "tool_call")),
        ("tool.background", ("tool_call",)),
        ("tool.handoff", ("tool_call",)),
        ("tool.result", ("tool_call",)),
        ("turn.started", ("session", "turn", "message")),
        ("turn.waiting", ("session", "turn")),
        ("turn.resumed", ("session", "turn", "tool_call")),
        ("turn.ended", ("session", "turn", "reason")),
        *_FAULTS, *_EVERY,
    ),
    "background-honored": _reads(
        ("op.background", ("session", "tool_call", "of")),
        ("op.answer", ("tool_call",)),
        ("answer.refused", ("tool_call",)),
        ("tool.background", ("tool_call",)),
        ("tool.result", ("tool_call", "outcome")),
        ("tool.finished", ("tool_call", "outcome", "placeholder")),
        ("turn.resumed", ("tool_call", "outcome")),
        ("turn.started", ("session", "turn")),
        ("turn.ended", ("session", "turn", "tool_call", "reason")),
        *_FAULTS, *_EVERY,
    ),
    "cancel-honored": _reads(
        ("op.cancel", ("session",)),
        ("tool.awaiting", ("tool_call", "turn")),
        ("tool.handoff", ("tool_call",)),
        ("turn.waiting", ("tool_call",)),
        ("turn.held", ("tool_call",)),
        ("op.answer", ("tool_call", "decision")),
        ("tool.intent", ("tool_call",)),
        ("tool.result", ("tool_call", "outcome")),
        ("tool.background", ("tool_call",)),
        ("effect.delivered", ("effect", "logical", "turn")),
        ("turn.started", ("session", "turn")),
        ("turn.ended", ("session", "turn")),
        ("run.end", ("cards", "closed_at")),
        ("clock.latency", ("seconds",)),
        *_FAULTS,
    ),
    "turn-per-message": _reads(
        ("op.message", ("session", "message_id")),
        ("message.received", ("session", "message")),
        ("turn.started", ("session", "turn", "message")),
        *_FAULTS, *_EVERY,
    ),
})
