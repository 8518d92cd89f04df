"""Answers a real client can send besides answering the open card: one naming its call before
the card exists (`call`), and one whose decision is neither approve nor deny (`malformed`).

Pinned here: the scenario file's one-line errors for them (exit 2), the runner's records of
them (an early answer is `op.answer` invoke/ok naming the call and its turn; a refusal by an
error is the answer's `fail`), and the rules that judge them (answer-fate: a malformed answer
is never applied and needs no fate, an answer naming a call that never came is not judged;
approval-asked: an answer given before the card is the person's word), on hand-made
histories and on the scenarios that exercise them (56, 58).
"""

from __future__ import annotations

import gc
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from contract.records import bad_value
from harness.adapters import load_adapter
from harness.checkers import AnswerFate, ApprovalAsked, CheckConfig, Result
from harness.checkers.base import Checker
from harness.cli import main
from harness.history import History, Record
from harness.outcome import SkippedStep, StepNote
from harness.run import RunOptions, _apply, run_schedule
from harness.schedules.model import Step
from harness.schedules.scenario_file import load_scenario
from tests.keep import KeepHistory

ROOT = Path(__file__).resolve().parents[1]
EARLY = ROOT / "scenarios" / "56-an-answer-before-its-card-is-kept-for-the-call.toml"
MALFORMED = ROOT / "scenarios" / "58-a-malformed-answer-is-never-applied.toml"
SECOND = ROOT / "scenarios" / "57-a-second-answer-before-the-card-is-refused.toml"
CONFIG = CheckConfig()  # liveness bound 1 h
HOUR = 3600.0
TC = "s1.turn1.t1"
MESSAGE = '[[step]]\nat = "0s"\ndo = "message"\nsession = "s1"\n'
ANSWER = '[[step]]\nat = "1s"\ndo = "answer"\nsession = "s1"\n'


# ---------------------------------------------------------------- the scenario file

BAD: list[tuple[str, str, str]] = [
    ("a call of another session", ANSWER + 'call = "s2.turn1.t1"\n',
     "field 'step[1].call': 's2.turn1.t1' is not a tool call of session 's1'; write call = "
     "\"s1.turn1.t1\""),
    ("a call that is no call id", ANSWER + 'call = "t1"\n',
     "field 'step[1].call': 't1' is not a tool call of session 's1'"),
    ("a call that names a turn only", ANSWER + 'call = "s1.turn1"\n',
     "field 'step[1].call': 's1.turn1' is not a tool call of session 's1'"),
    ("a call with no turn", ANSWER + 'call = "s1.t1"\n',
     "field 'step[1].call': 's1.t1' is not a tool call of session 's1'"),
    ("a call that is a number", ANSWER + "call = 3\n",
     "field 'step[1].call': expected a string, got 3"),
    ("a call on a background request", '[[step]]\nat = "1s"\ndo = "background"\n'
                                       'session = "s1"\ncall = "s1.turn1.t1"\n',
     "field 'step[1].call': 'background' takes no call"),
    ("a decision that is not one", ANSWER + 'decision = "maybe"\n',
     "field 'step[1].decision': unknown decision 'maybe'; use 'approve' or 'deny' (or "
     "malformed = true to send it as is)"),
    ("malformed that is not a boolean", ANSWER + 'decision = "maybe"\nmalformed = "yes"\n',
     "field 'step[1].malformed': expected true or false, got 'yes'"),
    ("malformed with a well-formed decision", ANSWER + "malformed = true\n",
     "field 'step[1].decision': 'approve' with malformed = true; write a decision that is "
     "neither 'approve' nor 'deny'"),
    ("malformed with a decision that is no string", ANSWER + "decision = 1\n"
                                                             "malformed = true\n",
     "field 'step[1].decision': expected a string, got 1"),
    ("malformed on a message with tools", MESSAGE.replace('"s1"', '"s2"')
     + 'tools = ["send_email"]\nmalformed = true\n',
     "field 'step[1].tools': a malformed message asks for no tools"),
    ("malformed on a cancel", '[[step]]\nat = "1s"\ndo = "cancel"\nsession = "s1"\n'
                              "malformed = true\n",
     "field 'step[1].malformed': 'cancel' takes no malformed"),
]


