"""access-rechecked: a re-run after the hand-off uses the latest code and today's identity.

When a person answers a wait that was handed off, PendingToolCall re-runs the tool on the
latest deployment, re-resolving identity and the tool catalog. So:

- a `tool.rerun` runs on the latest deployment (last `deployment.registered`). The invocation
  doing it is pinned where it started, which is after the person answered (`op.answer`), so
  any deployment that was the latest between that answer and the re-run is accepted. Where it
  ran is read from the record's deployment, its invocation (`invocation.started`), or the
  version it reports (`data["version"]`, matched against `deployment.registered`);
- if the user lost access to the tool (`identity.revoked` for that tool or `"*"`, not granted
  again since) before the re-run, the re-run says `access=denied`, and no effect of that tool
  call is delivered afterwards, whatever path it took. A revocation that lands after the
  re-run checked access (while its request is in flight) is too late to stop it; a handed-off
  call delivered with no re-run at all skipped the check, so any revocation before the
  delivery counts, except one that landed while an execution begun before the hand-off (its
  `tool.intent` written before the revocation, and no intent since) was in flight: a host
  paused mid-request delivers it late, as a real paused process does, and no re-run of the
  call was ever asked to check.

Identity events name a user. The user of a tool call is the one its re-run names
(`data["user"]`), else the session's (from any record with a session and `data["user"]`, such
as `message.received`); failing both, a revocation applies when its user is the session id or
the only user the run ever revoked or granted that tool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import Dedup, at, attr, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.history import History, Record

_KINDS = frozenset(
    {"deployment.registered", "invocation.started", "identity.revoked", "identity.granted",
     "tool.intent", "tool.awaiting", "tool.handoff", "turn.waiting", "tool.rerun",
     "effect.delivered", "op.answer", "message.received", "op.message"}
)
_ANY_TOOL = "*"


@final
class AccessRechecked:
    name: str = "access-rechecked"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["access-rechecked"]
    description: str = (
        "A tool re-run after the hand-off runs on the latest deployment and rejects a user "
        "who lost access during the wait; nothing of that call reaches the world afterwards."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch).
    reads: frozenset[str] = _KINDS

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        dedup = Dedup()
        # Every registration in order; "the latest" is the last one.
        deployments: list[Record] = []
        versions: dict[str, str] = {}
        started_at: dict[str, tuple[str | None, int]] = {}
        answered_at: dict[str, int] = {}
        revoked: dict[tuple[str, str], Record] = {}
        users_of_tool: dict[str, set[str]] = {}
        session_user: dict[str, str] = {}
        call_user: dict[str, str] = {}
        tool_of: dict[str, str] = {}
        session_of: dict[str, str] = {}
        handed: dict[str, Record] = {}
        rechecked: dict[str, Record] = {}
        # Each run's own check: a delivery is judged by the run that sent it (the run of the
        # last intent before it), not by a later run's check. A run that checked before the
        # revoke and was paused mid-send may finish its send; a later run must check again.
        checked_by_run: dict[tuple[str, object], Record] = {}
        last_intent: dict[str, Record] = {}
        violations: list[Violation] = []
        reruns = unplaced = denied = 0

        def dep_name(dep: str) -> str:
            version = versions.get(dep)
            return f"{dep} ({version})" if version else dep

        def revocation(tc: str | None, session: str | None, tool: str | None) -> Record | None:
            if tool is None:
                return None
            user = call_user.get(tc) if tc is not None else None
            if user is None and session is not None:
                user = session_user.get(session)
            if user is None:
                users = users_of_tool.get(tool, set()) | users_of_tool.get(_ANY_TOOL, set())
                if session is not None and session in users:
                    user = session
                elif len(users) == 1:
                    user = next(iter(users))
            if user is None:
                return None
            return revoked.get((user, tool)) or revoked.get((user, _ANY_TOOL))

        for r in history.records:
            kind = r.kind
            if kind not in _KINDS or not dedup.fresh(r):
                continue
            session = attr(r, "session")
            tc = attr(r, "tool_call")
            user = r.data.get("user")
            if user is not None and not kind.startswith("identity."):
                if session is not None:
                    session_user.setdefault(session, str(user))
                if tc is not None:
                    call_user[tc] = str(user)
            if tc is not None and session is not None:
                session_of.setdefault(tc, session)
            tool = r.data.get("tool")
            if tc is not None and tool is not None:
                tool_of.setdefault(tc, str(tool))
            if kind == "deployment.registered":
                deployments.append(r)
                if r.deployment is not None:
                    versions[r.deployment] = str(r.data.get("version", ""))
            elif kind == "invocation.started":
                if r.invocation is not None:
                    started_at[r.invocation] = (r.deployment, len(deployments) - 1)
            elif kind == "op.answer":
                if tc is not None and r.type == "invoke":
                    answered_at[tc] = len(deployments) - 1
            elif kind in ("identity.revoked", "identity.granted"):
                who, what = r.data.get("user"), r.data.get("tool", _ANY_TOOL)
                if who is None:
                    continue
                slot = (str(who), str(what))
                users_of_tool.setdefault(slot[1], set()).add(slot[0])
                if kind == "identity.revoked":
                    revoked[slot] = r
                else:
                    revoked.pop(slot, None)
            elif kind in ("tool.handoff", "turn.waiting"):
                if tc is not None:
                    handed.setdefault(tc, r)
            elif kind == "tool.intent":
                if tc is not None:
                    last_intent[tc] = r
            elif kind == "tool.rerun":
                reruns += 1
                if tc is not None:
                    handed.setdefault(tc, r)
                    rechecked[tc] = r
                    if r.data.get("run") is not None:
                        checked_by_run[(tc, r.data["run"])] = r
                violation = _placement(r, deployments, versions, started_at, answered_at,
                                       dep_name)
                if violation is None:
                    unplaced += 1
                elif isinstance(violation, Violation):
                    violations.append(violation)
                call_tool = tool_of.get(tc) if tc is not None else None
                rev = revocation(tc, session or session_of.get(tc or ""), call_tool)
                if r.data.get("access") == "denied":
                    denied += 1
                elif rev is not None:
                    violations.append(Violation(
                        f"tool call {tc} re-ran with access={r.data.get('access')} at "
                        f"{at(r.time)} although user {rev.data.get('user')} lost access to "
                        f"{call_tool} at {at(rev.time)}: {rev.describe()}; {r.describe()}",
                        cite((rev, r)),
                    ))
            elif kind == "effect.delivered":
                if tc is None or tc not in handed:
                    continue
                call_tool = tool_of.get(tc)
                rev = revocation(tc, session or session_of.get(tc), call_tool)
                intent = last_intent.get(tc)
                sender = (checked_by_run.get((tc, intent.data.get("run")))
                          if intent is not None else None)
                check = sender if sender is not None else rechecked.get(tc)
                wait = handed[tc]
                in_flight = (check is None and intent is not None and rev is not None
                             and intent.index < wait.index and intent.index < rev.index)
                if rev is not None and not in_flight and (check is None
                                                          or rev.index < check.index):
                    violations.append(Violation(
                        f"{r.data.get('effect', 'effect')} of tool call {tc} was delivered at "
                        f"{at(r.time)} although user {rev.data.get('user')} lost access to "
                        f"{call_tool} at {at(rev.time)}, "
                        + (f"before the re-run at {at(check.time)}" if check is not None else
                           f"and no re-run checked it after the hand-off at {at(wait.time)}")
                        + f": {rev.describe()}; {r.describe()}",
                        cite(x for x in (wait, rev, check, r) if x is not None),
                    ))

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


def _placement(
    r: Record,
    deployments: list[Record],
    versions: dict[str, str],
    started_at: dict[str, tuple[str | None, int]],
    answered_at: dict[str, int],
    dep_name: Callable[[str], str],
) -> Violation | bool | None:
    """True if the re-run ran on an acceptable deployment, a Violation if not, None if unknown.

    Acceptable: the latest at the re-run, or any latest since the invocation doing it started
    (or, not knowing the invocation, since the person answered).
    """
    if not deployments:
        return None
    dep = attr(r, "deployment")
    version = r.data.get("version")
    inv = attr(r, "invocation")
    since = len(deployments) - 1
    if inv is not None and inv in started_at:
        dep = dep or started_at[inv][0]
        since = min(since, max(started_at[inv][1], 0))
    else:
        tc = attr(r, "tool_call")
        if tc is not None and tc in answered_at:
            since = min(since, max(answered_at[tc], 0))
    if dep is None and version is None:
        return None
    acceptable = deployments[since:]
    if dep is not None and any(d.deployment == dep for d in acceptable):
        return True
    if dep is None and any(versions.get(str(d.deployment)) == str(version)
                           or d.data.get("version") == version for d in acceptable):
        return True
    latest = deployments[-1]
    where = (f"deployment {dep_name(dep)}" if dep is not None else f"version {version}")
    return Violation(
        f"tool call {attr(r, 'tool_call')} re-ran on {where} at {at(r.time)} although "
        f"{dep_name(str(latest.deployment))} was the latest since {at(latest.time)}: "
        f"{latest.describe()}; {r.describe()}",
        cite((latest, r)),
    )
