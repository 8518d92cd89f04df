"""access-rechecked: a re-run after the hand-off uses the latest code and today's identity.

When a person answers a wait that was handed off, PendingToolCall re-runs the tool on the
latest deployment, re-resolving identity and the tool catalog. So:

- a `tool.rerun` runs on the latest deployment (last `deployment.registered`). The invocation
  doing it is pinned where it started, which is after the person answered (`op.answer`), so
  any deployment that was the latest between that answer and the re-run is accepted. Where it
  ran is read from the record's deployment, its invocation (`invocation.started`), or the
  version it reports (`data["version"]`, matched against `deployment.registered`);
- a `tool.rerun` follows a wait that left the call: its hand-off (`tool.handoff`,
  `turn.waiting`) or its trip to the background (`tool.background`). One reported with
  neither before it is a first run told as a re-run, and this rule judges re-runs by their
  reports;
- if the user lost access to the tool (`identity.revoked` for that tool or `"*"`, not granted
  again since) before the re-run, the re-run says `access=denied`, and no effect of that tool
  call is delivered afterwards, whatever path it took. A revocation that lands after the
  re-run checked access (while its request is in flight) is too late to stop it; a handed-off
  call delivered with no re-run at all skipped the check, so any revocation before the
  delivery counts, except one that landed while an execution begun before the hand-off (its
  `tool.intent` written before the revocation, and no intent since) was in flight: a host
  paused mid-request delivers it late, as a real paused process does, and no re-run of the
  call was ever asked to check.

A call never handed off is judged by when it was asked for and approved: its run's check
came after the model asked for it (the world's billed reply naming it, `asked`) and after the
approval the run began on (the last approving `op.answer` before its intent). A revocation
standing at the later of the two, and still standing at the delivery (no grant since), was
there to be seen: a delivery then is a violation.

Identity events name a user. A run the person approved is judged by the approver's access:
the runner records who answered (`op.answer` `user`), which the runtime cannot rewrite, and
an approval is that person's authority. The user of a tool call is the one its re-run names
(`data["user"]`), else the sender of the message its turn processes (`turn.started`
`message`; the runner's `op.message` names who sent it, else `message.received` does): two
people may write in one session, and a turn acts for the one who asked. Failing those, the
session's (from any record with a session and `data["user"]`); failing all, a revocation
applies when its user is the session id or the only user the run ever revoked or granted
that tool.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import at, attr, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.checkers.model import ANY_TOOL, RunModel, ToolCall, model_of
from harness.history import History, Record

_WAITS: Final = frozenset({"tool.handoff", "turn.waiting"})


@final
class AccessRechecked:
    name: str = "access-rechecked"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["access-rechecked"]
    description: str = (
        "A tool re-run after the hand-off runs on the latest deployment and rejects a user "
        "who lost access during the wait; nothing of that call reaches the world afterwards."
    )

    # The record kinds it reads, from the run's model (harness.checkers.model: the tool
    # calls, the deployments, the invocations' starts, the identity changes): run_checkers
    # gives it only these (harness.checkers.base.dispatch), so the model of its view alone
    # says the same.
    reads: frozenset[str] = frozenset(
        {"deployment.registered", "invocation.started", "identity.revoked", "identity.granted",
         "tool.intent", "tool.awaiting", "tool.handoff", "turn.waiting", "tool.background",
         "tool.rerun",
         "effect.delivered", "op.answer", "message.received", "op.message"})

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        model = model_of(history)
        # The re-runs and the deliveries of every call, in the order they were recorded: each
        # is judged as of its record.
        events = sorted(((r, call) for call in model.calls.values()
                         for r in (*call.reruns, *call.deliveries)), key=lambda x: x[0].index)
        # Tool call -> the world's first billed model reply that asked for it.
        asked: dict[str, Record] = {}
        if model.identity.changes:
            for rec in history.records:
                if rec.kind == "effect.delivered" and rec.data.get("asked") is not None:
                    asked.setdefault(str(rec.data["asked"]), rec)
        # Tool call -> its first `tool.background`: a call sent there leaves its turn, and
        # the answer that comes later re-runs it as after a hand-off.
        sent_away: dict[str, Record] = {}
        for rec in history.records:
            if rec.kind == "tool.background" and rec.tool_call is not None:
                sent_away.setdefault(rec.tool_call, rec)
        violations: list[Violation] = []
        reruns = unplaced = denied = 0
        for r, call in events:
            if r.kind == "tool.rerun":
                reruns += 1
                away = sent_away.get(call.id)
                if _waited(call, r.index) is None and (away is None or away.index > r.index):
                    # A re-run follows a wait that left the call: one reported with none
                    # before it is a first run told as a re-run (and the runtime's real
                    # re-runs, judged here by their reports, may go untold).
                    violations.append(Violation(
                        f"tool call {call.id} reported a re-run at {at(r.time)} (access "
                        f"{r.data.get('access')}) although its wait was never handed off or "
                        f"sent to the background before it: {r.describe()}", cite((r,))))
                placed = _placement(model, call, r)
                if placed is None:
                    unplaced += 1
                elif isinstance(placed, Violation):
                    violations.append(placed)
                if r.data.get("access") == "denied":
                    denied += 1
                    continue
                call_tool = _named(call, r.index, "tool")
                rev = _revocation(model, call, r, call_tool)
                if rev is not None:
                    violations.append(Violation(
                        f"tool call {call.id} re-ran with access={r.data.get('access')} at "
                        f"{at(r.time)} although user {rev.data.get('user')} lost access to "
                        f"{call_tool} at {at(rev.time)}: {rev.describe()}; {r.describe()}",
                        cite((rev, r)),
                    ))
            else:
                violation = _delivery(model, call, r, asked)
                if violation is not None:
                    violations.append(violation)

        stats = {"reruns": float(reruns), "denied": float(denied), "unplaced": float(unplaced)}
        if unplaced and not violations:
            return Result(
                self.name, None, reached=True, stats=stats,
                note=f"{unplaced} of {reruns} re-runs name no deployment, invocation or "
                     "version, so whether they ran on the latest deployment cannot be judged",
            )
        return verdict(
            self.name, violations, reached=reruns > 0,
            note="" if reruns else "no tool was re-run after a hand-off", stats=stats,
        )


def _delivery(model: RunModel, call: ToolCall, r: Record,
              asked: dict[str, Record]) -> Violation | None:
    """A delivery of a handed-off call, judged by the check of the run that sent it; of any
    other call, by when it was asked for and approved (`_in_call`)."""
    if not model.identity.changes:
        return None  # nobody lost access to anything
    wait = _handed(call, r.index)
    if wait is None:
        return _in_call(model, call, r, asked)
    call_tool = _named(call, r.index, "tool")
    rev = _revocation(model, call, r, call_tool)
    if rev is None:
        return None
    intent = call.intent_before(r.index)
    reruns = [x for x in call.reruns if x.index < r.index]
    # Each run's own check: a delivery is judged by the run that sent it (the run of the last
    # intent before it), not by a later run's check. A run that checked before the revoke and
    # was paused mid-send may finish its send; a later run must check again.
    sender = None
    if intent is not None:
        run = intent.data.get("run")
        sender = next((x for x in reversed(reruns)
                       if x.data.get("run") is not None and x.data["run"] == run), None)
    check = sender if sender is not None else (reruns[-1] if reruns else None)
    in_flight = (check is None and intent is not None
                 and intent.index < wait.index and intent.index < rev.index)
    if in_flight or (check is not None and rev.index >= check.index):
        return None
    return Violation(
        f"{r.data.get('effect', 'effect')} of tool call {call.id} was delivered at "
        f"{at(r.time)} although user {rev.data.get('user')} lost access to "
        f"{call_tool} at {at(rev.time)}, "
        + (f"before the re-run at {at(check.time)}" if check is not None else
           f"and no re-run checked it after the hand-off at {at(wait.time)}")
        + f": {rev.describe()}; {r.describe()}",
        cite(x for x in (wait, rev, check, r) if x is not None),
    )


def _in_call(model: RunModel, call: ToolCall, r: Record,
             asked: dict[str, Record]) -> Violation | None:
    """A delivery of a call that was never handed off: the run it came from (its last intent
    before it) was checked after the model asked for the call (the world's billed reply
    naming it) and after the last approval before that intent, if the person approved it. A
    revocation standing at the later of the two and still at the delivery (no grant between)
    was there to be seen by that check."""
    call_tool = _named(call, r.index, "tool")
    if call_tool is None:
        return None
    intent = call.intent_before(r.index)
    upto = intent.index if intent is not None else r.index
    since = asked.get(call.id)
    if since is not None and since.index >= upto:
        since = None
    for answer in call.answers:
        if answer.index >= upto:
            break
        if answer.type == "invoke" and answer.data.get("decision") == "approve":
            since = answer if since is None or answer.index > since.index else since
    if since is None:
        return None  # when the call was checked, the harness cannot tell
    rev = _revocation(model, call, since, call_tool)
    if rev is None or _revocation(model, call, r, call_tool) is not rev:
        return None
    when = ("the person approved it" if since.kind == "op.answer" else
            "the model asked for it")
    return Violation(
        f"{r.data.get('effect', 'effect')} of tool call {call.id} was delivered at "
        f"{at(r.time)} although user {rev.data.get('user')} lost access to {call_tool} at "
        f"{at(rev.time)}, before {when} at {at(since.time)}: {rev.describe()}; "
        f"{r.describe()}",
        cite((rev, since, r)),
    )


def _approver(call: ToolCall, index: int) -> str | None:
    """Who gave the last approval of the call up to record `index`, if the answer says."""
    found = None
    for answer in call.answers:
        if answer.index > index:
            break
        if answer.type == "invoke" and answer.data.get("decision") == "approve":
            user = answer.data.get("user")
            found = None if user is None else str(user)
    return found


def _read(call: ToolCall, index: int) -> Iterator[Record]:
    """The call's records this checker reads, up to record `index`, in order."""
    return (r for r in sorted((*call.asks, *call.answers, *call.intents, *call.reruns,
                               *call.deliveries), key=lambda x: x.index)
            if r.index <= index)


