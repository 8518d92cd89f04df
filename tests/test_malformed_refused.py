"""malformed-refused and the malformed background request.

Pinned here: the scenario file's one-line errors for a malformed background request (exit
2); the runner sends one naming no call, whether or not a card is open, and records a
refusal by an error as its `fail` with the status the error carried; the simulator records a
terminal error's status on its invocation; and the rule, on hand-made histories (a refusal
of a malformed answer or background request says 400 or 422, read from the client's
refusal or from the request's invocation; no status, no judgement) and on the scenarios that
send them (58, 71), where the reference passes and the planted 500 is caught.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from contract.binding import TerminalError
from harness.adapters import load_adapter
from harness.checkers import CheckConfig, MalformedRefused, Result
from harness.cli import main
from harness.history import History, Record
from harness.outcome import SkippedStep, StepNote
from harness.run import RunOptions, _apply, run_schedule, status_of
from harness.schedules.model import Step
from harness.schedules.scenario_file import load_scenario
from tests.keep import KeepHistory
from tests.planted import load

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "scenarios" / "58-a-malformed-answer-is-never-applied.toml"
BACKGROUND = ROOT / "scenarios" / "71-requests-that-name-no-id-are-refused.toml"
CONFIG = CheckConfig()
MESSAGE = '[[step]]\nat = "0s"\ndo = "message"\nsession = "s1"\ntools = ["send_email"]\n'
ASIDE = '[[step]]\nat = "1m"\ndo = "background"\nsession = "s1"\n'


# ---------------------------------------------------------------- the scenario file

@pytest.mark.parametrize(("body", "expected"), [
    (ASIDE + 'malformed = "yes"\n',
     "field 'step[1].malformed': expected true or false, got 'yes'; write malformed = true"),
    (ASIDE + 'malformed = true\nof = "s2"\n',
     "field 'step[1].of': a malformed background request names no call, so it has no owner"),
])
def test_a_bad_malformed_background_request_is_one_line_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, expected: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(MESSAGE + body, encoding="utf-8")
    assert main(["run", "--scenarios", str(path), "--schedules", "0", "--quiet",
                 "--report-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_malformed_false_reads_as_without_it(tmp_path: Path) -> None:
    path = tmp_path / "ok.toml"
    path.write_text(MESSAGE + ASIDE + "malformed = false\n", encoding="utf-8")
    (_, step) = load_scenario(path).steps
    assert step.get("malformed") is None


# ---------------------------------------------------------------- the runner and the engine

class _Refusing:
    """A runtime whose background request raises, as an HTTP client's error does."""

    def __init__(self, error: Exception | None) -> None:
        self.error = error
        self.sent: list[tuple[str, Any]] = []
        self.world = SimpleNamespace(cards=SimpleNamespace(open_cards=lambda session: []))

    def background(self, session: str, tool_call: Any) -> None:
        self.sent.append((session, tool_call))
        if self.error is not None:
            raise self.error


def _send(runtime: _Refusing) -> tuple[History, list[StepNote]]:
    h, notes = History(), []
    step = Step(60.0, "background", (("session", "s1"), ("malformed", True)))
    skipped: list[SkippedStep] = []
    _apply(runtime, step, h, skipped, {"s1": 1}, notes=notes, number=2)  # type: ignore[arg-type]
    assert not skipped
    return h, notes


def test_the_runner_sends_a_malformed_background_request_naming_no_call() -> None:
    runtime = _Refusing(None)
    h, notes = _send(runtime)
    assert runtime.sent == [("s1", None)]  # no open card needed, and no call named
    assert [(r.kind, r.type, r.data) for r in h.records] == [
        ("op.background", "invoke", {"malformed": True}), ("op.background", "ok", {})]
    assert notes == []


def test_a_refusal_by_an_error_is_the_requests_fail_with_its_status() -> None:
    response = SimpleNamespace(status_code=422)
    h, notes = _send(_Refusing(type("HTTPStatusError", (Exception,), {})("bad request")))
    assert h.records[-1].data == {"reason": "HTTPStatusError: bad request"}
    err = Exception("unprocessable")
    err.response = response  # type: ignore[attr-defined]
    h, notes = _send(_Refusing(err))
    assert h.records[-1].type == "fail"
    assert h.records[-1].data == {"reason": "Exception: unprocessable", "status": 422}
    assert "refused by the runtime: Exception: unprocessable" in notes[0].text


def test_status_of_reads_a_terminal_error_or_a_response() -> None:
    assert status_of(TerminalError("x", 409)) == 409
    assert status_of(TerminalError("x")) == 500
    err = RuntimeError("x")
    err.response = SimpleNamespace(status_code=400)  # type: ignore[attr-defined]
    assert status_of(err) == 400
    assert status_of(RuntimeError("x")) is None
    odd = RuntimeError("x")
    odd.status = True  # type: ignore[attr-defined]
    assert status_of(odd) is None


