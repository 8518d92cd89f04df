"""Service faults end to end: the reference under each, and the same faults over HTTP.

The table (`contract.services.SERVICE_FAULTS`) is applied in one place (`harness.world.
Services`); these tests pin what a runtime sees of it: the scenario files 30-32 on the
reference (every effect once, a 200 that says error never taken for an answer), and the world
server presenting each fault over HTTP to the workers' client as it does in-process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from contract.ports import ProviderError
from contract.services import SERVICE_FAULTS, ServiceError, ServiceFault
from harness.adapters import load_adapter
from harness.fixtures import _Recording
from harness.history import History
from harness.run import RunOptions, run_schedule
from harness.schedules.scenario_file import load_scenario
from harness.world_server import WorldServer
from reference_impl.worker_common import WorldClient

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def _run(name: str) -> tuple[History, bool]:
    recording = _Recording(load_adapter("reference"))
    outcome = run_schedule(recording, load_scenario(SCENARIOS / name),
                           RunOptions(report_dir=None, save_history=False))
    assert recording.history is not None and outcome.error is None, outcome.error
    return recording.history, outcome.failed


def _delivered(history: History, effect: str) -> list[str]:
    return [r.key or "" for r in history.of_kind("effect.delivered")
            if r.get("effect") == effect]


def test_a_charge_that_fails_after_the_work_is_charged_once() -> None:
    history, failed = _run("30-charge-fails-after-the-work.toml")
    assert not failed
    assert [r.get("fault") for r in history.of_kind("service.fault")] == ["500_after"]
    # Charged when the service did the work (before the 500), and never again: the retry
    # after the confirmation carries the same key.
    assert _delivered(history, "charge") == ["charge:s1.turn1.t1"]
    assert [r.key for r in history.of_kind("effect.deduplicated")] == ["charge:s1.turn1.t1"]
    assert [r.get("outcome") for r in history.of_kind("tool.result")] == ["held", "answered"]


def test_a_200_that_says_error_is_not_taken_for_a_sent_email() -> None:
    history, failed = _run("31-email-200-with-an-error-body.toml")
    assert not failed
    records = list(history.records)
    [fault] = [i for i, r in enumerate(records) if r.kind == "service.fault"]
    [sent] = [i for i, r in enumerate(records)
              if r.kind == "effect.delivered" and r.get("effect") == "email"]
    # No result may claim the email before the world delivered it.
    answered = [i for i, r in enumerate(records)
                if r.kind == "tool.result" and r.get("outcome") == "answered"]
    assert answered and all(i > sent for i in answered)
    assert fault < sent


def test_every_service_throttled_or_slow_still_delivers_every_effect_once() -> None:
    history, failed = _run("32-every-service-throttled-and-slow.toml")
    assert not failed
    faults = [(r.get("service"), r.get("fault"), r.get("throttled"))
              for r in history.of_kind("service.fault")]
    assert ("provider", "429", True) in faults  # the engine's first retry came too soon
    assert {s for s, _, _ in faults} == {"provider", "cards", "payments", "email", "identity"}
    assert _delivered(history, "charge") == ["charge:s1.turn1.t1"]
    assert _delivered(history, "email") == ["email:s1.turn1.t2"]
    assert [r.get("reason") for r in history.of_kind("turn.ended")] == ["completed"]


# --------------------------------------------------------------------------- over HTTP


@pytest.fixture
def served() -> Iterator[tuple[WorldServer, WorldClient, History]]:
    history = History()
    server = WorldServer(history, now=lambda: 0.0, model_latency=0.0, effect_latency=0.0,
                         provider_timeout=0.05, slow=0.05, retry_after=30.0).start()
    try:
        yield server, WorldClient(server.url, server.url, "h1"), history
    finally:
        server.stop()


@pytest.mark.parametrize("fault", SERVICE_FAULTS, ids=lambda f: f.name)
def test_the_world_server_presents_each_fault_as_in_process(
        served: tuple[WorldServer, WorldClient, History], fault: ServiceFault) -> None:
    server, client, history = served
    server.world.services.inject("payments", fault.name)
    server.world.services.inject("provider", fault.name)

    def charge() -> object:
        return asyncio.run(client.charge(idempotency_key="charge:tc1", amount=5,
                                         tool_call="tc1"))

    def complete() -> object:
        return asyncio.run(client.complete(session="s1", turn="s1.turn1", step=0,
                                           messages=[{"role": "user", "plan": []}],
                                           idempotency_key="model:s1.turn1:0"))

    for call, effect, error in ((charge, "charge", ServiceError),
                                (complete, "model", ProviderError)):
        caught: BaseException | None = None
        try:
            call()
        except (ServiceError, httpx.TransportError) as exc:
            caught = exc
        delivered = [r for r in history.of_kind("effect.delivered")
                     if r.get("effect") == effect]
        assert bool(delivered) is fault.done, (effect, fault.name)
        if fault.presents == "slow":
            assert caught is None
        elif fault.presents == "no-answer":
            # The connection closed without an answer: the model client says ProviderError,
            # the others let the transport error go on (after reporting the unknown outcome).
            assert isinstance(caught, ProviderError if effect == "model"
                              else httpx.TransportError), caught
        else:
            assert isinstance(caught, error), caught
            assert isinstance(caught, ServiceError)
            assert caught.status == fault.status
            # Retry-After over HTTP is the header, in whole seconds.
            assert caught.retry_after == (30.0 if fault.status == 429 else None)
    assert [r.get("service") for r in history.of_kind("service.fault")] == [
        "payments", "provider"]


def test_a_provider_step_of_before_reads_as_a_service_fault_on_the_provider() -> None:
    """Scenario files written before service faults stay valid, and mean what they meant."""
    schedule = load_scenario(SCENARIOS / "12-provider-500-after-billed.toml")
    faults = [dict(s.params) for s in schedule.steps if s.is_fault]
    assert faults == [{"service": "provider", "fault": "500_after", "times": 1},
                      {"service": "provider", "fault": "429", "times": 1},
                      {"service": "provider", "fault": "timeout", "times": 1}]
    assert {s.action for s in schedule.steps if s.is_fault} == {"service-fault"}
    # Written back, it is a service-fault step that reads the same.
    assert 'do = "service-fault"' in schedule.to_toml()
