"""A user's restate-sdk services on the simulator (harness.sdk): the context API table, the
SDK's own helpers on the simulator's futures, determinism, the world over httpx, refusals."""

from __future__ import annotations

import datetime as dt
import importlib
import inspect
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import restate

from harness.adapters.base import RunContext
from harness.clock import EPOCH, wall_clock_follows
from harness.errors import SdkCallRefused
from harness.history import History
from harness.sdk import REFUSED, SUPPORTED, SdkContext, SdkSimRuntime
from harness.sdk.api import CONTEXT_CLASSES, HELPERS

OUTSIDE = Path(__file__).parent / "outside_adapters"


@pytest.fixture
def svc() -> Iterator[Any]:
    """tests/outside_adapters/sdk_services.py, imported as a user's own module."""
    sys.path.insert(0, str(OUTSIDE))
    try:
        module = importlib.import_module("sdk_services")
        module.EFFECTS.clear()
        yield module
    finally:
        sys.path.remove(str(OUTSIDE))
        sys.modules.pop("sdk_services", None)
        while _OPEN:
            _OPEN.pop().close()


_OPEN: list[SdkSimRuntime] = []


def runtime(svc: Any, seed: int = 7) -> SdkSimRuntime:
    """A run, closed after the test (the `svc` fixture) as the runner closes every run."""
    rt = SdkSimRuntime(RunContext(seed=seed, history=History()), svc.SERVICES)
    _OPEN.append(rt)
    return rt


def result(rt: SdkSimRuntime, invocation: str) -> Any:
    inv = rt.sim.invocations[invocation]
    assert inv.status == "completed", (inv.status, inv.error)
    return json.loads(inv.result) if inv.result else None


# -- the API table -------------------------------------------------------------------------


def public_methods() -> set[str]:
    names: set[str] = set()
    for cls_name in CONTEXT_CLASSES:
        cls = getattr(restate, cls_name)
        names |= {n for n, v in inspect.getmembers(cls) if not n.startswith("_")
                  and callable(v)}
    return names


def test_every_public_context_method_is_supported_or_refused() -> None:
    # A new SDK version's new method fails here, not in a user's run.
    methods = public_methods()
    assert methods - set(SUPPORTED) - set(REFUSED) == set()
    assert set(SUPPORTED) & set(REFUSED) == set()
    assert set(SUPPORTED) | set(REFUSED) <= methods  # no stale rows
    assert not SdkContext.__abstractmethods__
    for name in HELPERS:
        assert callable(getattr(restate, name))


@pytest.mark.parametrize("call", sorted(REFUSED))
def test_each_refused_call_raises_naming_it(call: str) -> None:
    from harness.sdk.context import Refused

    ctx = object.__new__(SdkContext)
    args = {"scope": ("s",), "signal": ("n",), "resolve_signal": ("i", "n", 1),
            "reject_signal": ("i", "n", "m"), "cancel_invocation": ("i",),
            "attach_invocation": ("i",)}[call]
    with pytest.raises(Refused) as caught:
        getattr(ctx, call)(*args)
    assert isinstance(caught.value.error, SdkCallRefused)
    assert f"ctx.{call}()" in str(caught.value.error)


def test_a_refused_call_stops_the_run_with_the_error(svc: Any) -> None:
    rt = runtime(svc)
    rt.send("Racer/scoped", key="r")
    with pytest.raises(SdkCallRefused, match=r"ctx.scope\(\) is not supported"):
        rt.advance(10)


# -- services written outside this project, unchanged ----------------------------------------


def test_outside_services_run_unchanged(svc: Any) -> None:
    rt = runtime(svc)
    inv = rt.send("Counter/tour", "c1", key="c1")
    rt.advance(3 * 86400)
    out = result(rt, inv)
    assert out["greeting"] == "hello c1"
    assert out["failed"] == "404 nobody to greet"  # TerminalError, status code kept
    assert out["total"] == 5 and out["keys"] == ["scratch"]
    assert out["squares"] == [0, 1, 4] and out["done"] == 1 and out["seen"] == ["a"]
    assert out["signup"] == "signed up user-c1 (a@b)"
    # ctx.time(): the virtual wall clock, after the 2-day sleep and a few latencies.
    assert out["now"] == pytest.approx((EPOCH + dt.timedelta(days=2)).timestamp(), abs=60)
    assert rt.object_state("Counter", "bank") == {"total": 105}  # the delayed send ran
    assert rt.object_state("Counter", "c1") == {}  # cleared
    assert rt.object_state("Signup", "user-c1") == {"email": "a@b"}
    rt.close()


def test_the_sdks_select_races_an_awakeable_and_a_sleep(svc: Any) -> None:
    rt = runtime(svc)
    fast = rt.send("Racer/race", 60, key="fast")
    slow = rt.send("Racer/race", 60, key="slow")
    rt.advance(10)
    rt.send("Racer/answer", "yes", key="fast")
    rt.advance(120)
    assert result(rt, fast) == "answer yes"
    assert result(rt, slow) == "timeout"
    # A late answer after the timer won is dropped: the journal ordered the timer first.
    rt.send("Racer/answer", "late", key="slow")
    rt.advance(200)
    assert rt.object_state("Racer", "slow")["result"] == "timeout"