def _named(call: ToolCall, index: int, name: str) -> str | None:
    """The first value of field `name` a record of the call named, up to record `index`."""
    for r in _read(call, index):
        value = attr(r, name) if name == "session" else r.data.get(name)
        if value is not None:
            return str(value)
    return None


def _waited(call: ToolCall, index: int) -> Record | None:
    """The call's first wait handed off (`tool.handoff`, `turn.waiting`) before record
    `index`."""
    wait = next((r for r in call.asks if r.kind in _WAITS), None)
    return wait if wait is not None and wait.index < index else None


def _handed(call: ToolCall, index: int) -> Record | None:
    """The call's hand-off before record `index`: its first wait handed off, or re-run."""
    wait = next((r for r in call.asks if r.kind in _WAITS), None)
    rerun = call.reruns[0] if call.reruns else None
    first = min((r for r in (wait, rerun) if r is not None), key=lambda r: r.index,
                default=None)
    return first if first is not None and first.index < index else None


def _revocation(model: RunModel, call: ToolCall, r: Record, tool: str | None) -> Record | None:
    """The revocation standing against the call's user for `tool` as of record `r`.

    The user of a run the person approved is the one who approved it (the last approving
    `op.answer` up to `r` that names a user: the runner says who answered, which the runtime
    cannot rewrite); else the one its re-run names, else the sender of the message its turn
    processes (two people may write in one session), else the session's; failing all, a
    revocation applies when its user is the session id or the only user the run ever revoked
    or granted that tool."""
    identity = model.identity
    if tool is None or not identity.changes:
        return None
    session = attr(r, "session") or _named(call, r.index, "session")
    user = _approver(call, r.index) or identity.call_user(call.id, r.index)
    turn = model.turns.get(call.turn) if call.turn is not None else None
    if user is None and turn is not None and turn.message is not None:
        user = identity.message_user(turn.message, r.index)
    if user is None and session is not None:
        user = identity.session_user(session, r.index)
    if user is None:
        users = identity.users_of(tool, r.index) | identity.users_of(ANY_TOOL, r.index)
        if session is not None and session in users:
            user = session
        elif len(users) == 1:
            user = next(iter(users))
    if user is None:
        return None
    return (identity.revoked(user, tool, r.index)
            or identity.revoked(user, ANY_TOOL, r.index))


