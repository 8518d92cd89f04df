"""The proof that the harness finds bugs: one planted bug per invariant, found by exploration.

Each planted bug (`tests/planted/`) is the reference implementation with one small change that
breaks one invariant. For each, the harness's own exploration (`harness.exploration.explore`:
generated schedules, then shrinking) must

1. find a violation within `COUNT` generated schedules of seed `SEED`,
2. of the invariant the bug targets (other invariants may fail too),
3. and shrink it to a small schedule that still fails that invariant when replayed with
   `run_schedule`, and that the unmodified reference passes.

The control: the unmodified `reference` adapter, explored with the same seed, count and
generator, shows no violation of any invariant. Everything runs on the deterministic
simulator: same seed, same schedules, same verdicts.

The generator is bounded to `SIZE` (2 sessions, up to 5 messages, up to 5 faults, up to 5
windows): small schedules run and shrink fast, and every planted bug is still reached. How
fast each bug is found over many seeds, at the default size too, is measured by
`benchmarks/bug_finding.py`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

from harness.adapters import load_adapter
from harness.adapters.sim import SimAdapter
from harness.checkers import ALL
from harness.cli import main
from harness.clock import VirtualClock, wall_clock_follows
from harness.exploration import Exploration, explore
from harness.outcome import RunOutcome
from harness.run import RunOptions, run_schedule
from harness.schedules.generate import Size, schedules
from harness.schedules.model import Schedule
from harness.schedules.scenario_file import load_scenario, parse_scenario
from reference_impl import effects, executor
from tests import planted
from tests.planted._plant import variant

SIZE = Size(sessions=2, turns=5, faults=5, hosts=2)
SEED = 0
COUNT = 150
OPTIONS = RunOptions(report_dir=None, save_history=False)

# Bound on the steps of each shrunk schedule (a generated one has up to 17). The shrinker
# deletes steps until none can go, so each bug's minimal story (1 to 4 steps) is what comes
# out.
MAX_STEPS = 4
STEP_BOUND = {"pinning_minutes": 1, "expiry_not_scheduled": 1, "busy_ignores_waiting": 3,
              "queue_in_memory": 3}

# What the violation of each bug says: the rule that catches it, not just its invariant (two
# rules of turn-outcome, say, would both fail turn-outcome).
WITNESS = {
    "expiry_after_answer": "it may end once",
    "background_never_expires": "an answer applied after max_wait",
    "drained_at_face_value": "was recorded drained",
    "keyless_model_call": "twice without an idempotency key",
    "result_filed_under_next_turn": "not its own turn",
    "result_left_out_of_context": "left that call's result out",
    "busy_refuses_message": "never started a turn",
    "background_only_in_call": "was not honored",
    "cancel_ignored_while_running": "went on after the person cancelled it",
    "approval_after_cancel": "after the person cancelled turn",
    "run_numbered_from_its_card": "run numbers skip",
    "turn_stops_short": "without the model's answer",
    "card_left_open": "still open at the run's end",
    "intent_records_another_key": "not the key its intent recorded",
    "unapproved_call_checked_for_nobody": "before the model asked for it",
    "approval_checked_for_the_requester": "although user bob lost access",
    "background_for_any_session": "which does not own it",
    "placeholder_on_every_result": "calls its result a placeholder",
    "waited_in_minutes": "less than the",
    "rejection_names_the_writer": "names the writer's own epoch",
    "charge_intent_without_key": "but its intent names no key",
    "queued_results_only": "never reported queued",
    "closed_results_never_written": "never reported the call's result",
    "first_run_told_as_rerun": "was never handed off or sent to the background",
    "turn_acts_for_the_first_writer": "although user bob lost access to notify",
    "end_wait_after_answer": "as ended, which the call never was",
    "approval_taken_as_the_deed": "its run wrote no intent either",
    "idle_holder_waited_for": "longer than the store's idle-in-transaction timeout",
    "args_lost_in_the_hand_off": "but the card the person approved showed",
}

# Bugs of a window too narrow for uniform generation at this budget, caught by the scenario
# file that opens it (`CAUGHT_BY`, run by every default `durable-chaos run`, whatever the
# seed): the re-run must race a new message at one fault point (a pause before the log's
# lock, scenario 22), and a dropped answer needs an answer that reaches a call already ended
# while its card is still open (the same race). 150 generated schedules of seed 0 reach
# neither (measured); the generator's reach is issue 22's section 3. An approval by another
# person than the one who asked needs a second person, and generated schedules give a session
# one (scenario 54 has Bob approve Alice's calls); a request that names another session's call
# (`of`) is written in scenario 55 only; two people writing in one session, in scenario 61; an
# approval and a new message in one instant followed by a second approval, in scenario 66; a
# call sent to the background after a cancel, before its turn says it waits, in scenario 69
# (whose one-day horizon judges the card before the call's expiry closes it).
SCENARIO_ONLY: frozenset[str] = frozenset({"rerun_ignores_end", "answer_dropped",
                                           "approval_after_cancel",
                                           "approval_checked_for_the_requester",
                                           "background_for_any_session",
                                           "turn_acts_for_the_first_writer",
                                           "end_wait_after_answer",
                                           "background_keeps_its_card"})

# The planted bugs explored here: all the others, one per invariant at least.
BUGS: tuple[str, ...] = tuple(name for name in planted.MODULES if name not in SCENARIO_ONLY)


@pytest.fixture(scope="module", autouse=True)
def _deterministic() -> Iterator[None]:
    # As `run_suite` does, one freezegun scope for all runs (starting it costs more than a
    # run).
    with wall_clock_follows(VirtualClock()):
        yield


@pytest.fixture(scope="module")
def control() -> Exploration:
    """The unmodified reference, explored with the same seed, count and generator."""
    return explore(load_adapter("reference"), COUNT, SEED, OPTIONS, size=SIZE)


def _steps(outcome: RunOutcome) -> Schedule:
    schedule = parse_scenario(tomllib.loads(outcome.schedule_toml), "<shrunk>", outcome.name)
    return replace(schedule, source="generated", path=None)


def _failing(outcome: RunOutcome) -> set[str]:
    return {r.checker for r in outcome.results if r.valid is False}


def _why(found: Exploration) -> str:
    crashed = [r.error for r in found.runs if r.error]
    return f"{found.examples} schedules explored; adapter errors: {crashed[:3]}"


@pytest.mark.parametrize("name", BUGS)
def test_exploration_finds_and_shrinks_the_planted_bug(name: str, control: Exploration) -> None:
    bug: ModuleType = planted.load(name)
    found = explore(bug.ADAPTER, COUNT, SEED, OPTIONS, invariant=bug.INVARIANT, size=SIZE)

    # (1) a violation within the bound, (2) of the invariant the bug breaks.
    assert found.shrunk, f"{name}: no {bug.INVARIANT} violation: {_why(found)}"
    assert 1 <= found.examples <= COUNT
    first = found.runs[-1]
    assert bug.INVARIANT in _failing(first), f"{name}: first failing run {_failing(first)}"
    # The bug was found among the control's schedules, which the reference passes.
    explored = [run.schedule_toml for run in found.runs]
    assert explored == [run.schedule_toml for run in control.runs[:len(explored)]]
    assert not _failing(control.runs[len(explored) - 1])
    minimal = found.shrunk[0]
    assert bug.INVARIANT in _failing(minimal), minimal.schedule_toml

    # (3) the shrunk schedule is small and fails again when replayed on its own.
    schedule = _steps(minimal)
    assert 1 <= len(schedule.steps) <= STEP_BOUND.get(name, MAX_STEPS), minimal.schedule_toml
    replayed = run_schedule(bug.ADAPTER, schedule, OPTIONS)
    assert replayed.error is None
    assert bug.INVARIANT in _failing(replayed), minimal.schedule_toml
    witness = next(r for r in replayed.results if r.checker == bug.INVARIANT)
    assert witness.violations and witness.violations[0].records
    assert WITNESS.get(name, "") in witness.witness(limit=50), witness.witness(limit=50)

    # The violation is the bug's: the reference passes the same schedule.
    control = run_schedule(load_adapter("reference"), schedule, OPTIONS)
    assert bug.INVARIANT not in _failing(control), minimal.schedule_toml


def test_control_reference_shows_no_violation(control: Exploration) -> None:
    """Same seed, count and generator: the schedules every bug was found among (the seed
    alone fixes the sequence), and the reference passes them all."""
    found = control
    assert not found.shrunk, "\n".join(
        f"{r.checker}: {r.witness(1)}" for m in found.shrunk for r in m.results
        if r.valid is False) + "\n" + found.shrunk[0].schedule_toml
    assert found.examples == COUNT
    assert not [r.error for r in found.runs if r.error]


def test_the_command_line_finds_a_planted_bug(tmp_path: Path) -> None:
    """What a user runs: `durable-chaos run --adapter module:attr --scenarios none`; the
    minimal schedule it saves replays to the same violation."""
    spec = "tests.planted.queue_in_memory:ADAPTER"
    code = main(["run", "--adapter", spec, "--scenarios", "none", "--schedules", "30",
                 "--seed", str(SEED), "--report-dir", str(tmp_path), "--quiet"])
    assert code == 1
    junit = (tmp_path / "junit.xml").read_text(encoding="utf-8")
    assert "liveness" in junit and "<failure" in junit
    saved = sorted((tmp_path / "runs" / "planted-queue-in-memory").glob("shrunk-*/schedule.toml"))
    assert saved, sorted(p.name for p in (tmp_path / "runs").rglob("*"))
    assert main(["replay", "--adapter", spec, str(saved[0]), "--report-dir",
                 str(tmp_path / "replay"), "--quiet"]) == 1


def test_every_invariant_has_a_planted_bug() -> None:
    targets = {planted.load(name).INVARIANT for name in planted.MODULES}
    assert targets == {c.name for c in ALL}
    for name in planted.MODULES:
        adapter = planted.load(name).ADAPTER
        assert isinstance(adapter, SimAdapter) and adapter.name == f"planted-{name}".replace(
            "_", "-")


def test_planting_mechanism_is_faithful(tmp_path: Path) -> None:
    """`variant` re-creates the reference's own code: with names replaced by themselves, the
    history of every run is the reference's, byte for byte."""
    same = SimAdapter("reference", "", variant(executor={"run_tool": executor.run_tool},
                                               effects={"run_step": effects.run_step}))
    compared: list[str] = []
    for schedule in schedules(SEED, 8, SIZE):
        kept = replace(schedule, source="scenario", name=f"s{len(compared)}")
        saved = []
        for where, adapter in (("a", load_adapter("reference")), ("b", same)):
            outcome = run_schedule(adapter, kept, RunOptions(report_dir=tmp_path / where))
            assert outcome.history_path
            saved.append(Path(outcome.history_path).read_bytes())
        assert saved[0] == saved[1], kept.to_toml()
        compared.append(kept.name)
    assert len(compared) == 8


