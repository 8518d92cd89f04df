"""pinning-bound: waits do not keep deployments alive.

An invocation is pinned to the deployment that started it until it completes; a suspended
invocation keeps that deployment from being retired. The design bounds every suspension by
`hand_off_after` (after which the wait moves into state), so every superseded deployment
drains within that bound too.

Two rules, both against `hand_off_after` plus the tolerance at that bound
(`CheckConfig.slack("hand_off")`):

- every suspended interval (`invocation.suspended` until `invocation.resumed`, `.completed` or
  the end of the run) is within the bound;
- every superseded deployment drains within the bound, unless what keeps it is a fault (a
  paused or crashed host, a failing provider) rather than a suspended invocation.

A third rule takes "drained" at its word: a deployment recorded as drained (or retired)
while an invocation is still pinned to it (its pin lasts past the record by more than the
tolerance) was cut off from that invocation, which can no longer resume or replay there.

Time during which a host was paused or crashed is not counted against either bound: a
suspended caller may be waiting on a callee stuck on a paused host, and that is the fault's
doing, not a wait on a person. All hosts count, not just the deployment's own, because the
callee may run on a newer deployment.

A hand-off that says how long its call waited in-call (`tool.handoff` `waited`) tells the
truth: at least the time since the call's card was shown (its latest `tool.awaiting` before
the hand-off), less the tolerance, and never longer than the run had lasted. A runtime that
does not report it is not judged on it.
"""

from __future__ import annotations

from typing import final

from contract.records import JUDGED_ON, Reading
from harness.checkers._common import at, guarded, merge, overlap
from harness.checkers.base import (
    CheckConfig,
    Result,
    Violation,
    cite,
    limit_at,
    verdict,
)
from harness.checkers.model import Pinned, Suspension, model_of
from harness.history import History, Record, fmt_duration


