"""result-told on hand-made histories: an approved call that finished after its turn ended
starts a turn of its session within the liveness bound (counted from the result, from the end
of a turn in progress then, and from the heal); a run that finished inside its turn, or ended
otherwise, is not judged; and on the simulator the reference passes while the planted
Controller that drops late results is caught."""

from __future__ import annotations

from harness.adapters import load_adapter
from harness.checkers import CheckConfig, Result, ResultTold
from harness.history import History, Record
from harness.run import RunOptions, run_schedule
from harness.schedules.scenario_file import load_scenario
from tests.planted import load
from tests.test_planted_bugs import SCENARIOS

CONFIG = CheckConfig()  # liveness bound 1 h
HOUR = 3600.0
DAYS = 86400.0


def started(h: History, t: float, turn: str, message: str = "m") -> Record:
    return h.add("turn.started", time=t, session="s1", turn=turn,
                 data={"event_id": f"{turn}.started", "message": message})


def ended(h: History, t: float, turn: str, reason: str = "completed") -> Record:
    return h.add("turn.ended", time=t, session="s1", turn=turn,
                 data={"event_id": f"{turn}.ended", "reason": reason})


def result(h: History, t: float, outcome: str = "answered",
           call: str = "s1.turn1.t1") -> Record:
    return h.add("tool.result", time=t, session="s1", turn=call.rsplit(".", 1)[0],
                 tool_call=call, data={"event_id": f"{call}.{outcome}", "outcome": outcome,
                                       "tool": "send_email"})


def check(h: History, end: float = 8 * DAYS) -> Result:
    h.add("run.end", time=end)
    return ResultTold().check(h, CONFIG)


def _late_run() -> History:
    """Turn 1 ends (a new message steered it) while its approved run is in flight; turn 2
    answers the message; the run finishes at ten minutes."""
    h = History()
    started(h, 0, "s1.turn1")
    intent(h, 59)
    ended(h, 60, "s1.turn1", "steered")
    started(h, 60, "s1.turn2")
    ended(h, 62, "s1.turn2")
    return h


def intent(h: History, t: float, call: str = "s1.turn1.t1") -> Record:
    return h.add("tool.intent", time=t, session="s1", turn=call.rsplit(".", 1)[0],
                 tool_call=call, data={"event_id": f"{call}.intent", "run": 1,
                                       "tool": "send_email"})


def test_a_late_result_that_starts_a_turn_passes() -> None:
    h = _late_run()
    result(h, 600)
    started(h, 600, "s1.turn3", "result:s1.turn1.t1:answered")
    r = check(h)
    assert r.valid is True and r.reached and r.stats["judged"] == 1


def test_a_late_result_no_turn_tells_is_a_violation() -> None:
    h = _late_run()
    done = result(h, 600)
    r = check(h)
    assert r.valid is False
    assert r.witness(limit=1).startswith(
        "s1.turn1.t1 (send_email) finished answered at t=10.0m, after its turn s1.turn1 ended "
        "at t=60s, and no turn of s1 started by the run's end at t=8.00d: the agent was never "
        "told")
    assert done.index in r.violations[0].records
    # A turn two hours later is too late (the bound is an hour).
    h = _late_run()
    result(h, 600)
    started(h, 600 + 2 * HOUR, "s1.turn3")
    assert "the next turn of s1 started only at t=2.2h" in check(h).witness(limit=1)


def test_the_bound_runs_from_a_busy_turn_and_a_heal() -> None:
    def result_while_turn_2_waits() -> History:
        h = History()
        started(h, 0, "s1.turn1")
        intent(h, 59)
        ended(h, 60, "s1.turn1", "steered")
        started(h, 60, "s1.turn2")
        result(h, 600)
        return h

    # Turn 2 waits on the person when the result comes, for a day: the result's turn waits.
    h = result_while_turn_2_waits()
    ended(h, DAYS, "s1.turn2")
    started(h, DAYS, "s1.turn3")
    assert check(h).valid is True
    # Still waiting at the run's end: not judged.
    r = check(result_while_turn_2_waits())
    assert r.valid is True and not r.reached and r.stats["unjudged"] == 1
    # A host paused for a day from the result: the turn may come an hour after it is back.
    h = _late_run()
    result(h, 600)
    h.add("fault.gc-pause", time=600, host="dep1.h1", data={"duration": DAYS})
    started(h, DAYS + 30 * 60, "s1.turn3")
    assert check(h).valid is True


def test_a_call_sent_to_the_background_before_its_turn_ended_is_judged() -> None:
    h = History()
    started(h, 0, "s1.turn1")
    result(h, 30, "background")
    ended(h, 32, "s1.turn1")
    result(h, 600)
    assert check(h).valid is False


def test_a_turn_that_ended_while_its_call_still_waited_is_its_own_design() -> None:
    # The turn ended at the hand-off (a runtime that runs the tool alone when the answer
    # comes): the run began after the end, and nothing says the call left the turn.
    h = History()
    started(h, 0, "s1.turn1")
    ended(h, 300, "s1.turn1")
    intent(h, 3 * DAYS)
    result(h, 3 * DAYS + 1)
    r = check(h)
    assert r.valid is True and not r.reached


def test_a_result_inside_its_turn_or_not_answered_or_without_turns_is_not_judged() -> None:
    h = History()
    started(h, 0, "s1.turn1")
    result(h, 30)
    ended(h, 60, "s1.turn1")
    assert check(h).reached is False
    for outcome in ("denied", "expired", "cancelled", "held", "background"):
        h = _late_run()
        result(h, 600, outcome)
        assert check(h).valid is True, outcome
    h = History()
    result(h, 600)  # a runtime that reports no turns
    r = check(h)
    assert r.valid is True and r.note == "no approved call finished after its turn had ended"


def test_the_reference_passes_and_the_planted_drop_is_caught() -> None:
    path = SCENARIOS / "23-steering-message-after-the-rerun-intent.toml"
    options = RunOptions(save_history=False)
    ok = run_schedule(load_adapter("reference"), load_scenario(path), options)
    assert {r.checker: r.valid for r in ok.results}["result-told"] is True
    bad = run_schedule(load("late_result_kept_from_the_agent").ADAPTER, load_scenario(path),
                       options)
    assert {r.checker for r in bad.results if r.valid is False} == {"result-told"}