@pytest.mark.parametrize(("case", "step", "names"), BAD, ids=[c[0] for c in BAD])
def test_a_bad_named_or_malformed_answer_is_one_line_naming_the_field(
    case: str, step: str, names: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gc.collect()  # an earlier test's cut-short run warns when collected: not in our stderr
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "bad.toml"
    path.write_text(MESSAGE + step, encoding="utf-8")
    code = main(["run", "--quiet", "--scenarios", str(path), "--schedules", "0",
                 "--report-dir", str(tmp_path / "reports")])
    out, err = capsys.readouterr()
    assert code == 2
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"durable-chaos: error: {path}: {names}"), lines[0]
    assert not (tmp_path / "reports").exists()


def test_a_named_and_a_malformed_answer_read_and_print_back(tmp_path: Path) -> None:
    path = tmp_path / "ok.toml"
    # A call id is its turn's id and .tK: another runtime names its turns otherwise.
    path.write_text(MESSAGE + ANSWER + 'call = "s1.turn1.t1"\n' + ANSWER
                    + 'call = "s1.s1.m1.t12"\n' + ANSWER
                    + 'decision = "maybe"\nmalformed = true\n' + ANSWER
                    + "malformed = false\n", encoding="utf-8")
    schedule = load_scenario(path)
    named, other, malformed, plain = schedule.steps[1:]
    assert named.get("call") == TC and named.get("malformed") is None
    assert other.get("call") == "s1.s1.m1.t12"
    assert malformed.get("decision") == "maybe" and malformed.get("malformed") is True
    # `malformed = false` says nothing: the step is an answer of before, and prints as one.
    assert plain.params == (("session", "s1"), ("decision", "approve"), ("user", "alice"))
    again = tmp_path / "again.toml"
    again.write_text(schedule.to_toml(), encoding="utf-8")
    assert load_scenario(again).steps == schedule.steps


# ---------------------------------------------------------------- the runner


def _run(path: Path) -> tuple[History, dict[str, Result]]:
    keep = KeepHistory()
    checkers: tuple[Checker, ...] = (keep, AnswerFate(), ApprovalAsked())
    outcome = run_schedule(load_adapter("reference"), load_scenario(path),
                           RunOptions(report_dir=None, save_history=False, checkers=checkers,
                                      invariants=("answer-fate", "approval-asked")))
    assert outcome.error is None, outcome.error
    assert keep.history is not None
    return keep.history, {r.checker: r for r in outcome.results}


def _answers(history: History, tool_call: str) -> list[Record]:
    return [r for r in history.records if r.kind == "op.answer" and r.tool_call == tool_call]


def test_the_runner_sends_an_answer_naming_its_call_before_the_card() -> None:
    history, results = _run(EARLY)
    invoke, ok = _answers(history, TC)
    # Recorded as an answer to an open card is, with its call and the turn its id names.
    assert (invoke.type, invoke.time, invoke.session, invoke.turn, invoke.tool_call) == (
        "invoke", 1.0, "s1", "s1.turn1", TC)
    assert invoke.data == {"decision": "approve", "user": "alice", "named": True}
    assert (ok.type, ok.session, ok.turn, ok.tool_call, ok.data) == (
        "ok", "s1", "s1.turn1", TC, {})
    # Before the card: the model asked for the call at 2s, and no card was ever shown for it;
    # the runtime kept the answer and applied it when the call came.
    asked = [r for r in history.records if r.kind == "effect.delivered"
             and r.data.get("asked") == TC]
    assert asked and asked[0].time > invoke.time
    assert not [r for r in history.records if r.kind == "tool.awaiting" and r.tool_call == TC]
    outcomes = [r.data["outcome"] for r in history.records
                if r.kind == "tool.result" and r.tool_call == TC]
    assert outcomes == ["answered"]
    denied = [r.data["outcome"] for r in history.records
              if r.kind == "tool.result" and r.tool_call == "s2.turn1.t1"]
    assert denied == ["denied"]
    # A named answer to a call whose card is up is an answer like any other.
    assert [r.type for r in _answers(history, "s1.turn2.t1")] == ["invoke", "ok"]
    for result in results.values():
        assert result.valid is True and result.reached, result.witness(limit=20)


