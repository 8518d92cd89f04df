"""The Temporal side of the 8-day approval benchmark, run once on the time-skipping server.

Needs ``temporalio`` and the native ``temporal-test-server`` (``durable-chaos[temporal]``).
Without them the tests skip, except under CI=true, where they fail: CI must run them.
No assertion here is about wall-clock time; all times are the test server's skipped time.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.real

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
INSTALL_HINT = "pip install 'durable-chaos[temporal]'"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI=true requires it ({INSTALL_HINT})")
    pytest.skip(f"{reason} ({INSTALL_HINT})")


def _flow_module() -> ModuleType:
    try:
        importlib.import_module("temporalio")
    except ImportError as exc:
        _unavailable(f"temporalio is not importable: {exc}")
    # Imported by name from benchmarks/: the workflow sandbox re-imports the module by name.
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    mod = importlib.import_module("temporal_flow")
    if mod.find_test_server() is None:
        _unavailable("no native temporal-test-server executable found")
    return mod


def test_answer_on_day_7_resumes_the_same_turn_after_the_handoff() -> None:
    tf = _flow_module()

    async def scenario() -> dict:
        env = await tf.start_environment()
        try:
            async with tf.new_worker(env.client):
                return await tf.run_flow(env, answer_after=timedelta(days=7))
        finally:
            await env.shutdown()

    out = asyncio.run(scenario())
    card, result = out["card"], out["result"]

    # On day 7 the wait had moved to state, and the card names the waiting turn.
    assert card["state"] == "as_state"
    # The hand-off happened after the 5-minute in-call wait, not when the answer came.
    assert result["handed_off"] is True
    # Not an upper bound in hours: on a loaded machine the test server may skip time past
    # the timer before the worker records the hand-off; it still precedes the answer.
    assert timedelta(minutes=5).total_seconds() <= result["handoff_after_s"]
    assert result["handoff_after_s"] <= result["answered_after_s"]
    # Answered on day 7 (within the 8-day maximum), and the same turn resumed and completed.
    assert result["outcome"] == "answered"
    answered_day = result["answered_after_s"] / timedelta(days=1).total_seconds()
    assert 7 <= answered_day < 8
    assert result["turn_id"] == card["turn_id"]
    assert result["tool_call_id"] == card["tool_call_id"]
    assert result["tool_result"] == f"sent:{card['tool_call_id']}:send the report"


def test_unanswered_wait_expires_after_8_days() -> None:
    tf = _flow_module()

    async def scenario() -> dict:
        env = await tf.start_environment()
        try:
            async with tf.new_worker(env.client):
                started = await env.get_current_time()
                handle = await env.client.start_workflow(
                    tf.ApprovalTurn.run,
                    tf.UserMessage(session_id="s-2", text="nobody answers"),
                    id="approval-expires",
                    task_queue=tf.TASK_QUEUE,
                )
                # Waiting for the result lets the server skip time up to the 8-day timer.
                res = await handle.result()
                waited = await env.get_current_time() - started
                return {"result": tf.asdict(res), "waited": waited}
        finally:
            await env.shutdown()

    out = asyncio.run(scenario())
    result = out["result"]
    assert result["handed_off"] is True
    assert result["outcome"] == "expired"
    assert result["answered_after_s"] is None
    assert result["tool_result"] == "expired"
    # It expired at the 8-day maximum, not at the 5-minute hand-off.
    assert timedelta(days=8) <= out["waited"]
