"""turn-answered on small hand-made histories: a turn that completed had the model's text
reply or spent its step bound, and no turn billed more model steps than the bound; and an
adapter written outside the package that states its bound."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.checkers import CheckConfig, Result, TurnAnswered
from harness.history import History, Record

BOUND = CheckConfig(max_steps_per_turn=3)
UNSTATED = CheckConfig()


def reply(h: History, t: float, turn: str, step: int, asked: str | None) -> Record:
    data: dict[str, Any] = {"effect": "model", "key": f"model:{turn}:{step}",
                            "logical": f"{turn}:{step}"}
    if asked is not None:
        data["asked"] = asked
    return h.add("effect.delivered", "world", time=t, data=data, session="s1", turn=turn)


def ended(h: History, t: float, turn: str, reason: str = "completed") -> Record:
    return h.add("turn.ended", "event", time=t,
                 data={"event_id": f"turn.ended:{turn}", "reason": reason},
                 session="s1", turn=turn)


def check(h: History, config: CheckConfig = BOUND) -> Result:
    h.add("run.end", time=max((r.time for r in h.records), default=0.0) + 1.0)
    return TurnAnswered().check(h, config)


def test_a_turn_answered_in_text_and_one_that_spent_its_bound_pass() -> None:
    h = History()
    reply(h, 1, "s1.turn1", 0, "s1.turn1.t1")
    reply(h, 2, "s1.turn1", 1, None)
    ended(h, 3, "s1.turn1")
    for step in range(3):
        reply(h, 10 + step, "s1.turn2", step, f"s1.turn2.t{step + 1}")
    reply(h, 12, "s1.turn2", 2, "s1.turn2.t3")  # a retry of one step is the same step
    ended(h, 13, "s1.turn2")
    ended(h, 20, "s1.turn3", "cancelled")  # only a completed turn owes an answer
    r = check(h)
    assert r.valid is True, r.witness(limit=20)
    assert r.reached and r.stats == {"completed": 2.0, "turns_billed": 2.0}


def test_a_turn_completed_without_the_answer_or_its_bound_is_a_violation() -> None:
    h = History()
    reply(h, 1, "s1.turn1", 0, "s1.turn1.t1")
    ended(h, 2, "s1.turn1")
    r = check(h)
    assert r.valid is False
    assert ("s1.turn1 ended completed at t=2s without the model's answer: the model billed no "
            "text reply for it and it spent 1 of its 3 steps; the person got no answer"
            in r.witness(limit=20))


def test_a_turn_that_spends_past_its_bound_is_a_violation() -> None:
    h = History()
    for step in range(4):
        reply(h, 1 + step, "s1.turn1", step, f"s1.turn1.t{step + 1}")
    reply(h, 5, "s1.turn1", 4, None)
    ended(h, 6, "s1.turn1")
    r = check(h)
    assert r.valid is False and len(r.violations) == 1
    assert ("s1.turn1 billed 5 model steps, more than its bound of 3: the turn went on "
            "spending past it; the last at t=5s") in r.witness(limit=20)


def test_with_a_stated_bound_a_run_without_any_model_reply_is_judged() -> None:
    h = History()
    ended(h, 1, "s1.turn1")
    r = check(h)
    assert r.valid is False
    assert "spent 0 of its 3 steps" in r.witness(limit=20)


def test_without_a_stated_bound_only_a_turn_with_no_step_at_all_is_judged() -> None:
    # No reply billed in the run: the agent may ask a model of its own.
    h = History()
    ended(h, 1, "s1.turn1")
    r = check(h, UNSTATED)
    assert r.valid is True and not r.reached
    # Replies billed: a turn that stopped without text may have met a bound of its own; a
    # completed turn with no step at all skipped the model.
    h2 = History()
    for step in range(12):
        reply(h2, 1 + step, "s1.turn1", step, f"s1.turn1.t{step + 1}")
    ended(h2, 20, "s1.turn1")
    ended(h2, 21, "s1.turn2")
    r2 = check(h2, UNSTATED)
    assert r2.valid is False and len(r2.violations) == 1
    assert "s1.turn2 ended completed at t=21s without the model's answer: the model billed " \
           "no text reply for it; the person got no answer" in r2.witness(limit=20)


def test_an_outside_adapter_that_states_its_bound_is_judged_by_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """tests/outside_adapters/step_bound.py, a user's adapter on the simulator (public API
    only), states its agent's bound in its CheckConfig; the default run finds the loop that
    stops short of it, and the correct loop passes the scenario that plans nine lookups."""
    from harness.cli import main

    monkeypatch.chdir(Path(__file__).resolve().parent / "outside_adapters")
    code = main(["run", "--adapter", "step_bound:stops_short_adapter", "--seed", "0",
                 "--schedules", "1", "--report-dir", str(tmp_path / "short"), "--quiet"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert ("turn-answered: " in out and "ended completed" in out
            and "it spent 2 of its 8 steps" in out), out
    scenario = str(Path(__file__).resolve().parents[1] / "scenarios"
                   / "50-a-turn-stops-at-its-step-bound.toml")
    assert main(["run", "--adapter", "step_bound:adapter", "--scenarios", scenario,
                 "--schedules", "1", "--report-dir", str(tmp_path / "bound"),
                 "--quiet"]) == 0, capsys.readouterr().out