def _placement(model: RunModel, call: ToolCall, r: Record) -> Violation | bool | None:
    """True if the re-run ran on an acceptable deployment, a Violation if not, None if unknown.

    Acceptable: the latest at the re-run, or any latest since the invocation doing it started
    (or, not knowing the invocation, since the person answered).
    """
    deps = model.deployments
    deployments = [d for d in deps.registered if d.index < r.index]
    if not deployments:
        return None
    versions = {str(d.deployment): str(d.data.get("version", "")) for d in deployments
                if d.deployment is not None}
    dep = attr(r, "deployment")
    version = r.data.get("version")
    inv = attr(r, "invocation")
    since = len(deployments) - 1
    pinned = model.pins.get(inv) if inv is not None else None
    start = (None if pinned is None else
             next((s for s in reversed(pinned.starts) if s.index < r.index), None))
    if start is not None:
        dep = dep or start.deployment
        since = min(since, max(deps.registered_before(start.index) - 1, 0))
    else:
        answer = next((a for a in reversed(call.answers)
                       if a.index < r.index and a.type == "invoke"), None)
        if answer is not None:
            since = min(since, max(deps.registered_before(answer.index) - 1, 0))
    if dep is None and version is None:
        return None
    acceptable = deployments[since:]
    if dep is not None and any(d.deployment == dep for d in acceptable):
        return True
    if dep is None and any(versions.get(str(d.deployment)) == str(version)
                           or d.data.get("version") == version for d in acceptable):
        return True
    latest = deployments[-1]

    def dep_name(name: str) -> str:
        known = versions.get(name)
        return f"{name} ({known})" if known else name

    where = (f"deployment {dep_name(dep)}" if dep is not None else f"version {version}")
    return Violation(
        f"tool call {call.id} re-ran on {where} at {at(r.time)} although "
        f"{dep_name(str(latest.deployment))} was the latest since {at(latest.time)}: "
        f"{latest.describe()}; {r.describe()}",
        cite((latest, r)),
    )