def test_hypothesis_keeps_real_time_under_the_virtual_wall_clock() -> None:
    """A user's Hypothesis tests beside the chaos suite rely on it: Hypothesis stops
    shrinking once its own `perf_counter` says it spent 5 minutes, and under the suite's
    freezer a run moves frozen time by days."""
    probe: dict[str, object] = {"__name__": "hypothesis._probe"}
    exec("import time\ndef now():\n    return time.perf_counter()", probe)
    clock = VirtualClock()
    with wall_clock_follows(clock):
        before = probe["now"]()  # type: ignore[operator]
        clock.jump(9 * 86400.0)
        assert probe["now"]() - before < 60.0  # type: ignore[operator]


SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
# The windows scenario files open on purpose (16-23) and what each design makes of them: the
# reference passes all; the naive variant waits in-call, so every card that waits longer than
# the hand-off pins its deployment, and nothing else breaks.
NEW_SCENARIOS = {
    "16-background-result-while-another-turn-waits": {"pinning-bound"},
    "17-background-result-behind-a-queued-message": {"pinning-bound"},
    "18-lone-provider-500-after-billed": set(),
    "19-redeploy-while-pinned-old-retired": {"pinning-bound"},
    "20-crash-after-email-sent-then-confirm-after-handoff": {"pinning-bound"},
    "21-late-answer-to-a-background-call": {"pinning-bound"},
    "22-rerun-races-a-steering-message": {"pinning-bound"},
    "23-steering-message-after-the-rerun-intent": {"pinning-bound"},
}


