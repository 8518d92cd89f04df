"""examples/restate_sdk_agent on the simulator: the default budget finds each planted defect,
shrinks it and replays it byte for byte; the correct agent passes; same seed, same bytes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from examples.restate_sdk_agent import adapter as example
from harness.cli import main
from harness.run import RunOptions, run_schedule
from harness.schedules.generate import generate
from harness.schedules.scenario_file import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SPEC = "examples.restate_sdk_agent.adapter:"



# What the agent gets wrong, found by the built-in scenarios (it is a user's agent, not the
# reference): after the hand-off, an approval and a new message at the same moment. The
# approval's `resume` is queued behind the new message's turn, which ends the call; `resume`
# then finds nothing pending and returns, and the approval is neither applied nor refused
# (answer-fate). And it reads any decision but "approve" as a deny, so a malformed answer
# ("maybe", from a broken client) denies the call the person then approves (answer-fate: a
# malformed answer is never applied). Pinned so that a fix of the agent, or a change of
# verdict, shows here.
AGENT_FINDINGS: dict[str, set[str]] = {
    "35-rerun-sends-after-its-host-crashed-in-a-pause.toml": {"answer-fate"},
    "58-a-malformed-answer-is-never-applied.toml": {"answer-fate"},
}

def test_the_correct_agent_passes_every_scenario_file() -> None:
    for path in sorted((ROOT / "scenarios").glob("*.toml")):
        outcome = run_schedule(example.ADAPTER, load_scenario(path),
                               RunOptions(save_history=False))
        assert outcome.error is None, path.name
        failing = {r.checker for r in outcome.results if not r.valid}
        assert failing == AGENT_FINDINGS.get(path.name, set()), (
            path.name, [(r.checker, r.violations) for r in outcome.results if not r.valid])


def test_the_same_seed_gives_the_same_history_byte_for_byte(tmp_path: Path) -> None:
    for index in range(3):
        # Kept as a scenario's run is, so that its history is written.
        schedule = replace(generate(41, index), source="scenario")
        texts = []
        for n in range(2):
            outcome = run_schedule(example.EMAIL_NO_KEY, schedule,
                                   RunOptions(report_dir=tmp_path / f"{index}-{n}"))
            assert outcome.history_path is not None
            texts.append(Path(outcome.history_path).read_bytes())
        assert texts[0] == texts[1]
        assert b"effect.delivered" in texts[0]


@pytest.mark.parametrize(("attr", "invariant"), [("WAIT_IN_CALL", "pinning-bound"),
                                                  ("EMAIL_NO_KEY", "no-duplicate-effects"),
                                                  ("CARD_BEFORE_PENDING", "answer-fate"),
                                                  ("PENDING_WITHOUT_ARGS", "effect-authorized")])
def test_the_default_budget_finds_shrinks_and_replays_each_defect(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], attr: str, invariant: str) -> None:
    report = tmp_path / "run"
    assert main(["run", "--adapter", SPEC + attr, "--quiet", "--workers", "1",
                 "--report-dir", str(report)]) == 1
    out = capsys.readouterr().out
    assert f"  {invariant}:" in out
    shrunk = sorted(report.glob("runs/*/shrunk-generated-*/"))
    assert shrunk, out
    replayed = tmp_path / "replay"
    assert main(["replay", "--adapter", SPEC + attr, "--quiet", "--report-dir",
                 str(replayed), str(shrunk[0] / "schedule.toml")]) == 1
    again = next(replayed.glob("runs/*/*/history.jsonl"))
    assert again.read_bytes() == (shrunk[0] / "history.jsonl").read_bytes()
    assert len(load_scenario(shrunk[0] / "schedule.toml").steps) <= 4


def test_a_second_answer_to_a_card_is_refused_at_once_with_its_reason(tmp_path: Path) -> None:
    """Two approves of one card in the same instant: the first is applied, the second is
    refused as already decided, and the refusal is recorded (answer-fate): an awakeable
    resolved twice would drop the second without a word."""
    path = tmp_path / "two-approves.toml"
    answer = '[[step]]\nat = "60s"\ndo = "answer"\nsession = "s1"\ndecision = "approve"\n'
    path.write_text('name = "two-approves"\n[[step]]\nat = "0s"\ndo = "message"\n'
                    'session = "s1"\ntext = "m1"\ntools = ["send_email"]\n' + answer * 2)
    outcome = run_schedule(example.ADAPTER, load_scenario(path),
                           RunOptions(report_dir=tmp_path / "report"))
    assert outcome.history_path is not None
    history = Path(outcome.history_path).read_text()
    assert history.count('"answer.refused"') == 1 and '"already_decided"' in history
    assert {r.checker: r.valid for r in outcome.results}["answer-fate"] is True
