"""no-code-error on hand-made histories: an attempt that fails on an error of Python's own
that means the code is wrong (NameError, AttributeError, TypeError, KeyError...) is a
violation, once per invocation and error class; the world's faults and the design's
rejections are not; a history whose engine reports no attempts is not judged. And on the
simulator: the reference passes, and the planted report that reads a stale epoch's fields
off every rejection is caught."""

from __future__ import annotations

from harness.adapters import load_adapter
from harness.checkers import CheckConfig, NoCodeError, Result
from harness.checkers.code import CODE_ERRORS
from harness.history import History, Record
from harness.run import RunOptions, run_schedule
from harness.schedules.generate import generate
from tests.planted import load

CONFIG = CheckConfig()


def created(h: History, inv: str, target: str = "doTurn/run", key: str = "s1") -> None:
    h.add("invocation.created", time=0, invocation=inv, data={"target": target, "key": key})


def attempt(h: History, t: float, inv: str = "inv1") -> Record:
    return h.add("attempt.started", time=t, invocation=inv, deployment="dep1",
                 data={"attempt": 1})


def failed(h: History, t: float, error_type: str, inv: str = "inv1") -> Record:
    return h.add("attempt.failed", time=t, invocation=inv,
                 data={"attempt": 1, "error": f"{error_type}: boom", "error_type": error_type,
                       "stale": False})


def check(h: History) -> Result:
    return NoCodeError().check(h, CONFIG)


def test_an_attempt_failing_on_a_code_error_is_a_violation_naming_it() -> None:
    h = History()
    created(h, "inv1")
    attempt(h, 0)
    bad = failed(h, 5, "AttributeError")
    r = check(h)
    assert r.valid is False
    assert r.witness(limit=1).startswith(
        "an attempt of inv1 (doTurn/run s1) failed at t=5s on AttributeError: boom: an error "
        "of the runtime's own code")
    assert r.violations[0].records == (bad.index,)


def test_every_retry_of_one_defect_is_one_violation_and_another_class_another() -> None:
    h = History()
    created(h, "inv1")
    for t in (0, 10, 20):
        attempt(h, t)
        failed(h, t + 1, "KeyError")
    attempt(h, 30)
    failed(h, 31, "TypeError")
    created(h, "inv2")
    attempt(h, 40, "inv2")
    failed(h, 41, "KeyError", "inv2")
    r = check(h)
    assert [v.message.split(" failed")[0] for v in r.violations] == [
        "an attempt of inv1 (doTurn/run s1)", "an attempt of inv1 (doTurn/run s1)",
        "an attempt of inv2 (doTurn/run s1)"]
    assert r.stats["attempts"] == 5 and r.stats["failed"] == 5


def test_the_worlds_faults_and_the_designs_rejections_pass() -> None:
    h = History()
    attempt(h, 0)
    for t, kind in enumerate(("StaleEpoch", "TransactionAborted", "LockTimeout",
                              "ServiceError", "ValueError", "TimeoutError", "OSError")):
        failed(h, t, kind)
    r = check(h)
    assert r.valid is True and r.reached
    assert not {"StaleEpoch", "ValueError", "OSError"} & CODE_ERRORS


def test_a_history_without_attempts_is_not_judged() -> None:
    r = check(History())
    assert r.valid is True and not r.reached
    assert r.note == "the engine reported no attempts"


def test_the_reference_passes_and_the_planted_report_bug_is_caught() -> None:
    reference = load_adapter("reference")
    planted = load("rejection_report_reads_the_wrong_field")
    caught = 0
    for index in range(30):
        schedule = generate(1, index)
        options = RunOptions(save_history=False)
        ok = run_schedule(reference, schedule, options)
        assert {r.checker: r.valid for r in ok.results}["no-code-error"] is True
        bad = run_schedule(planted.ADAPTER, schedule, options)
        found = [r for r in bad.results if r.checker == "no-code-error" and r.valid is False]
        caught += bool(found)
        if found:
            assert "AttributeError" in found[0].violations[0].message
    assert caught > 0