def test_a_second_answer_before_the_card_is_refused_once_the_call_comes() -> None:
    history, results = _run(SECOND)
    # The first answer of each call decides it; the second is refused as already decided,
    # recorded with the call's session and turn (it could not be before the call came).
    finals = {r.tool_call: r.data["outcome"] for r in history.records if r.kind == "tool.result"}
    assert finals == {TC: "answered", "s2.turn1.t1": "denied"}
    refused = [r for r in history.records if r.kind == "answer.refused"]
    assert sorted((r.session, r.turn, r.tool_call, r.data["decision"], r.data["reason"])
                  for r in refused) == [
        ("s1", "s1.turn1", TC, "deny", "already_decided"),
        ("s2", "s2.turn1", "s2.turn1.t1", "approve", "already_decided")]
    sends = [r for r in history.records if r.kind == "effect.delivered" and r.tool_call == TC]
    assert len(sends) == 1
    for result in results.values():
        assert result.valid is True, result.witness(limit=20)


def test_a_malformed_answer_is_sent_as_is_and_judged() -> None:
    history, results = _run(MALFORMED)
    malformed = [r for r in history.records if r.kind == "op.answer" and r.type == "invoke"
                 and r.data.get("malformed")]
    assert [(r.tool_call, r.data["decision"]) for r in malformed] == [
        ("s3.turn1.t1", "yes"), (TC, "maybe"), ("s2.turn1.t1", "Approve")]
    # The simulator's answer is a one-way send: the runner saw it accepted (ok), and the
    # reference refused it with an error (its invocation failed), which decides nothing.
    failed = [r for r in history.records if r.kind == "invocation.completed"
              and r.type == "fail" and "an answer is" in str(r.data.get("error"))]
    assert len(failed) == 3
    finals = {r.tool_call: r.data["outcome"] for r in history.records if r.kind == "tool.result"}
    assert finals == {TC: "answered", "s2.turn1.t1": "answered", "s3.turn1.t1": "denied"}
    assert results["answer-fate"].valid is True, results["answer-fate"].witness(limit=20)
    assert results["answer-fate"].stats["answers"] == 6.0  # three real, three malformed
    # A record of a malformed answer is outside the decision's set on purpose, and says so.
    assert bad_value("op.answer", {}, malformed[0].data) is None
    assert bad_value("op.answer", {}, {"decision": "maybe"}) is not None


class _Refusing:
    """A runtime whose answer raises (what a client sees as an error), with s1's card open."""

    def __init__(self) -> None:
        card = SimpleNamespace(turn="s1.turn1", tool_call=TC, shown_at=0.5)
        self.world = SimpleNamespace(cards=SimpleNamespace(open_cards=lambda session: [card]))

    def answer(self, tool_call: str, decision: str, user: str) -> None:
        raise ValueError(f"no call {tool_call}")


def test_an_answer_refused_by_an_error_is_its_fail_and_a_note() -> None:
    answer = (("session", "s1"), ("decision", "approve"), ("user", "alice"))
    for params in ((*answer, ("call", TC)),
                   (("session", "s1"), ("decision", "maybe"), ("user", "alice"),
                    ("malformed", True))):
        history = History()
        notes: list[StepNote] = []
        skipped: list[SkippedStep] = []
        _apply(_Refusing(), Step(1.0, "answer", params), history, skipped, {"s1": 1},
               notes=notes, number=3)
        invoke, fail = history.records
        assert (invoke.type, invoke.tool_call, invoke.turn) == ("invoke", TC, "s1.turn1")
        assert (fail.type, fail.tool_call, fail.data) == (
            "fail", TC, {"reason": f"ValueError: no call {TC}"})
        assert notes == [StepNote("refused", 3, "step 3 (answer at 1s, s1) refused by the "
                                  f"runtime: ValueError: no call {TC}")]
        assert skipped == []
    # A well-formed answer to an open card that raises is the adapter's error, as before.
    history = History()
    with pytest.raises(ValueError):
        _apply(_Refusing(), Step(1.0, "answer", answer), history, [], {"s1": 1}, notes=[],
               number=0)
    assert [r.type for r in history.records] == ["invoke"]


# ---------------------------------------------------------------- answer-fate


def _ev(h: History, kind: str, t: float, data: dict[str, Any] | None = None,
        type: Any = "event", **fields: Any) -> Record:
    return h.add(kind, type, time=t, data=data or {}, **fields)


