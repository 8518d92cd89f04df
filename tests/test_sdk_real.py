"""The example agent's own service objects on a real restate-server (the SDK's ASGI app on
hypercorn) and on the simulator: one approval story, the same outcome on both.

Needs restate-server (`make restate`); skips without it, fails under CI=true.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from harness.adapters.base import RunContext
from harness.components.net import wait_until
from harness.history import History
from harness.sdk import SdkSimRuntime
from harness.world_server import WorldServer

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[1]
EMAIL = {"message_id": "s1.m1", "text": "email bob", "user": "alice", "plan": ["send_email"]}


@pytest.fixture(autouse=True, scope="module")
def _restate() -> None:
    from harness.components.restate import RestateUnavailable, find_restate_server

    try:
        find_restate_server()
    except RestateUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and restate-server is required: {exc}", pytrace=False)
        pytest.skip(str(exc))


def story_on_the_simulator() -> dict[str, Any]:
    from examples.restate_sdk_agent import agent

    rt = SdkSimRuntime(RunContext(seed=1, history=History()), agent.build())
    inv = rt.send("Session/on_message", EMAIL, key="s1")
    rt.advance(60)
    [card] = rt.world.state.cards.values()
    rt.send("Session/answer", {"tool_call": card.tool_call, "decision": "approve"}, key="s1")
    rt.advance(120)
    out = {"result": rt.sim.invocations[inv].result.decode(),
           "emails": rt.world.state.deliveries("email"), "card": card.closed}
    rt.close()
    return out


def test_the_same_services_answer_the_same_on_real_restate_and_the_simulator() -> None:
    from harness.sdk.real import served

    history = History()
    world = WorldServer(history, now=lambda: 0.0).start()
    try:
        env = {"AGENT_WORLD_URL": world.url, "PYTHONPATH": str(ROOT)}
        with served("examples.restate_sdk_agent.agent:app", env=env, cwd=ROOT) as restate:
            admin = restate.admin
            invocation = admin.send("Session", "on_message", "s1", EMAIL)
            card = wait_until(lambda: next(iter(world.world.state.cards.values()), None),
                              timeout=90, what="the approval card")
            admin.invoke("Session", "answer", "s1",
                         {"tool_call": card.tool_call, "decision": "approve"})
            result = admin.attach(invocation)
        real = {"result": f'"{result}"', "emails": world.world.state.deliveries("email"),
                "card": card.closed}
    finally:
        world.stop()
    assert real == story_on_the_simulator()
    assert real["emails"] == ["mail-s1.s1.m1.t1"] and real["card"] == "answered"


def test_the_differential_check_finds_no_difference_on_a_gc_pause() -> None:
    from examples.restate_sdk_agent.adapter import ADAPTER
    from harness.schedules.scenario_file import load_scenario
    from harness.sdk.differential import REAL_SCENARIOS, differences

    schedule = load_scenario(REAL_SCENARIOS / "10-gc-pause-holding-control-row.toml")
    assert differences(ADAPTER, [schedule]) == []