@pytest.mark.parametrize("name", sorted(NEW_SCENARIOS))
def test_window_scenarios_pass_on_the_reference_and_fail_naive_as_designed(name: str) -> None:
    schedule = load_scenario(SCENARIOS / f"{name}.toml")
    assert schedule.description and schedule.expected("pinning-bound") == "pass"
    assert name.split("-", 1)[1] in (SCENARIOS / "README.md").read_text(encoding="utf-8")
    reference = run_schedule(load_adapter("reference"), schedule, OPTIONS)
    assert reference.error is None and not _failing(reference), [
        r.witness(1) for r in reference.results if r.valid is False]
    naive = run_schedule(load_adapter("naive"), schedule, OPTIONS)
    assert naive.error is None
    assert _failing(naive) == NEW_SCENARIOS[name]


# Each planted bug of a narrow window, caught by the scenario file that opens it (the default
# `durable-chaos run` runs these whatever the seed).
CAUGHT_BY = {
    "expiry_after_answer": ("02-answered-after-3-days-across-redeploys", "it may end once"),
    "background_never_expires": ("21-late-answer-to-a-background-call",
                                 "an answer applied after max_wait"),
    "drained_at_face_value": ("19-redeploy-while-pinned-old-retired", "was recorded drained"),
    "keyless_model_call": ("18-lone-provider-500-after-billed",
                           "twice without an idempotency key"),
    "duplicate_email": ("20-crash-after-email-sent-then-confirm-after-handoff",
                        "was delivered twice"),
    "rerun_ignores_end": ("22-rerun-races-a-steering-message",
                          "was delivered at t=33.5m after a new message ended its turn"),
    "answer_dropped": ("22-rerun-races-a-steering-message",
                       "accepted at t=33.0m was silently dropped"),
    "approval_after_cancel": ("42-approve-after-cancel-while-the-card-waits-in-call",
                              "after the person cancelled turn s1.turn1 at t=60s, ran the "
                              "tool"),
    "result_filed_under_next_turn": ("04-new-message-during-waiting-turn",
                                     "under turn s1.turn2 of session s1, not its own turn "
                                     "s1.turn1"),
    "card_left_open": ("03-never-answered-expires", "still open at the run's end (t=9.00d), "
                       "although the call ended expired at t=8.00d"),
    "intent_records_another_key": ("07-background-after-handoff",
                                   "attempted under idempotency key charge:s1.turn1.t1, not "
                                   "the key its intent recorded (email:s1.turn1.t1)"),
    "unapproved_call_checked_for_nobody": (
        "53-access-revoked-before-a-resumed-turn-asks-for-its-next-tool",
        "lost access to notify at t=6.0m, before the model asked for it at t=10.0m"),
    "approval_checked_for_the_requester": ("54-approval-by-a-person-who-lost-access",
                                           "although user bob lost access to send_email at "
                                           "t=60s, before the person approved it at t=2.0m"),
    "background_for_any_session": (
        "55-a-stranger-sends-another-sessions-call-to-the-background",
        "s2.turn1.t1 of session s2 went to the background at t=60s at the request of "
        "session s1, which does not own it"),
    "placeholder_on_every_result": ("02-answered-after-3-days-across-redeploys",
                                    "the toolFinished of s1.turn1.t1 calls its result a "
                                    "placeholder, but the outcome is answered"),
    "waited_in_minutes": ("02-answered-after-3-days-across-redeploys",
                          "says the call waited 5s in-call, less than the 5.0m since its "
                          "card was shown"),
    "rejection_names_the_writer": ("09-gc-pause-before-control-row",
                                   "names the writer's own epoch 1 as current: the thread's "
                                   "owner was refused"),
    "charge_intent_without_key": ("15-many-sessions-denied-and-cancelled",
                                  "attempted under idempotency key charge:s3.turn1.t2, but its "
                                  "intent names no key"),
    "queued_results_only": ("17-background-result-behind-a-queued-message",
                            "message s1.m3 arrived at t=11.0m while a turn ran and started "
                            "turn s1.turn3 only at t=15.0m, but was never reported queued"),
    "closed_results_never_written": ("04-new-message-during-waiting-turn",
                                     "the card of s1.turn1.t1 was closed ended_by_message, but "
                                     "the runtime never reported the call's result"),
    "first_run_told_as_rerun": ("01-answered-in-2-minutes",
                                "s1.turn1.t1 reported a re-run at t=2.0m (access granted) "
                                "although its wait was never handed off"),
    "turn_acts_for_the_first_writer": (
        "61-a-turn-acts-for-the-person-whose-message-started-it",
        "email of tool call s1.turn2.t1 was delivered at t=62.5s although user bob lost "
        "access to notify at t=0s, before the model asked for it at t=62s"),
    "approval_taken_as_the_deed": ("01-answered-in-2-minutes",
                                   "s1.turn1.t1 (send_email, a tool that acts on the world) "
                                   "was reported answered at t=2.0m"),
    "idle_holder_waited_for": ("10-gc-pause-holding-control-row",
                               "a write was refused the control row at t=60s by a transaction "
                               "holding it since t=0s (60s)"),
    "background_keeps_its_card": (
        "69-a-call-sent-to-the-background-after-a-cancel-ends-with-its-turn",
        "the card of s1.turn1.t1 was still open at the run's end (t=24.0h), although the call "
        "ended cancelled at t=6.7m"),
    "end_wait_after_answer": (
        "66-an-approval-that-won-over-a-steer-is-already-decided",
        "an answer to s1.turn1.t1 was refused at t=11.0m as ended, which the call never was: "
        "it answered at t=10.0m"),
}


