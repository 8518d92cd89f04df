"""malformed-refused: a malformed request is refused as the client's error.

A broken or hostile client sends requests the runtime's API does not accept: a message that
names no id, an answer whose decision is neither approve nor deny, a background request that
names no call (the runner's `malformed` steps). Whether such a request may change anything is
judged where it would act (`answer-fate`: a malformed answer is never applied). This rule
judges what the client is told: a refusal says the request was wrong, with `400 Bad Request`
or `422 Unprocessable Content`. Any other status tells the client something false: a 5xx
that the runtime failed (a client retries it, forever), a 401 or 403 that it lacks a right, a
404 that the session or call does not exist, a 409 that it conflicts with the state; and a
status outside 4xx is not a refusal at all.

The status is read where the history has one: the refusal the client saw (`op.message`,
`op.answer` or `op.background` `fail`, `status`: the runner records the status the adapter's
error carried), or the request's invocation (an `invocation.created` between the request's
`invoke` and its `ok`) that failed terminally with a status (`invocation.completed` `fail`,
`status`: the simulator records a terminal error's code). A refusal with no status anywhere
is not judged, and neither is a malformed request the runtime accepted (it then answers for
what it did with it elsewhere).
"""

from __future__ import annotations

from typing import Final, final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import Dedup, at, guarded, malformed_request
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.history import History, Record

# What a refusal of a request malformed by its client says: the request was wrong.
CLIENT_ERROR: Final[frozenset[int]] = frozenset({400, 422})
_REQUESTS: Final = frozenset({"op.message", "op.answer", "op.background"})
_KINDS: Final = _REQUESTS | {"invocation.created", "invocation.completed"}


@final
class MalformedRefused:
    name: str = "malformed-refused"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["malformed-refused"]
    description: str = (
        "A malformed request (a message naming no id, an answer neither approve nor deny, a "
        "background request naming no call) is refused as the client's error: 400 or 422, "
        "where a status is seen."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch).
    reads: frozenset[str] = _KINDS

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        dedup = Dedup()
        sending: dict[tuple[str, str | None], Record] = {}  # (kind, session) -> its invoke
        requests: dict[str, Record] = {}  # invocation -> the malformed request it runs
        sent = judged = 0
        violations: list[Violation] = []

        def judge(request: Record, status: object, refusal: Record) -> None:
            nonlocal judged
            if not isinstance(status, int) or isinstance(status, bool):
                return
            judged += 1
            if status in CLIENT_ERROR:
                return
            what, detail = {
                "op.message": ("message", " naming no id"),
                "op.answer": ("answer", f" {request.data.get('decision')!r}"),
            }.get(request.kind, ("background request", " naming no call"))
            violations.append(Violation(
                f"the malformed {what}{detail} of {request.session} sent at "
                f"{at(request.time)} was refused with status {status}, not as the client's "
                f"error (400 or 422): {refusal.describe()}",
                cite((request, refusal)),
            ))

        for r in history.records:
            if r.kind not in _KINDS or not dedup.fresh(r):
                continue
            if r.kind in _REQUESTS:
                key = (r.kind, r.session)
                if r.type == "invoke":
                    if malformed_request(r):
                        sent += 1
                        sending[key] = r
                    else:
                        sending.pop(key, None)
                    continue
                request = sending.pop(key, None)
                if request is not None and r.type == "fail":
                    judge(request, r.data.get("status"), r)
            elif r.kind == "invocation.created":
                for request in sending.values():
                    if r.invocation:
                        requests[r.invocation] = request
            elif r.type == "fail" and r.invocation in requests:
                judge(requests.pop(r.invocation), r.data.get("status"), r)
        if not sent:
            return Result(self.name, True, reached=False, note="no malformed request was sent")
        return verdict(
            self.name, violations, reached=judged > 0,
            note="" if judged else "no refusal of a malformed request said its status",
            stats={"malformed": float(sent), "judged": float(judged)},
        )