def _answer(h: History, t: float, decision: str, tc: str = TC, *, end: str = "ok",
            **extra: Any) -> None:
    _ev(h, "op.answer", t, {"decision": decision, "user": "alice", **extra}, type="invoke",
        session="s1", turn="s1.turn1", tool_call=tc)
    _ev(h, "op.answer", t, {"reason": "refused"} if end == "fail" else None, type=end,
        session="s1", turn="s1.turn1", tool_call=tc)


def _card(h: History, t: float, tc: str = TC) -> None:
    _ev(h, "tool.awaiting", t, {"event_id": f"{tc}.awaiting", "tool": "send_email"},
        session="s1", turn="s1.turn1", tool_call=tc)


def _result(h: History, t: float, outcome: str, tc: str = TC) -> None:
    _ev(h, "tool.result", t, {"event_id": f"{tc}.{outcome}", "outcome": outcome,
                              "tool": "send_email"}, session="s1", turn="s1.turn1", tool_call=tc)


def _fate(h: History) -> Result:
    _ev(h, "run.end", 9 * 86400.0)
    return AnswerFate().check(h, CONFIG)


def test_a_malformed_answer_refused_or_ignored_then_a_real_one_applied_passes() -> None:
    for end in ("ok", "fail"):  # accepted and ignored, or refused by an error: both fine
        h = History()
        _card(h, 2)
        _answer(h, 60, "maybe", end=end, malformed=True)
        _answer(h, 120, "approve")
        _result(h, 121, "answered")
        r = _fate(h)
        assert r.valid is True and r.reached, r.witness(limit=20)
        assert r.stats["answers"] == 2.0  # the malformed one is judged: never applied


def test_a_malformed_answer_left_without_a_fate_is_not_a_drop() -> None:
    h = History()
    _card(h, 2)
    _answer(h, 60, "maybe", malformed=True)
    _result(h, 8 * 86400.0 + 2, "expired")
    r = _fate(h)
    assert r.valid is True and r.reached, r.witness(limit=20)


def test_a_malformed_answer_applied_is_a_violation() -> None:
    for decision, outcome in (("maybe", "denied"), ("Approve", "answered"),
                              ("yes", "rejected_access")):
        h = History()
        _card(h, 2)
        _answer(h, 60, decision, malformed=True)
        _result(h, 61, outcome)
        _answer(h, 120, "approve")  # the real answer comes too late: refused
        _ev(h, "answer.refused", 120, {"event_id": "r1", "reason": "already_decided",
                                       "decision": "approve"},
            session="s1", turn="s1.turn1", tool_call=TC)
        r = _fate(h)
        assert r.valid is False
        wanted = "deny" if outcome == "denied" else "approve"
        assert (f"the malformed answer {decision!r} to {TC} given at t=60s was applied: the "
                f"call ended {outcome} at t=61s with no {wanted} given to decide it") \
            in r.witness(limit=20)
        assert len(r.violations) == 1


def test_a_malformed_answer_is_told_apart_by_its_decision_alone() -> None:
    # A runner that did not say `malformed`: a decision neither approve nor deny is one.
    h = History()
    _card(h, 2)
    _answer(h, 60, "maybe")
    _result(h, 61, "denied")
    assert "the malformed answer 'maybe'" in _fate(h).witness(limit=20)


def test_a_result_decided_by_a_real_answer_after_a_malformed_one_passes() -> None:
    h = History()
    _card(h, 2)
    _answer(h, 60, "approve")
    _answer(h, 60, "maybe", malformed=True)
    _result(h, 61, "held")  # the approve's run, held: its confirmation card asks again
    _card(h, 62)
    _answer(h, 120, "deny")
    _result(h, 121, "denied")
    r = _fate(h)
    assert r.valid is True, r.witness(limit=20)


def test_a_malformed_answer_is_no_other_answer_for_already_decided() -> None:
    h = History()
    _card(h, 2)
    _answer(h, 60, "maybe", malformed=True)
    _answer(h, 120, "approve")
    _ev(h, "answer.refused", 120, {"event_id": "r1", "reason": "already_decided",
                                   "decision": "approve"},
        session="s1", turn="s1.turn1", tool_call=TC)
    assert "refused at t=2.0m as already_decided, which the call never was" in \
        _fate(h).witness(limit=20)