@pytest.mark.parametrize("name", sorted(CAUGHT_BY))
def test_a_scenario_file_catches_the_planted_bug(name: str) -> None:
    bug: ModuleType = planted.load(name)
    scenario, witness = CAUGHT_BY[name]
    outcome = run_schedule(bug.ADAPTER, load_scenario(SCENARIOS / f"{scenario}.toml"), OPTIONS)
    assert outcome.error is None
    result = next(r for r in outcome.results if r.checker == bug.INVARIANT)
    assert result.valid is False, f"{name} passed {scenario}"
    assert witness in result.witness(limit=50)


# The bugs of the effect contract (issue 22) and of the card's truth, as a user finds them: a
# default `durable-chaos run` exits 1. What catches each is a scenario file (`CAUGHT_BY`), so the
# verdict cannot depend on the seed; seeds 0-4 run here with one generated schedule each (the
# full 100 of the default budget cost 9 s a run on a loaded 2-core machine: run by hand, see
# the issue's notes), to show that no seed's schedules change the exit status.
EFFECT_CONTRACT_BUGS = ("rerun_ignores_end", "answer_dropped", "result_filed_under_next_turn",
                        "card_left_open", "intent_records_another_key",
                        "unapproved_call_checked_for_nobody",
                        "approval_checked_for_the_requester", "background_for_any_session",
                        "placeholder_on_every_result", "waited_in_minutes",
                        "rejection_names_the_writer", "charge_intent_without_key",
                        "queued_results_only", "closed_results_never_written",
                        "first_run_told_as_rerun", "turn_acts_for_the_first_writer",
                        "end_wait_after_answer")


@pytest.mark.parametrize("name", EFFECT_CONTRACT_BUGS)
def test_the_default_run_catches_the_effect_contract_bug_for_every_seed(
        name: str, tmp_path: Path) -> None:
    bug: ModuleType = planted.load(name)
    scenario, _ = CAUGHT_BY[name]
    for seed in range(5):
        out = tmp_path / str(seed)
        code = main(["run", "--adapter", f"tests.planted.{name}:ADAPTER", "--seed", str(seed),
                     "--schedules", "1", "--report-dir", str(out), "--quiet"])
        assert code == 1, f"{name}, seed {seed}"
        junit = (out / "junit.xml").read_text(encoding="utf-8")
        assert bug.INVARIANT in junit and "<failure" in junit
        assert scenario.split("-", 1)[1] in junit
