"""Chaos tests of my own, next to the built-in suite, written with the plugin's fixtures.

They run against the adapter of the session (`chaos_adapter` in pytest.ini here, or every
`--chaos-adapter` given: each test then runs once per adapter).
"""

from __future__ import annotations

from harness.adapters import Runtime
from harness.fixtures import ChaosClock, ChaosRunner
from harness.history import History
from harness.world import World

EMAIL: dict[str, object] = {"message_id": "s1.m1", "text": "email the contract",
                            "user": "alice", "plan": ["send_email"]}


def test_a_card_waits_for_the_person(chaos_runtime: Runtime, chaos_world: World,
                                     chaos_clock: ChaosClock) -> None:
    chaos_runtime.send_message("s1", EMAIL)
    chaos_clock.advance(60)
    [card] = chaos_world.cards.open_cards("s1")
    assert card.tool == "send_email"
    assert chaos_world.state.deliveries("email") == []  # nothing sent before the answer

    chaos_runtime.answer(card.tool_call, "approve", "alice")
    chaos_clock.advance(60)
    assert len(chaos_world.state.deliveries("email")) == 1
    assert chaos_world.cards.open_cards("s1") == []


def test_nothing_stays_pinned_across_a_three_day_wait(chaos_run: ChaosRunner) -> None:
    run = chaos_run("""
        name = "answer-after-3-days-across-a-release"

        [[step]]
        at = "0s"
        do = "message"
        session = "s1"
        tools = ["send_email"]

        [[step]]
        at = "1d"
        do = "deploy"

        [[step]]
        at = "3d"
        do = "answer"
        session = "s1"
    """)
    assert run["pinning-bound"].valid, run["pinning-bound"].witness()
    assert not run.failed, run.violated
    drained = run.history.of_kind("deployment.drained")
    assert drained, "the first deployment never drained"


def test_a_crash_after_sending_does_not_send_twice(chaos_run: ChaosRunner) -> None:
    run = chaos_run("""
        [[step]]
        at = "0s"
        do = "arm"
        point = "effect.email.after_send"
        action = "crash"

        [[step]]
        at = "0s"
        do = "message"
        session = "s1"
        tools = ["notify"]
    """)
    history: History = run.history
    assert history.of_kind("faultpoint.reached"), "the armed point was never reached"
    assert len(history.of_kind("effect.delivered")) == len(
        {r.key for r in history.of_kind("effect.delivered")})
    assert run["no-duplicate-effects"].valid, run["no-duplicate-effects"].witness()