def test_the_simulator_records_a_terminal_errors_status_and_the_reference_passes() -> None:
    keep = KeepHistory()
    outcome = run_schedule(load_adapter("reference"), load_scenario(BACKGROUND),
                           RunOptions(save_history=False, checkers=(keep,)))
    assert outcome.error is None and not outcome.failed
    assert keep.history is not None
    refusals = [(r.data["target"], r.type, r.data["status"]) for r in keep.history.records
                if r.kind == "invocation.completed" and r.type == "fail"]
    assert refusals == [("Controller/onMessage", "fail", 400),
                        ("Controller/background", "fail", 400),
                        ("Controller/background", "fail", 400)]
    result = MalformedRefused().check(keep.history, CONFIG)
    assert result.valid is True and result.stats == {"malformed": 3.0, "judged": 3.0}
    # Nothing changed: one turn (none for the message without an id), and the call, approved
    # an hour in, sent its email once.
    records = keep.history.records
    assert [r.turn for r in records if r.kind == "turn.started"] == ["s1.turn1"]
    assert [r.data["outcome"] for r in records if r.kind == "tool.result"] == ["answered"]
    assert len([r for r in records if r.kind == "effect.delivered"
                and r.data["effect"] == "email"]) == 1


def test_the_planted_500_is_caught_on_the_malformed_answers() -> None:
    planted = load("malformed_requests_refused_as_failures").ADAPTER
    outcome = run_schedule(planted, load_scenario(ANSWERS), RunOptions(save_history=False))
    [result] = [r for r in outcome.results if r.checker == "malformed-refused"]
    assert result.valid is False
    assert ("the malformed answer 'yes' of s3 sent at t=1s was refused with status 500, not "
            "as the client's error (400 or 422)") in result.witness(limit=1)
    assert {r.checker for r in outcome.results if r.valid is False} == {"malformed-refused"}


# ---------------------------------------------------------------- the rule

def _request(h: History, t: float, kind: str = "op.answer", **data: Any) -> Record:
    return h.add(kind, "invoke", time=t, session="s1", data=data or None)


def _invocation(h: History, t: float, inv: str, status: int | None,
                ok: bool = False) -> None:
    h.add("invocation.created", time=t, invocation=inv, data={"target": "X/y", "key": "s1"})
    h.add("invocation.completed", "ok" if ok else "fail", time=t, invocation=inv,
          deployment="dep1", data={"target": "X/y", **(
              {} if ok else {"error": "no", "status": status})})


def check(h: History) -> Result:
    return MalformedRefused().check(h, CONFIG)


def test_a_refusal_read_from_the_requests_invocation() -> None:
    for status, valid in ((400, True), (422, True), (500, False), (409, False), (200, False)):
        h = History()
        _request(h, 1, decision="maybe", malformed=True)
        h.add("invocation.created", time=1, invocation="inv7",
              data={"target": "PendingToolCall/answer", "key": "s1.turn1.t1"})
        h.add("op.answer", "ok", time=1, session="s1")
        h.add("invocation.created", time=1, invocation="inv8", data={"target": "Other/x"})
        h.add("invocation.completed", "fail", time=2, invocation="inv8", deployment="dep1",
              data={"error": "unrelated", "status": 500})
        h.add("invocation.completed", "fail", time=2, invocation="inv7", deployment="dep1",
              data={"error": "bad answer", "status": status})
        r = check(h)
        assert r.valid is valid, status
        if not valid:
            assert r.witness(limit=1).startswith(
                f"the malformed answer 'maybe' of s1 sent at t=1s was refused with status "
                f"{status}")


def test_a_refusal_the_client_saw_and_a_decision_that_is_malformed_by_itself() -> None:
    h = History()
    _request(h, 1, decision="Approve")  # malformed by its decision alone
    h.add("op.answer", "fail", time=1, session="s1", data={"reason": "x", "status": 403})
    _request(h, 2, kind="op.background", malformed=True)
    h.add("op.background", "fail", time=2, session="s1", data={"reason": "x", "status": 400})
    r = check(h)
    assert [v.message.split(" was refused")[0] for v in r.violations] == [
        "the malformed answer 'Approve' of s1 sent at t=1s"]
    assert r.stats == {"malformed": 2.0, "judged": 2.0}


def test_a_well_formed_request_an_accepted_one_or_one_without_status_is_not_judged() -> None:
    h = History()
    _request(h, 1, decision="approve")
    _invocation(h, 1, "inv1", 500)
    h.add("op.answer", "ok", time=1, session="s1")
    _request(h, 2, kind="op.background", malformed=True)
    _invocation(h, 2, "inv2", None, ok=True)
    h.add("op.background", "ok", time=2, session="s1")
    _request(h, 3, decision="maybe", malformed=True)
    h.add("op.answer", "fail", time=3, session="s1", data={"reason": "refused"})
    r = check(h)
    assert r.valid is True and not r.reached
    assert r.stats == {"malformed": 2.0, "judged": 0.0}
    assert check(History()).note == "no malformed request was sent"