def test_a_crash_replays_the_journal_without_rerunning_completed_steps(svc: Any) -> None:
    rt = runtime(svc)
    inv = rt.send("Racer/race", 600, key="r")
    rt.advance(10)
    for host in list(rt.sim.hosts):
        rt.crash_host(host)
    rt.advance(100)
    rt.send("Racer/answer", "after crash", key="r")
    rt.advance(700)
    assert result(rt, inv) == "answer after crash"
    started = [r for r in rt.history.of_kind("attempt.started") if r.invocation == inv]
    assert len(started) >= 2 and started[-1].data["replay"] > 0


def test_completed_runs_are_not_rerun_after_a_crash(svc: Any) -> None:
    rt = runtime(svc)
    rt.arm("effect.model.after_call", "crash", 0, 1)
    inv = rt.send("Clocks/model", key="m")
    rt.advance(60)
    # The model call was in flight when its host crashed: it ran again (at least once),
    # under the same idempotency key, so the world billed it once.
    assert result(rt, inv)["text"].startswith("done")
    assert [r.data["effect"] for r in rt.history.of_kind("effect.deduplicated")] == ["model"]


# -- determinism -----------------------------------------------------------------------------


def stray_reads(svc: Any, seed: int) -> dict[str, Any]:
    rt = runtime(svc, seed)
    with wall_clock_follows(rt.sim.clock):
        inv = rt.send("Clocks/stray", key="k")
        rt.advance(100)
    out: dict[str, Any] = result(rt, inv)
    rt.close()  # the run ends: the process's module `random` is given back
    _OPEN.remove(rt)
    return out


def test_reads_outside_the_journal_are_deterministic_and_virtual(svc: Any) -> None:
    first, again, other = stray_reads(svc, 1), stray_reads(svc, 1), stray_reads(svc, 2)
    assert first == again
    assert first["random"] != other["random"] and first["uuid4"] != other["uuid4"]
    # The wall clock reads virtual time: the run's epoch plus the world's latency.
    assert EPOCH.timestamp() <= first["time"] < EPOCH.timestamp() + 10
    assert first["lookup"]["spec"]["needs_approval"] is True


def test_the_module_random_state_outside_a_run_is_left_alone(svc: Any) -> None:
    import random

    random.seed(1234)
    expected = random.Random(1234).random()
    stray_reads(svc, 1)
    assert random.random() == expected


def test_reads_of_the_process_entropy_are_named_once_per_run(svc: Any) -> None:
    rt = runtime(svc)
    inv = rt.send("Clocks/entropy", key="e")
    rt.send("Clocks/entropy", key="f")
    rt.advance(60)
    named = rt.history.of_kind("sdk.nondeterministic")
    assert [(r.data["source"], r.invocation) for r in named] == [
        ("os.urandom (secrets, random.SystemRandom)", inv)]
    assert len(result(rt, inv)) == 8


def test_deterministic_handlers_name_nothing(svc: Any) -> None:
    rt = runtime(svc, 1)
    with wall_clock_follows(rt.sim.clock):
        rt.send("Clocks/stray", key="k")
        rt.advance(100)
    assert not rt.history.of_kind("sdk.nondeterministic")


# -- the world over httpx --------------------------------------------------------------------


def test_a_provider_fault_reaches_the_users_http_client(svc: Any) -> None:
    rt = runtime(svc)
    rt.world.provider.inject("500_before")
    inv = rt.send("Clocks/model", key="m")
    rt.advance(60)
    failed = rt.history.of_kind("attempt.failed")
    assert failed and "model answered 500" in failed[0].data["error"]
    assert result(rt, inv)["text"].startswith("done")  # the retry got through


def test_a_request_outside_the_world_fails_naming_the_url(svc: Any) -> None:
    import httpx

    from harness.sdk.transport import routing_to

    rt = runtime(svc)

    async def call() -> None:
        async with httpx.AsyncClient() as client:
            await client.get("https://example.com/x")

    with routing_to(rt.transport), pytest.raises(httpx.ConnectError,
                                                 match=r"example\.com/x is outside"):
        call().send(None)


def test_workflow_run_happens_once_per_key(svc: Any) -> None:
    rt = runtime(svc)
    first = rt.send("Signup/run_signup", {"email": "x@y"}, key="u1")
    second = rt.send("Signup/run_signup", {"email": "z@y"}, key="u1")
    rt.advance(10)
    assert result(rt, first) == "signed up u1 (x@y)"
    assert rt.sim.invocations[second].error is not None
    assert "already ran" in str(rt.sim.invocations[second].error)


def test_registering_something_else_is_a_usage_error() -> None:
    from harness.errors import UsageError
    from harness.sdk import sdk_app

    with pytest.raises(UsageError, match=r"expected restate\.Service"):
        sdk_app([object()], "v1")


def test_run_options_max_attempts_make_the_last_failure_terminal(svc: Any) -> None:
    rt = runtime(svc)
    inv = rt.send("Racer/flaky", key="f")
    rt.advance(600)
    assert result(rt, inv) == "gave up: flaky failed after 3 attempts: ValueError('always')"
    assert svc.EFFECTS == ["flaky"] * 3


def test_a_workflow_waits_on_its_promise_resolved_by_a_shared_handler(svc: Any) -> None:
    rt = runtime(svc)
    run = rt.send("Signup/run_signup", {"email": "x@y", "wait": True}, key="u2")
    rt.advance(10)
    assert rt.sim.invocations[run].status == "suspended"
    before = rt.send("Signup/peek", key="u2")
    rt.advance(20)
    rt.send("Signup/approve", "ok", key="u2")
    rt.advance(30)
    after = rt.send("Signup/peek", key="u2")
    rt.advance(40)
    assert result(rt, before) is None and result(rt, after) == "ok"
    assert result(rt, run) == "signed up u2 after ok"
