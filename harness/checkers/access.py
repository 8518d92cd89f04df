"""access-rechecked: a re-run after the hand-off uses the latest code and today's identity.

When a person answers a wait that was handed off, PendingToolCall re-runs the tool on the
latest deployment, re-resolving identity and the tool catalog. So:

- a `tool.rerun` runs on the deployment that was the latest (last `deployment.registered`)
  when the re-run happened, or when the invocation doing it started (it is pinned there);
- if the user lost access to the tool (`identity.revoked`, not granted again since), the
  re-run says `access=denied`, and no effect of that tool call is delivered after the
  revocation, whatever path it took.

Identity events name a user, observations name a session. The session's user is read from any
record that carries both (`data["user"]` with a session); failing that, a revocation applies
when its user is the session id or the only user the run ever revoked or granted that tool.
"""

from __future__ import annotations

from typing import final

from harness.checkers._common import Dedup, at, attr, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.history import History, Record

_KINDS = frozenset(
    {"deployment.registered", "invocation.started", "identity.revoked", "identity.granted",
     "tool.intent", "tool.awaiting", "tool.handoff", "turn.waiting", "tool.rerun",
     "effect.delivered"}
)


@final
class AccessRechecked:
    name: str = "access-rechecked"
    description: str = (
        "A tool re-run after the hand-off runs on the latest deployment and rejects a user "
        "who lost access during the wait; nothing of that call reaches the world afterwards."
    )

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        dedup = Dedup()
        latest: Record | None = None
        versions: dict[str, str] = {}
        started_on: dict[str, tuple[str | None, str | None]] = {}
        access: dict[tuple[str, str], Record] = {}
        users_of_tool: dict[str, set[str]] = {}
        session_user: dict[str, str] = {}
        tool_of: dict[str, str] = {}
        session_of: dict[str, str] = {}
        handed: dict[str, Record] = {}
        violations: list[Violation] = []
        reruns = unplaced = denied = 0

        def dep_name(dep: str) -> str:
            version = versions.get(dep)
            return f"{dep} ({version})" if version else dep

        def revocation(session: str | None, tool: str | None) -> Record | None:
            if tool is None:
                return None
            user = session_user.get(session) if session is not None else None
            if user is None:
                users = users_of_tool.get(tool, set())
                if session is not None and session in users:
                    user = session
                elif len(users) == 1:
                    user = next(iter(users))
            if user is None:
                return None
            last = access.get((user, tool))
            return last if last is not None and last.kind == "identity.revoked" else None

        for r in history.records:
            kind = r.kind
            session = attr(r, "session")
            if session is not None and session not in session_user:
                user = r.data.get("user")
                if user is not None and not kind.startswith("identity."):
                    session_user[session] = str(user)
            if kind not in _KINDS or not dedup.fresh(r):
                continue
            tc = attr(r, "tool_call")
            if tc is not None and session is not None:
                session_of.setdefault(tc, session)
            tool = r.data.get("tool")
            if tc is not None and tool is not None:
                tool_of.setdefault(tc, str(tool))
            if kind == "deployment.registered":
                latest = r
                if r.deployment is not None:
                    versions[r.deployment] = str(r.data.get("version", ""))
            elif kind == "invocation.started":
                if r.invocation is not None:
                    started_on[r.invocation] = (
                        r.deployment, latest.deployment if latest is not None else None)
            elif kind in ("identity.revoked", "identity.granted"):
                user, tool_name = r.data.get("user"), r.data.get("tool")
                if user is not None and tool_name is not None:
                    access[(str(user), str(tool_name))] = r
                    users_of_tool.setdefault(str(tool_name), set()).add(str(user))
            elif kind in ("tool.handoff", "turn.waiting"):
                if tc is not None:
                    handed.setdefault(tc, r)
            elif kind == "tool.rerun":
                reruns += 1
                if tc is not None:
                    handed.setdefault(tc, r)
                inv = attr(r, "invocation")
                dep = attr(r, "deployment")
                pinned_latest = None
                if inv is not None and inv in started_on:
                    dep = dep or started_on[inv][0]
                    pinned_latest = started_on[inv][1]
                if dep is None or latest is None:
                    unplaced += 1
                elif dep not in (latest.deployment, pinned_latest):
                    violations.append(Violation(
                        f"tool call {tc} re-ran on deployment {dep_name(dep)} at {at(r.time)} "
                        f"although {dep_name(str(latest.deployment))} was the latest since "
                        f"{at(latest.time)}: {latest.describe()}; {r.describe()}",
                        cite((latest, r)),
                    ))
                call_tool = tool_of.get(tc) if tc is not None else None
                rev = revocation(session or session_of.get(tc or ""), call_tool)
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
                rev = revocation(session or session_of.get(tc), call_tool)
                if rev is not None:
                    wait = handed[tc]
                    violations.append(Violation(
                        f"{r.data.get('effect', 'effect')} of tool call {tc} was delivered at "
                        f"{at(r.time)} although user {rev.data.get('user')} lost access to "
                        f"{call_tool} at {at(rev.time)}, during the wait handed off at "
                        f"{at(wait.time)}: {rev.describe()}; {r.describe()}",
                        cite((wait, rev, r)),
                    ))

        stats = {"reruns": float(reruns), "denied": float(denied), "unplaced": float(unplaced)}
        if unplaced and not violations:
            return Result(
                self.name, None, reached=True, stats=stats,
                note=f"{unplaced} of {reruns} re-runs name no deployment or invocation, so "
                     "whether they ran on the latest deployment cannot be judged",
            )
        return verdict(
            self.name, violations, reached=reruns > 0,
            note="" if reruns else "no tool was re-run after a hand-off", stats=stats,
        )
