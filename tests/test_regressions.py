"""Minimal schedules that once broke the reference implementation, kept as they were shrunk.

Each one failed an invariant on the unmodified reference and is pinned here so the fix stays.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from harness.adapters import load_adapter
from harness.history import History, Record
from harness.outcome import RunOutcome
from harness.run import RunOptions, run_schedule
from harness.schedules.scenario_file import load_scenario, parse_scenario

# Found by `durable-chaos run --scenarios none --schedules 100 --seed 1`: s2's call is sent to
# the background in the same instant as a new message ends its waiting turn, while the owner
# is paused. The turn wrote "ended_by_message"; PendingToolCall, which had moved the call to
# the background and never heard of the ending, still expired it on day 8: two final results
# for one tool call in the thread log.
BACKGROUND_AND_NEW_MESSAGE_AT_ONCE = """
name = "background-and-new-message-at-once"
seed = 0
hosts = 2

[[step]]
at = "0s"
do = "message"
session = "s1"
text = "m2"
tools = ["send_email"]
user = "alice"

[[step]]
at = "0s"
do = "arm"
point = "effect.charge.after_charge"
action = "crash"
duration = "30s"
times = 1

[[step]]
at = "0s"
do = "arm"
point = "effect.email.after_send"
action = "pause"
duration = "10m"
times = 1

[[step]]
at = "0s"
do = "message"
session = "s2"
text = "w5"
tools = ["send_email"]
user = "alice"

[[step]]
at = "2s"
do = "gc-pause"
host = "owner"
duration = "5m"

[[step]]
at = "3s"
do = "answer"
session = "s1"
decision = "approve"
user = "alice"

[[step]]
at = "64s"
do = "message"
session = "s2"
text = "m1"
tools = []
user = "alice"

[[step]]
at = "64s"
do = "background"
session = "s2"
"""


# Found by `durable-chaos run --scenarios none --schedules 1000 --seed 3`: an answer's re-run
# writes its intent and its host is paused right after; a new message ends the turn
# ("ended_by_message" in the log); the re-run is retried on the other host, which took the
# "ended_by_message" result for the intent's outcome and sent the email instead of holding.
RERUN_RETRIED_AFTER_THE_TURN_ENDED = """
name = "rerun-retried-after-the-turn-ended"
seed = 0
hosts = 2

[[step]]
at = "0s"
do = "message"
session = "s1"
text = "m2"
tools = ["send_email"]
user = "alice"

[[step]]
at = "0s"
do = "arm"
point = "tool.after_intent"
action = "pause"
duration = "2m"
times = 1

[[step]]
at = "302s"
do = "answer"
session = "s1"
decision = "approve"
user = "alice"

[[step]]
at = "303s"
do = "message"
session = "s1"
text = "m1"
tools = []
user = "alice"
"""


# Found by the new answer-fate rule on the unmodified reference (`--schedules 300 --seed 0`,
# issue 22): two approves in the same instant after the hand-off. The first re-runs the tool;
# the second waited on PendingToolCall's key, found the call done and was ignored without a
# word: acknowledged by the card service, then dropped. Now refused as already decided.
TWO_APPROVES_AFTER_THE_HAND_OFF = """
name = "two-approves-after-the-hand-off"
seed = 0
hosts = 2

[[step]]
at = "0s"
do = "message"
session = "s1"
text = "m2"
tools = ["send_email"]
user = "alice"

[[step]]
at = "8m"
do = "answer"
session = "s1"
decision = "approve"
user = "alice"

