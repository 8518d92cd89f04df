"""The world's idempotency (once per key, and never "once" for requests without a key), and
its services failing the ways `contract.services.SERVICE_FAULTS` says."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from contract.ports import ProviderError
from contract.services import (
    RETRY_AFTER,
    SERVICE_FAULTS,
    SERVICES,
    ServiceError,
    ServiceFault,
    body_error,
)
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


# --------------------------------------------------------------------------- service faults

def _calls(world: World) -> dict[str, Callable[[], Awaitable[Any]]]:
    """One call of each service, each doing its own work (an effect, a card, a lookup)."""
    return {
        "provider": lambda: world.provider.complete(
            session="s1", turn="s1.turn1", step=0,
            messages=[{"role": "user", "plan": []}], idempotency_key="model:s1.turn1:0"),
        "email": lambda: world.outbox.send_email(message_id="email:tc1", to="a", subject="s",
                                                 body="b", tool_call="tc1"),
        "payments": lambda: world.ledger.charge(idempotency_key="charge:tc1", amount=5,
                                                tool_call="tc1"),
        "identity": lambda: world.directory.has_access("alice", "send_email"),
        "cards": lambda: world.cards.show_card(session="s1", turn="s1.turn1", tool_call="tc1",
                                               tool="send_email", args={}),
    }


def _work_done(world: World, history: History, service: str) -> bool:
    if service == "cards":
        return "tc1" in world.state.cards
    if service == "identity":
        return False  # a read: nothing to see but the answer
    return bool(history.of_kind("effect.delivered"))


@pytest.mark.parametrize("service", SERVICES)
@pytest.mark.parametrize("fault", SERVICE_FAULTS, ids=lambda f: f.name)
def test_every_service_fails_every_way_as_the_table_says(service: str,
                                                         fault: ServiceFault) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    history = History()
    world = World(history, now=lambda: 0.0, sleep=sleep)
    world.services.inject(service, fault.name)
    call = _calls(world)[service]
    error: ServiceError | None = None
    answer: Any = None
    try:
        answer = asyncio.run(call())
    except ServiceError as exc:
        error = exc
    [record] = history.of_kind("service.fault")
    assert (record.get("service"), record.get("fault")) == (service, fault.name)
    if service != "identity":
        assert _work_done(world, history, service) is fault.done
    if fault.presents == "status":
        assert error is not None and error.status == fault.status
        assert isinstance(error, ProviderError) is (service == "provider")
        assert (error.retry_after is not None) is (fault.status == 429)
    elif fault.presents == "no-answer":
        assert error is not None and error.status is None
        assert world.services.timeout in slept and record.get("duration") == slept[-1]
    elif fault.presents == "slow":
        assert error is None and world.services.slow in slept
        assert record.get("duration") == world.services.slow
    else:  # a 200 whose body says error: the body where the answer has one, else raised
        if service in ("provider", "email", "payments"):
            assert error is None and body_error(answer) is not None
        else:
            assert error is not None and error.status == 200
    # The fault is spent: the next call goes through and does the work.
    world.services.clock = lambda: 1000.0  # past any Retry-After
    asyncio.run(call())
    assert len(history.of_kind("service.fault")) == 1
    if service != "identity":
        assert _work_done(world, history, service)


def test_a_charge_retried_after_a_500_after_the_work_is_one_charge() -> None:
    world, history = _world()
    world.services.inject("payments", "500_after")
    with pytest.raises(ServiceError):
        asyncio.run(world.ledger.charge(idempotency_key="charge:tc1", amount=5,
                                        tool_call="tc1"))
    asyncio.run(world.ledger.charge(idempotency_key="charge:tc1", amount=5, tool_call="tc1"))
    assert [r.kind for r in history.records if r.kind.startswith("effect.")] == [
        "effect.attempted", "effect.delivered", "effect.attempted", "effect.deduplicated"]
    assert NoDuplicateEffects().check(history, CheckConfig()).valid is True


def test_a_429_throttles_its_service_until_retry_after_has_passed() -> None:
    now = [0.0]
    history = History()
    world = World(history, now=lambda: now[0], sleep=_no_wait)
    world.services.inject("email", "429")

    def send() -> Any:
        return asyncio.run(world.outbox.send_email(message_id="email:tc1", to="a",
                                                   subject="s", body="b", tool_call="tc1"))

    with pytest.raises(ServiceError) as first:
        send()
    assert first.value.retry_after == RETRY_AFTER
    now[0] = RETRY_AFTER / 2  # too soon: 429 again, recorded as the throttle
    with pytest.raises(ServiceError):
        send()
    assert [r.get("throttled") for r in history.of_kind("service.fault")] == [None, True]
    assert not history.of_kind("effect.delivered")
    now[0] = RETRY_AFTER
    send()
    assert len(history.of_kind("effect.delivered")) == 1


def test_an_unknown_service_or_fault_is_refused_naming_the_known_ones() -> None:
    world, _ = _world()
    with pytest.raises(ValueError, match="unknown service 'ledger'"):
        world.services.inject("ledger", "429")
    with pytest.raises(ValueError, match="unknown service fault '503'"):
        world.services.inject("payments", "503")
    world.services.inject("provider", "500_after_billed")  # the provider's older word
    assert world.services.pending("provider") == 1
