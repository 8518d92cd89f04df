"""fencing: only the current owner writes a thread's log, and the log is linear.

Two sources, checked against each other:

- as the run goes, `threadlog.assigned` (the control row got a new epoch) and
  `threadlog.appended` (the store accepted an entry): an accepted append must carry the epoch
  that was current then, i.e. the latest assignment observed for that session;
- at the end, the store itself (`threadlog.committed`, one per entry; `threadlog.owner`, the
  final control row): seqs run 1..n without gap or duplicate, epochs never go down along the
  log (an older epoch after a newer one is a stale write that landed), every epoch was
  assigned, to the owner that wrote under it, and every accepted append is there unchanged.

Rejected appends (`threadlog.rejected`) are the fence working, not a violation. A stale-epoch
rejection that names whom the fence found in the writer's place (`current_epoch`,
`current_owner`) tells the truth: an epoch assigned in the run (to that owner), which is not
the writer's own. A rejection naming the writer itself refused the thread's owner; one naming
no epoch, or one never assigned, sends whoever reads it after a thread that does not exist.

A lock timeout (`LockTimeout`, of an append or of taking ownership) whose store says the holder
had held the control row (`held_since`) for longer than its idle-in-transaction timeout
(`idle_timeout`) is a violation: the database ends a transaction idle that long (a host paused
while it held the row), so the fence's other half failed, and the session's writes waited on a
paused host for as long as it was away. Every refusal is judged, retries included (they share
an event id).

A runtime that reports its log's appends (`threadlog.appended`) reports its rejections too:
an attempt the engine saw fail on a rejection (`attempt.failed` whose `error_type` is
`StaleEpoch`, `TransactionAborted` or `LockTimeout`; the simulator records it) of a kind the
runtime never reported hid the fence at work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, final

from contract.records import JUDGED_ON, Reading
from contract.threadlog import REJECTIONS
from harness.checkers._common import Dedup, at, attr, guarded
from harness.checkers.base import CheckConfig, Result, Violation, cite, verdict
from harness.history import History, Record

_KINDS = frozenset(
    {"threadlog.assigned", "threadlog.appended", "threadlog.rejected", "threadlog.committed",
     "threadlog.owner", "attempt.failed"}
)


@dataclass(slots=True)
class _Thread:
    epoch: int | None = None
    current: Record | None = None
    assigned: dict[int, Record] = field(default_factory=dict)
    appended: dict[int, Record] = field(default_factory=dict)
    committed: list[tuple[int, int, Record]] = field(default_factory=list)
    stale: list[Record] = field(default_factory=list)  # StaleEpoch rejections naming the current
    final: Record | None = None


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


@final
class Fencing:
    name: str = "fencing"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["fencing"]
    description: str = (
        "Every accepted thread-log write carries the owner's current epoch, and each "
        "thread's committed log is one linear sequence with no gap, duplicate or stale write."
    )

    # The record kinds `_check` reads (every other kind it skips): run_checkers gives it
    # only these (harness.checkers.base.dispatch).
    reads: frozenset[str] = _KINDS

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        threads: dict[str, _Thread] = {}
        dedup = Dedup()
        violations: list[Violation] = []
        appended = rejected = committed = 0
        failed_on: dict[str, Record] = {}  # rejection -> first attempt the engine saw fail on it
        reported: set[str] = set()  # rejections the runtime reported
        past_idle: dict[str, Violation] = {}  # session -> its first refusal past the idle bound
        for r in history.records:
            kind = r.kind
            if kind == "threadlog.rejected" and r.data.get("reason") == "LockTimeout":
                # Before dedup: a refused writer's retries report under one event id, and a
                # later one may be the refusal past the bound.
                found = _held_past_idle(r, config.latency)
                if found is not None and r.session:
                    past_idle.setdefault(r.session, found)
            if kind not in _KINDS or not dedup.fresh(r):
                continue
            if kind == "attempt.failed":
                reason = r.data.get("error_type")
                if reason in REJECTIONS:
                    failed_on.setdefault(str(reason), r)
                continue
            if kind == "threadlog.rejected":
                reported.add(str(r.data.get("reason")))
            sid = attr(r, "session")
            if sid is None:
                continue
            t = threads.get(sid)
            if t is None:
                t = threads[sid] = _Thread()
            epoch = _int(attr(r, "epoch"))
            if kind == "threadlog.assigned":
                if epoch is None:
                    continue
                t.assigned.setdefault(epoch, r)
                # Epochs only go up; an older assignment seen late changes nothing.
                if t.epoch is None or epoch > t.epoch:
                    t.epoch, t.current = epoch, r
            elif kind == "threadlog.appended":
                seq = _int(attr(r, "seq"))
                if seq is None or epoch is None:
                    continue
                first = t.appended.get(seq)
                if first is not None:
                    if _int(attr(first, "epoch")) != epoch:
                        violations.append(Violation(
                            f"session {sid}: seq {seq} was accepted twice, under epoch "
                            f"{attr(first, 'epoch')} and under epoch {epoch}: the log forked: "
                            f"{first.describe()}; {r.describe()}",
                            cite((first, r)),
                        ))
                    continue
                appended += 1
                t.appended[seq] = r
                if t.epoch is None or t.current is None or epoch == t.epoch:
                    continue
                if epoch < t.epoch and _before_takeover(t, epoch, seq):
                    continue
                owner = t.current.data.get("owner")
                whose = f" (owner {owner})" if owner is not None else ""
                if epoch < t.epoch:
                    what = (f"although epoch {t.epoch}{whose} was current since "
                            f"{at(t.current.time)}: a stale write landed")
                else:
                    what = f"an epoch never assigned (the current one is {t.epoch}{whose})"
                violations.append(Violation(
                    f"session {sid}: append seq {seq} with epoch {epoch} was accepted at "
                    f"{at(r.time)}, {what}: {t.current.describe()}; {r.describe()}",
                    cite((t.current, r)),
                ))
            elif kind == "threadlog.rejected":
                rejected += 1
                if r.data.get("reason") == "StaleEpoch" and "current_epoch" in r.data:
                    t.stale.append(r)
            elif kind == "threadlog.committed":
                seq = _int(attr(r, "seq"))
                if seq is None or epoch is None:
                    continue
                committed += 1
                t.committed.append((seq, epoch, r))
            elif kind == "threadlog.owner":
                t.final = r

        for sid, t in threads.items():
            violations.extend(_check_log(sid, t))
            violations.extend(_check_rejections(sid, t))
        violations.extend(past_idle[sid] for sid in sorted(past_idle))
        if appended:
            violations.extend(_unreported(failed_on, reported))

        reassigned = sum(1 for t in threads.values() if len(t.assigned) > 1)
        reached = reassigned > 0 or rejected > 0 or bool(violations)
        return verdict(
            self.name, violations, reached=reached,
            note="" if reached else "no thread changed owner and no append was rejected",
            stats={"appended": float(appended), "rejected": float(rejected),
                   "committed": float(committed), "reassigned_threads": float(reassigned)},
        )


def _unreported(failed_on: dict[str, Record], reported: set[str]) -> list[Violation]:
    """A runtime that reports its thread log's appends reports its rejections too: the fence
    at work is seen only through them (the report's timeline, and the rules above). One the
    engine saw an attempt fail on, of a kind the runtime never reported, was hidden."""
    return [Violation(
        f"an attempt failed at {at(r.time)} on a thread-log rejection ({reason}), and the "
        f"runtime, which reports its log's appends, reported no {reason} rejection: "
        f"{r.describe()}",
        cite((r,)),
    ) for reason, r in sorted(failed_on.items()) if reason not in reported]


def _held_past_idle(r: Record, latency: float) -> Violation | None:
    """A writer refused the control row by a holder the database should have ended: one
    idle in its transaction for longer than the store's `idle_timeout`. The store says since
    when the holder held the row (`held_since`) and the bound (`idle_timeout`)."""
    since, bound = r.data.get("held_since"), r.data.get("idle_timeout")
    if not isinstance(since, (int, float)) or not isinstance(bound, (int, float)):
        return None  # a store that does not know (PostgreSQL does not say who holds the row)
    held = r.time - float(since)
    if held <= float(bound) + latency:
        return None  # PostgreSQL ends a transaction idle *longer* than the bound
    return Violation(
        f"session {r.session}: a write was refused the control row at {at(r.time)} by a "
        f"transaction holding it since {at(float(since))} ({held:g}s), longer than the "
        f"store's idle-in-transaction timeout of {float(bound):g}s: the database ends such "
        "a holder (a paused host), and the session's writes waited on it instead: "
        f"{r.describe()}",
        cite((r,)),
    )


def _before_takeover(t: _Thread, epoch: int, seq: int) -> bool:
    """Whether the store committed append `seq` (of `epoch`) before the next epoch was
    assigned: that assignment's `after_seq` (the last seq committed then, read under the
    control row's lock) reaches it. On a real engine the append's report may arrive after
    the takeover's; the store's order, not the arrival order, says whether it was stale."""
    later = [e for e in t.assigned if e > epoch]
    if not later:
        return False
    after = t.assigned[min(later)].data.get("after_seq")
    return isinstance(after, int) and seq <= after


def _check_rejections(sid: str, t: _Thread) -> list[Violation]:
    """Each stale-epoch rejection whose named current epoch and owner the run contradicts."""
    out: list[Violation] = []
    for r in t.stale:
        epoch, owner = _int(attr(r, "epoch")), r.data.get("owner")
        current, holder = _int(r.data.get("current_epoch")), r.data.get("current_owner")
        grant = t.assigned.get(current) if current is not None else None
        granted_to = grant.data.get("owner") if grant is not None else None
        if current is None:
            if not t.assigned:
                continue  # no thread was ever assigned: "none" is the truth
            what = f"names no current epoch, though epochs {sorted(t.assigned)} were assigned"
        elif grant is None:
            what = (f"names epoch {current} as current, which was never assigned "
                    f"(assigned: {sorted(t.assigned)})")
        elif granted_to is not None and "current_owner" in r.data and holder != granted_to:
            named = "no owner" if holder is None else f"{holder} as the owner"
            what = f"names {named} of epoch {current}, which was assigned to {granted_to}"
        elif current == epoch and (owner is None or holder is None or owner == holder):
            what = (f"names the writer's own epoch {epoch} as current: the thread's owner "
                    f"was refused")
        else:
            continue
        out.append(Violation(
            f"session {sid}: a stale-epoch rejection of an append at epoch {epoch} {what}: "
            f"{r.describe()}",
            cite(x for x in (grant, r) if x is not None),
        ))
    return out


def _check_log(sid: str, t: _Thread) -> list[Violation]:
    out: list[Violation] = []
    if not t.committed:
        return out
    entries = sorted(t.committed, key=lambda e: (e[0], e[2].index))
    expected = 1
    newest: tuple[int, Record] | None = None
    final_epoch = _int(attr(t.final, "epoch")) if t.final is not None else None
    seen: dict[int, Record] = {}
    for seq, epoch, r in entries:
        if seq in seen:
            out.append(Violation(
                f"session {sid}: the committed log holds seq {seq} twice: "
                f"{seen[seq].describe()}; {r.describe()}",
                cite((seen[seq], r)),
            ))
            continue
        seen[seq] = r
        if seq != expected:
            missing = f"{expected}" if seq == expected + 1 else f"{expected}..{seq - 1}"
            out.append(Violation(
                f"session {sid}: the committed log jumps to seq {seq}; seq {missing} is "
                f"missing: {r.describe()}",
                cite((r,)),
            ))
        expected = seq + 1
        if newest is not None and epoch < newest[0]:
            out.append(Violation(
                f"session {sid}: committed seq {seq} carries epoch {epoch}, after seq "
                f"{attr(newest[1], 'seq')} was written under the newer epoch {newest[0]}: "
                f"a stale write landed: {newest[1].describe()}; {r.describe()}",
                cite((newest[1], r)),
            ))
        elif newest is None or epoch > newest[0]:
            newest = (epoch, r)
        grant = t.assigned.get(epoch)
        if t.assigned and grant is None:
            out.append(Violation(
                f"session {sid}: committed seq {seq} carries epoch {epoch}, which was never "
                f"assigned (assigned: {sorted(t.assigned)}): {r.describe()}",
                cite((r,)),
            ))
        elif grant is not None:
            owner, writer = grant.data.get("owner"), r.data.get("owner")
            if owner is not None and writer is not None and owner != writer:
                out.append(Violation(
                    f"session {sid}: committed seq {seq} was written by {writer} under epoch "
                    f"{epoch}, which was assigned to {owner}: {grant.describe()}; "
                    f"{r.describe()}",
                    cite((grant, r)),
                ))
        if final_epoch is not None and t.final is not None and epoch > final_epoch:
            out.append(Violation(
                f"session {sid}: committed seq {seq} carries epoch {epoch}, above the final "
                f"epoch {final_epoch} of the control row: {t.final.describe()}; "
                f"{r.describe()}",
                cite((t.final, r)),
            ))
        accepted = t.appended.get(seq)
        if accepted is not None and _int(attr(accepted, "epoch")) != epoch:
            out.append(Violation(
                f"session {sid}: seq {seq} was accepted under epoch {attr(accepted, 'epoch')} "
                f"but the committed log has epoch {epoch} there: the log was rewritten: "
                f"{accepted.describe()}; {r.describe()}",
                cite((accepted, r)),
            ))
    for seq, accepted in t.appended.items():
        if seq not in seen:
            out.append(Violation(
                f"session {sid}: append seq {seq} was accepted but is missing from the "
                f"committed log: {accepted.describe()}",
                cite((accepted,)),
            ))
    return out