[[step]]
at = "8m"
do = "answer"
session = "s1"
decision = "approve"
user = "alice"
"""


@pytest.mark.parametrize(("text", "invariant"), [
    (BACKGROUND_AND_NEW_MESSAGE_AT_ONCE, "turn-outcome"),
    (RERUN_RETRIED_AFTER_THE_TURN_ENDED, "conservative-recovery"),
    (TWO_APPROVES_AFTER_THE_HAND_OFF, "answer-fate"),
], ids=["expiry-after-ended-by-message", "rerun-retried-after-ended-by-message",
        "second-approve-dropped"])
def test_a_schedule_that_once_broke_the_reference_now_holds(text: str, invariant: str) -> None:
    document = tomllib.loads(text)
    schedule = parse_scenario(document, "<test>", document["name"])
    outcome = run_schedule(load_adapter("reference"), schedule, RunOptions(report_dir=None))
    verdicts = {r.checker: r.valid for r in outcome.results}
    assert outcome.error is None
    assert verdicts[invariant] is True, [
        v.message for r in outcome.results for v in r.violations]
    assert all(v is True or v is None for v in verdicts.values()), verdicts
    # The window was really reached, so the verdict means something.
    assert {r.checker: r.reached for r in outcome.results}[invariant]


# Issue 22, section 4: an approved re-run races a steering message. Both orders are kept as
# scenario files; this pins what the reference does in each, not only that it passes.
SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def _run(name: str, tmp_path: Path) -> tuple[RunOutcome, History]:
    outcome = run_schedule(load_adapter("reference"), load_scenario(SCENARIOS / name),
                           RunOptions(report_dir=tmp_path))
    assert outcome.error is None and outcome.history_path is not None
    assert all(r.valid is True for r in outcome.results), [
        v.message for r in outcome.results for v in r.violations]
    return outcome, History.load(outcome.history_path)


def _records(history: History, kind: str, tc: str = "s1.turn1.t1") -> list[Record]:
    return [r for r in history.records if r.kind == kind and r.tool_call == tc]


def test_a_new_message_committed_before_the_rerun_intent_wins_the_call(tmp_path: Path) -> None:
    """Failed conservative-recovery on the unmodified reference: the re-run, paused before
    the log's lock, wrote its intent and sent the email after the new message had ended the
    call, and its result was dropped."""
    outcome, history = _run("22-rerun-races-a-steering-message.toml", tmp_path)
    assert {r.checker: r.reached for r in outcome.results}["answer-fate"]
    assert _records(history, "tool.intent") == []
    assert _records(history, "effect.delivered") == []
    assert [r.data["outcome"] for r in _records(history, "tool.result")] == ["ended_by_message"]
    [refused] = _records(history, "answer.refused")
    assert refused.data["reason"] == "ended" and refused.data["outcome"] == "ended_by_message"
    assert refused.data["decision"] == "approve"


def test_a_rerun_intent_committed_before_the_new_message_wins_the_call(tmp_path: Path) -> None:
    outcome, history = _run("23-steering-message-after-the-rerun-intent.toml", tmp_path)
    assert {r.checker: r.reached for r in outcome.results}["effect-authorized"]
    assert len(_records(history, "effect.delivered")) == 1
    assert [r.data["outcome"] for r in _records(history, "tool.result")] == ["answered"]
    assert _records(history, "answer.refused") == []
    [ended] = [r for r in _records(history, "turn.ended") if r.turn == "s1.turn1"]
    assert ended.data["reason"] == "steered"


def test_an_expiry_paused_before_the_lock_writes_nothing_over_a_steer(tmp_path: Path) -> None:
    """Failed turn-outcome and card-closed on the unmodified reference: the expiry checked for
    an earlier result before the lock, and after the pause wrote `expired` over the steer's
    `ended_by_message`."""
    _, history = _run("64-an-expiry-paused-before-the-lock-races-a-steer.toml", tmp_path)
    assert [r.data["outcome"] for r in _records(history, "tool.result")] == ["ended_by_message"]
    [end] = history.of_kind("run.end")
    assert end.data["cards"]["s1.turn1.t1"] == "ended_by_message"


def test_a_cancel_ends_a_held_call_whatever_the_order(tmp_path: Path) -> None:
    """The cancel comes while the approved run is in flight and the hold after it; the next
    turn wrote nothing (the run was in flight). PendingToolCall writes the call's cancelled
    result itself and closes the confirmation at once, not after eight days of refusals."""
    name = "67-a-cancel-while-an-approved-run-is-in-flight-ends-the-call-once-it-holds.toml"
    _, history = _run(name, tmp_path)
    results = [(r.data["outcome"], r.time) for r in _records(history, "tool.result")]
    assert [o for o, _ in results] == ["held", "cancelled"]
    assert results[1][1] < 700  # at the hold, seconds after the cancel
    [end] = history.of_kind("run.end")
    assert end.data["cards"]["s1.turn1.t1"] == "cancelled"
    assert _records(history, "answer.refused") == []  # the late confirmation found no card


def test_an_approved_run_in_flight_is_not_overtaken_by_another_calls_result(
        tmp_path: Path) -> None:
    """t2's approved run wrote its intent and paused; t1's background result came into the
    log after it; a new message then ended the waiting turn. The next turn must still find
    t2's run in flight (another call's later result says nothing about t2) and write nothing
    over it: t2's email goes out once, `answered` is its one final result."""
    _, history = _run("68-another-calls-result-after-an-in-flight-intent.toml", tmp_path)
    t2 = "s1.turn1.t2"
    assert [r.data["outcome"] for r in _records(history, "tool.result", t2)] == ["answered"]
    assert len(_records(history, "effect.delivered", t2)) == 1
    assert len(_records(history, "effect.delivered", "s1.turn1.t1")) == 1


def test_a_cancelled_call_in_the_background_closes_its_card_with_its_result(
        tmp_path: Path) -> None:
    """Failed card-closed on the unmodified reference (with a horizon before the expiry): the
    next turn wrote the call's cancelled result and left its card up, since PendingToolCall
    had ignored the controller's end of a wait it had moved to the background."""
    _, history = _run("69-a-call-sent-to-the-background-after-a-cancel-ends-with-its-turn.toml",
                      tmp_path)
    assert len(_records(history, "tool.background")) == 1
    [result] = _records(history, "tool.result")
    assert result.data["outcome"] == "cancelled"
    [end] = history.of_kind("run.end")
    assert end.time < 2 * 86400  # judged before the call's expiry could close the card
    assert end.data["cards"]["s1.turn1.t1"] == "cancelled"


def test_a_writer_waits_out_a_paused_holder_and_reports_each_refusal(tmp_path: Path) -> None:
    """The re-run's host holds the control row, paused; the next turn is refused the row
    (a lock timeout, reported with the holder's since and the idle bound) until the holder
    has been idle past the bound, then takes it; the paused re-run's commit is aborted."""
    _, history = _run("70-a-writer-waits-out-a-paused-holder-of-the-control-row.toml", tmp_path)
    refused = [r for r in history.of_kind("threadlog.rejected")
               if r.data["reason"] == "LockTimeout"]
    assert refused and all(r.data["held_since"] == 600.0 and r.data["idle_timeout"] == 5.0
                           and r.time - 600.0 <= 5.0 for r in refused)
    taken = next(r for r in history.of_kind("threadlog.assigned")
                 if r.index > refused[-1].index)
    assert taken.epoch == 3 and 605.0 <= taken.time < 700  # once the holder was past the bound
    assert any(r.data["reason"] == "TransactionAborted"
               for r in history.of_kind("threadlog.rejected"))