def test_a_refusal_of_a_malformed_answer_is_fine_whatever_its_reason() -> None:
    h = History()
    _card(h, 2)
    _answer(h, 60, "maybe", malformed=True)
    _ev(h, "answer.refused", 60, {"event_id": "r1", "reason": "already_decided",
                                  "decision": "maybe"},
        session="s1", turn="s1.turn1", tool_call=TC)
    _answer(h, 120, "approve")
    _result(h, 121, "answered")
    r = _fate(h)
    assert r.valid is True, r.witness(limit=20)


def test_an_answer_refused_by_an_error_does_not_shift_the_answers_after_it() -> None:
    # The deny fails (refused by an error), the approve is accepted and applied: the approve
    # is the accepted one, not the deny.
    h = History()
    _card(h, 2)
    _answer(h, 60, "deny", end="fail")
    _answer(h, 61, "approve")
    _result(h, 62, "answered")
    r = _fate(h)
    assert r.valid is True and r.stats["answers"] == 1.0, r.witness(limit=20)


def test_an_early_answer_kept_and_applied_or_a_second_refused_passes() -> None:
    h = History()
    _answer(h, 1, "approve", named=True)
    _answer(h, 1.5, "deny", named=True)
    _ev(h, "answer.refused", 1.5, {"event_id": "r1", "reason": "already_decided",
                                   "decision": "deny"}, session="s1", tool_call=TC)
    _ev(h, "effect.delivered", 2, {"effect": "model", "asked": TC}, turn="s1.turn1")
    _result(h, 3, "answered")
    r = _fate(h)
    assert r.valid is True and r.stats["answers"] == 2.0, r.witness(limit=20)


def test_an_early_answer_to_a_call_that_came_and_never_used_it_is_a_drop() -> None:
    # The model asked for the call (the world's billed reply), and the runtime never applied
    # or refused the answer kept for it: a drop, though no card or result names the call.
    h = History()
    _answer(h, 1, "approve", named=True)
    _ev(h, "effect.delivered", 2, {"effect": "model", "asked": TC}, turn="s1.turn1")
    assert f"the approve of {TC} accepted at t=1s was silently dropped" in \
        _fate(h).witness(limit=20)


def test_an_early_answer_to_a_call_that_never_came_or_never_waits_is_not_judged() -> None:
    h = History()
    _answer(h, 1, "approve", "s1.turn1.t9", named=True)  # the turn made no ninth call
    # A lookup needs no approval: it ran at once, and the answer had nothing to apply to.
    _answer(h, 1, "deny", "s1.turn1.t2", named=True)
    _ev(h, "effect.delivered", 2, {"effect": "model", "asked": "s1.turn1.t2"}, turn="s1.turn1")
    _ev(h, "tool.result", 3, {"event_id": "x", "outcome": "completed", "tool": "lookup"},
        session="s1", turn="s1.turn1", tool_call="s1.turn1.t2")
    r = _fate(h)
    assert r.valid is True and r.stats["unjudged"] == 2.0, r.witness(limit=20)
    # The same answers to an open card (not named) are judged as before: dropped.
    h = History()
    _answer(h, 1, "approve", "s1.turn1.t9")
    assert "silently dropped" in _fate(h).witness(limit=20)


# ---------------------------------------------------------------- approval-asked


def _asked(h: History) -> Result:
    _ev(h, "run.end", max(r.time for r in h.records) + 1.0)
    return ApprovalAsked().check(h, CONFIG)


def _intent(h: History, t: float) -> None:
    _ev(h, "tool.intent", t, {"event_id": "i1", "tool": "send_email", "run": 1},
        session="s1", turn="s1.turn1", tool_call=TC)


def test_an_answer_given_before_the_card_counts_as_asked() -> None:
    h = History()
    _answer(h, 1, "approve", named=True)
    _intent(h, 2)
    _result(h, 3, "answered")
    r = _asked(h)
    assert r.valid is True and r.reached, r.witness(limit=20)
    h = History()
    _answer(h, 1, "deny", named=True)
    _result(h, 2, "denied")
    assert _asked(h).valid is True


def test_a_run_after_an_early_deny_a_malformed_or_a_refused_answer_is_unasked() -> None:
    for decision, end, extra in (("deny", "ok", {}), ("maybe", "ok", {"malformed": True}),
                                 ("approve", "fail", {})):
        h = History()
        _answer(h, 1, decision, end=end, named=True, **extra)
        _intent(h, 2)
        r = _asked(h)
        assert r.valid is False, (decision, end)
        assert "wrote its intent at t=2s before any card asked the person" in \
            r.witness(limit=20)
