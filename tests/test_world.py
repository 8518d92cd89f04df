"""The world's idempotency: once per key, and never "once" for requests without a key."""

from __future__ import annotations

import asyncio

from harness.checkers import CheckConfig, NoDuplicateEffects
from harness.history import History
from harness.world import World


async def _no_wait(seconds: float) -> None:
    return None


def _world() -> tuple[World, History]:
    history = History()
    return World(history, now=lambda: 0.0, sleep=_no_wait), history


def test_a_keyed_retry_is_deduplicated() -> None:
    world, history = _world()
    for _ in range(2):
        asyncio.run(world.outbox.send_email(message_id="email:tc1", to="a", subject="s",
                                            body="b", tool_call="tc1"))
    assert [r.kind for r in history.records if r.kind.startswith("effect.")] == [
        "effect.attempted", "effect.delivered", "effect.attempted", "effect.deduplicated"]


def test_emails_without_a_key_are_each_delivered_and_the_duplicate_is_caught() -> None:
    """A missing key is no key: the second keyless email of one tool call reaches the person
    (the world must not record it as deduplicated) and no-duplicate-effects says so."""
    world, history = _world()
    for message_id in (None, ""):
        asyncio.run(world.outbox.send_email(
            message_id=message_id, to="a", subject="s", body="b",  # type: ignore[arg-type]
            tool_call="tc1"))
    delivered = history.of_kind("effect.delivered")
    assert len(delivered) == 2 and not history.of_kind("effect.deduplicated")
    assert all(r.key is None for r in delivered)
    assert world.state.delivered == {}
    result = NoDuplicateEffects().check(history, CheckConfig())
    assert result.valid is False
    assert "email tc1 was delivered twice without an idempotency key" in result.witness()


def test_keyless_emails_of_different_calls_are_two_emails_not_one() -> None:
    world, history = _world()
    for tc in ("tc1", "tc2"):
        asyncio.run(world.outbox.send_email(
            message_id=None, to="a", subject="s", body="b",  # type: ignore[arg-type]
            tool_call=tc))
    assert len(history.of_kind("effect.delivered")) == 2
    assert NoDuplicateEffects().check(history, CheckConfig()).valid is True
