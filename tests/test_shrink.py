"""Shrinking a failing schedule (`harness.schedules.shrink`) on predicates whose minimal
failing schedules are known, so that what is pinned is exact: irrelevant steps go, no single
step of the result can be deleted, times and parameters simplify, the same input shrinks to
the same output, and a deadline returns the smallest failing schedule found so far."""

from __future__ import annotations

from itertools import count

from harness.schedules.generate import Size, generate
from harness.schedules.model import Schedule, Step
from harness.schedules.shrink import shrink


def _emails_then_approved(schedule: Schedule) -> bool:
    """Fails when a message with send_email is followed, later, by an approval."""
    sent = [s.at for s in schedule.steps
            if s.action == "message" and "send_email" in s.get("tools", [])]
    return bool(sent) and any(s.action == "answer" and s.get("decision") == "approve"
                              and s.at > min(sent) for s in schedule.steps)


def _big() -> Schedule:
    # A generated schedule (many irrelevant steps) with the failing pair put in.
    base = generate(3, 0, Size())
    steps = (*base.steps,
             Step(7000.0, "message", (("session", "s9"), ("text", "x"),
                                      ("tools", ["lookup", "send_email"]), ("user", "alice"))),
             Step(90000.0, "answer", (("session", "s9"), ("decision", "approve"),
                                      ("user", "alice"))))
    return Schedule(base.name, tuple(sorted(steps, key=lambda s: s.at)), seed=base.seed,
                    hosts=2, source="generated")


def test_shrinks_to_the_failing_pair_with_simpler_times_and_tools() -> None:
    big = _big()
    assert len(big.steps) > 10 and _emails_then_approved(big)
    result = shrink(big, _emails_then_approved)
    assert result.complete
    minimal = result.schedule
    assert _emails_then_approved(minimal)
    assert [s.action for s in minimal.steps] == ["message", "answer"]
    message, answer = minimal.steps
    # Simplified: the message at 0 with only the tool that matters, the answer at the
    # earliest simple time that still comes after it, the run seed 0.
    assert message.at == 0.0 and message.get("tools") == ["send_email"]
    assert 0.0 < answer.at <= 60.0
    assert minimal.seed == 0 and minimal.name == "generated-0"
    # 1-minimal: no single step can be deleted.
    for i in range(len(minimal.steps)):
        rest = minimal.steps[:i] + minimal.steps[i + 1:]
        assert not _emails_then_approved(Schedule(minimal.name, rest))


def test_the_same_schedule_shrinks_to_the_same_minimal_one() -> None:
    big = _big()
    assert shrink(big, _emails_then_approved) == shrink(big, _emails_then_approved)


def test_only_candidates_that_fail_are_kept() -> None:
    """The predicate decides: a step it needs is never deleted (a seed it needs is kept)."""
    big = _big()

    def needs_seed(schedule: Schedule) -> bool:
        return schedule.seed == big.seed and _emails_then_approved(schedule)

    minimal = shrink(big, needs_seed).schedule
    assert minimal.seed == big.seed and len(minimal.steps) == 2


def test_a_deadline_returns_the_smallest_failing_schedule_so_far() -> None:
    big = _big()
    ticks = count()

    def clock() -> float:
        return float(next(ticks))

    # The clock passes the deadline halfway through: shrinking stops between two runs.
    full = shrink(big, _emails_then_approved)
    assert full.runs > 6
    result = shrink(big, _emails_then_approved, deadline=float(full.runs // 2), clock=clock)
    assert not result.complete
    assert result.runs <= full.runs // 2 + 1
    assert _emails_then_approved(result.schedule)
    assert len(full.schedule.steps) <= len(result.schedule.steps) < len(big.steps)


def test_a_service_fault_shrinks_to_the_simplest_fault_that_still_fails() -> None:
    def fails(schedule: Schedule) -> bool:
        # Any fault of the payments service that did not do the work fails the predicate.
        return any(s.action == "service-fault" and s.get("service") == "payments"
                   and s.get("fault") in ("500_before", "429", "200_error")
                   for s in schedule.steps)

    big = Schedule("generated-7", (
        Step(60.0, "service-fault", (("service", "email"), ("fault", "slow"), ("times", 1))),
        Step(120.0, "service-fault", (("service", "payments"), ("fault", "200_error"),
                                      ("times", 3))),
    ), seed=7)
    minimal = shrink(big, fails).schedule
    assert minimal.steps == (Step(0.0, "service-fault", (("service", "payments"),
                                                         ("fault", "500_before"),
                                                         ("times", 1))),)
