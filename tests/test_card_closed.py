"""card-closed on small hand-made histories: a call's card closes when the call ends, with the
outcome that ended it, and stays open while the call still waits on the person."""

from __future__ import annotations

from harness.checkers import CardClosed, CheckConfig, Result
from harness.history import History, Record

CONFIG = CheckConfig(liveness_bound=60.0)


def result(h: History, t: float, tc: str, outcome: str) -> Record:
    return h.add("tool.result", time=t, session="s1", turn="s1.turn1", tool_call=tc,
                 data={"event_id": f"tool.result:{tc}:{outcome}", "outcome": outcome})


def check(h: History, cards: dict[str, str | None] | None, end: float = 1000.0) -> Result:
    h.add("run.end", time=end, data=None if cards is None else {"cards": cards})
    return CardClosed().check(h, CONFIG)


def test_cards_closed_with_their_calls_outcomes_pass() -> None:
    h = History()
    result(h, 10, "t1", "answered")
    result(h, 11, "t1", "answered")  # a retried step reports it again
    result(h, 20, "t2", "background")
    result(h, 500, "t2", "expired")
    result(h, 30, "t3", "held")  # held, and still waiting on the confirmation: card open
    r = check(h, {"t1": "answered", "t2": "expired", "t3": None, "t4": "cancelled"})
    assert r.valid is True, r.witness(limit=10)
    assert r.reached and r.stats == {"cards": 4.0, "unjudged": 0.0}


def test_a_card_left_open_after_its_call_ended_is_a_violation() -> None:
    h = History()
    ended = result(h, 10, "t1", "expired")
    r = check(h, {"t1": None})
    assert r.valid is False
    (v,) = r.violations
    assert v.message.startswith("the card of t1 was still open at the run's end (t=16.7m), "
                                "although the call ended expired at t=10s")
    assert ended.index in v.records


def test_an_open_card_is_judged_only_a_liveness_bound_after_the_end_and_the_heal() -> None:
    h = History()
    result(h, 950, "t1", "answered")  # 50 s before the end: it may close yet
    r = check(h, {"t1": None})
    assert r.valid is True and r.stats["unjudged"] == 1.0
    h = History()
    h.add("fault.gc-pause", "info", time=0, data={"duration": 60.0}, host="dep1.h1")
    h.add("fault.heal", time=960, data={"at": 960.0})
    result(h, 10, "t1", "answered")  # ended long before, but the faults healed at 960
    assert check(h, {"t1": None}).valid is True


def test_a_card_closed_with_another_outcome_is_a_violation() -> None:
    h = History()
    result(h, 10, "t1", "expired")
    r = check(h, {"t1": "answered"})
    assert r.valid is False
    assert "closed answered, but the call ended expired at t=10s" in r.violations[0].message


def test_a_card_closed_while_its_call_still_waits_is_a_violation() -> None:
    h = History()
    result(h, 10, "t1", "background")
    r = check(h, {"t1": "background"})
    assert r.valid is False
    assert r.violations[0].message == (
        "the card of t1 was closed background, while the call still waited on the person: a "
        "call sent to the background is still theirs to answer")
    h = History()
    result(h, 10, "t1", "held")
    result(h, 300, "t1", "answered")
    r = check(h, {"t1": "held"})
    assert r.valid is False
    assert "a call held is still theirs to answer (it ended answered at t=5.0m)" in (
        r.violations[0].message)


def test_a_run_without_cards_or_without_an_end_is_not_reached() -> None:
    r = check(History(), None)
    assert r.valid is True and not r.reached
    assert r.note == "the world's card service showed no card"
    h = History()
    result(h, 10, "t1", "answered")
    r = CardClosed().check(h, CONFIG)
    assert r.valid is True and not r.reached and r.note == "the run did not end"


def test_the_runner_records_the_world_card_board_at_the_end() -> None:
    from harness.adapters import load_adapter
    from harness.run import RunOptions, run_schedule
    from harness.schedules.scenario_file import load_scenario
    from tests.keep import KeepHistory
    from tests.test_planted_bugs import SCENARIOS

    keep = KeepHistory()
    run_schedule(load_adapter("reference"),
                 load_scenario(SCENARIOS / "03-never-answered-expires.toml"),
                 RunOptions(adapter_spec="reference", report_dir=None, save_history=False,
                            checkers=(keep,)))
    assert keep.history is not None
    (end,) = [r for r in keep.history.records if r.kind == "run.end"]
    # Closed by the expiry, eight days after the card showed (its closing time is kept too),
    # and what the card showed the charge would be (the model's arguments).
    assert end.data == {"cards": {"s1.turn1.t1": "expired"},
                        "closed_at": {"s1.turn1.t1": 2.0 + 8 * 86400},
                        "shown": {"s1.turn1.t1": {"amount": 100}}}
