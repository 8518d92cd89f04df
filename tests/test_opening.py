"""harness.adapters.opening: how the runner, the contract check and the fixtures open a run.

Pinned here on small stand-ins: the caller gets the runtime to close even when what open()
returned fails its check; the body runs on the runtime's own clock on the simulator and on
the real clock on a real engine; a suite of simulated runs shares one frozen clock.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from harness.adapters import RunContext, open_run, run_history, suite_clock
from harness.history import History


class Stub:
    """An adapter whose open() returns `made` (a runtime, or something that is not one)."""

    name, description = "stub", "a stand-in"

    def __init__(self, engine: str, made: Any) -> None:
        self.engine, self.made = engine, made
        self.contexts: list[RunContext] = []

    def open(self, ctx: RunContext) -> Any:
        self.contexts.append(ctx)
        return self.made


class OwnClock:
    """A runtime that brings its own clock context, and records when it was inside it."""

    def __init__(self) -> None:
        self.inside = False

    @contextmanager
    def wall_clock(self) -> Iterator[None]:
        self.inside = True
        try:
            yield
        finally:
            self.inside = False


def test_the_caller_gets_the_runtime_to_close_even_when_its_check_fails() -> None:
    made = object()  # not a Runtime
    opened: list[Any] = []
    with pytest.raises(TypeError, match="lacks world"), \
            open_run(Stub("sim", made), 7, History(), opened=opened.append):
        pass
    assert opened == [made]


def test_the_context_carries_the_seed_the_hosts_and_the_runtime_s_thresholds() -> None:
    from contract.ports import Config

    adapter = Stub("sim", OwnClock())
    with open_run(adapter, 7, History(), hosts=3, check=False):
        pass
    [ctx] = adapter.contexts
    assert (ctx.seed, ctx.hosts, ctx.config) == (7, 3, Config())


def test_a_simulated_run_s_body_runs_on_the_runtime_s_own_clock() -> None:
    runtime = OwnClock()
    with open_run(Stub("sim", runtime), 0, History(), check=False) as opened:
        assert opened is runtime and runtime.inside
    assert not runtime.inside


def test_a_real_engine_keeps_the_real_clock_even_with_a_runtime_that_has_its_own() -> None:
    runtime = OwnClock()
    with open_run(Stub("real", runtime), 0, History(), check=False):
        assert not runtime.inside
        before = time.time()
        assert time.time() >= before  # not frozen: nothing replaced the real clock


def test_a_suite_of_simulated_runs_shares_one_frozen_clock_and_a_real_one_none() -> None:
    assert suite_clock(Stub("real", None)) is None
    clock = suite_clock(Stub("sim", None))
    assert clock is not None
    with clock:
        first = time.time()
        assert time.time() == first  # frozen until a run moves it


def test_only_a_real_engine_s_history_records_the_real_time_too() -> None:
    simulated, real = run_history(Stub("sim", None)), run_history(Stub("real", None))
    simulated.add("run.end")
    real.add("run.end")
    assert simulated[-1].wall is None
    assert real[-1].wall is not None