@final
class PinningBound:
    name: str = "pinning-bound"
    # The records (and fields) this checker reads: docs/events.md, from contract.records.
    judged_on: tuple[Reading, ...] = JUDGED_ON["pinning-bound"]
    description: str = (
        "No invocation stays suspended, and no superseded deployment stays pinned, longer "
        "than the hand-off bound; no deployment is retired while something is pinned to it."
    )

    # It reads the run's model (harness.checkers.model: the pins, the deployments, the
    # faults), built once over the whole history: no `reads`, so it is given the history.

    def check(self, history: History, config: CheckConfig) -> Result:
        return guarded(self.name, self._check, history, config)

    def _check(self, history: History, config: CheckConfig) -> Result:
        model = model_of(history)
        invocations = model.pins
        deployments = model.deployments
        superseded, drained = deployments.superseded, deployments.drained
        end_time = model.end
        faults = model.faults
        # A call a world service held (a slow answer, a timeout) blocks its caller as a
        # paused host does: not a wait of the design, so not counted against the bound.
        host_down = merge([*faults.downtime, *faults.held])
        provider = list(faults.provider)
        bound = config.hand_off_after + config.slack("hand_off")
        limit = limit_at(config, "hand_off")
        violations: list[Violation] = []  # deployments first: the headline
        suspended_too_long: list[Violation] = []

        dep_name = deployments.name

        def span(s: Suspension) -> tuple[float, float]:
            return s.start.time, (s.end.time if s.end is not None else end_time)

        def target(inv: Pinned) -> str:
            return inv.name

        def suspended_text(inv: Pinned, s: Suspension) -> str:
            t0, t1 = span(s)
            until = (f"to {at(t1)}" if s.end is not None
                     else f"until the run ended at {at(t1)}")
            return f"invocation {target(inv)} suspended from {at(t0)} {until}"

        max_suspended = 0.0
        suspended_count = 0
        for inv in invocations.values():
            for s in inv.suspensions:
                suspended_count += 1
                t0, t1 = span(s)
                length = t1 - t0
                max_suspended = max(max_suspended, length)
                down = overlap(host_down, t0, t1)
                if length - down <= bound:
                    continue
                excuse = f", not counting {fmt_duration(down)} of host downtime" if down else ""
                suspended_too_long.append(Violation(
                    f"{suspended_text(inv, s)} on deployment {dep_name(s.deployment)}: "
                    f"{fmt_duration(length)} suspended (limit {limit}{excuse})",
                    cite(x for x in (s.start, s.end) if x is not None),
                ))

        max_pinned = 0.0
        excused: list[str] = []
        for dep, sup in superseded.items():
            drain = drained.get(dep)
            start = sup.time
            stop = drain.time if drain is not None else end_time
            pinned = stop - start
            max_pinned = max(max_pinned, pinned)
            down = overlap(host_down, start, stop)
            if pinned - down <= bound:
                continue
            deadline = start + bound
            keepers = [
                (inv, pin) for inv in invocations.values() for pin in inv.pins
                if pin.deployment == dep and pin.since <= deadline
                and (pin.until is None or pin.until > deadline)
            ]
            # (suspended time while pinning it, number of waits, invocation, longest wait)
            waits: list[tuple[float, int, Pinned, Suspension]] = []
            for inv, _pin in keepers:
                best: tuple[float, Suspension] | None = None
                total, count = 0.0, 0
                for s in inv.suspensions:
                    t0, t1 = span(s)
                    covered = min(t1, stop) - max(t0, start)
                    if covered <= 0:
                        continue
                    total, count = total + covered, count + 1
                    if best is None or covered > best[0]:
                        best = (covered, s)
                if best is not None:
                    waits.append((total, count, inv, best[1]))
            still = "" if drain is not None else " (still pinned when the run ended)"
            head = (f"deployment {dep_name(dep)} stayed pinned {fmt_duration(pinned)}{still} "
                    f"after it was superseded at {at(start)}")
            evidence: list[Record] = [sup] + ([drain] if drain is not None else [])
            if waits:
                waits.sort(key=lambda w: -w[0])
                total, count, inv, s = waits[0]
                several = (f"; it waited {count} times, {fmt_duration(total)} in all, while "
                           f"pinning {dep}" if count > 1 else "")
                more = (f"; and {len(waits) - 1} more suspended invocation(s)"
                        if len(waits) > 1 else "")
                evidence += [x for x in (s.start, s.end) if x is not None]
                violations.append(Violation(
                    f"{head}: {suspended_text(inv, s)} (limit {limit}){several}{more}",
                    cite(evidence)))
                continue
            dep_hosts = {h for h, d in faults.host_deployment.items() if d == dep}
            fault_time = (overlap(faults.downtime_of(dep_hosts), start, stop)
                          + overlap(provider, start, stop))
            if fault_time > 0:
                excused.append(f"{dep} pinned {fmt_duration(pinned)} by faults, not by a wait")
                continue
            if keepers:
                inv, pin = keepers[0]
                if inv.paused is not None:
                    state = (f"paused at {at(inv.paused.time)} "
                             f"({inv.paused.data.get('reason', 'no reason given')})")
                    evidence.append(inv.paused)
                else:
                    state = f"running since {at(pin.since)} and never completed"
                evidence.append(pin.start)
                more = f"; and {len(keepers) - 1} more" if len(keepers) > 1 else ""
                why = f"invocation {target(inv)} {state}{more}"
            else:
                why = "no invocation observed holding it"
            violations.append(Violation(f"{head} (limit {limit}): {why}", cite(evidence)))

        cut_off: list[Violation] = []
        for gone in deployments.retirements:
            gone_from = gone.deployment
            word = "retired" if gone.kind == "deployment.retired" else "drained"
            holders = [
                (inv, pin) for inv in invocations.values() for pin in inv.pins
                if pin.deployment == gone_from and pin.since <= gone.time
                and (pin.until is None or pin.until > gone.time + config.tolerance)
            ]
            if not holders:
                continue
            inv, pin = holders[0]
            until = (f"until {at(pin.until)}" if pin.until is not None
                     else "until the run ended")
            more = f"; and {len(holders) - 1} more" if len(holders) > 1 else ""
            cut_off.append(Violation(
                f"deployment {dep_name(gone_from)} was recorded {word} at {at(gone.time)} while "
                f"invocation {target(inv)} was still pinned to it (since {at(pin.since)}, "
                f"{until}): it was cut off from the deployment it must resume on{more}",
                cite((gone, pin.start)),
            ))

        violations = cut_off + violations + suspended_too_long + _waited(history, config)
        reached = (deployments.pinned_when_superseded > 0 or max_suspended >= config.hand_off_after
                   or bool(violations))
        return verdict(
            self.name, violations,
            reached=reached,
            note="; ".join(excused) if excused else (
                "" if reached else "no deployment was superseded while an invocation was "
                "pinned to it, and no invocation stayed suspended as long as the hand-off"),
            stats={"max_pinned": max_pinned, "max_suspended": max_suspended,
                   "superseded": float(len(superseded)),
                   "suspensions": float(suspended_count)},
        )


def _waited(history: History, config: CheckConfig) -> list[Violation]:
    """Each hand-off whose reported in-call wait (`waited`) its card's time contradicts."""
    found: list[Violation] = []
    shown: dict[str, Record] = {}  # tool call -> its latest card
    for r in history.of_kind("tool.awaiting", "tool.handoff"):
        if r.tool_call is None:
            continue
        if r.kind == "tool.awaiting":
            shown[r.tool_call] = r
            continue
        waited = r.data.get("waited")
        if not isinstance(waited, int | float):
            continue
        card = shown.get(r.tool_call)
        if waited > r.time + config.tolerance:
            what = f"longer than the run had lasted ({fmt_duration(r.time)})"
        elif card is not None and waited < r.time - card.time - config.tolerance:
            what = (f"less than the {fmt_duration(r.time - card.time)} since its card was "
                    f"shown at {at(card.time)}")
        else:
            continue
        found.append(Violation(
            f"the hand-off of {r.tool_call} at {at(r.time)} says the call waited "
            f"{fmt_duration(float(waited))} in-call, {what}: {r.describe()}",
            cite(x for x in (card, r) if x is not None)))
    return found
