"""Opening one run of an adapter: the one place that knows what the engine kind changes.

The runner (`harness.run`), the adapter contract check (`harness.conformance`) and the
fixtures (`harness.fixtures`) all open a runtime through `open_run`, so the history's wall
clock, the runtime's thresholds and the clock a run's body runs on are chosen here and
nowhere else. The runtime brings its own clock context (`wall_clock()`, as the simulator's
runtime does); one that has none gets the default of its engine: on the simulator, the wall
clock follows the simulator's virtual clock; a real engine keeps the real clock, since its
adapter waits on `time.monotonic()`, which a frozen clock would stop for good.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from contract.ports import Config
from harness.adapters.base import (
    Adapter,
    RunContext,
    Runtime,
    not_a_runtime,
    world_endpoints,
)
from harness.clock import VirtualClock, wall_clock_follows
from harness.history import History

__all__ = [
    "deterministic",
    "open_run",
    "run_history",
    "runtime_clock",
    "runtime_config",
    "suite_clock",
]


def deterministic(adapter: Adapter) -> bool:
    """Whether the adapter's engine acts only inside `advance()`, the same way for a seed
    (the simulator): nothing shows up between two calls, so there is nothing to wait for,
    and its runs are cheap enough for every core."""
    return bool(adapter.engine == "sim")


def run_history(adapter: Adapter) -> History:
    """A fresh history for one run: a real engine's records also carry the real time."""
    if deterministic(adapter):
        return History()
    from harness.scaling import real_seconds

    return History(wall=real_seconds())


def runtime_config(adapter: Adapter) -> Config:
    """The thresholds the adapter's runtime runs with (its `config`, else the defaults)."""
    config = getattr(adapter, "config", None)
    return config if config is not None else Config()


def runtime_clock(runtime: object, adapter: Adapter) -> AbstractContextManager[None]:
    """The clock the body of a run runs on: on a real engine the real one, always (an
    adapter that wraps a simulator as a real engine still waits on `time.monotonic()`);
    else the runtime's own (`wall_clock()`), or the wall clock following the virtual clock
    of the simulator it runs on (`runtime.sim.clock`)."""
    if not deterministic(adapter):
        return nullcontext()
    own = getattr(runtime, "wall_clock", None)
    if callable(own):
        context: AbstractContextManager[None] = own()
        return context
    clock = getattr(getattr(runtime, "sim", None), "clock", None)
    if isinstance(clock, VirtualClock):
        return wall_clock_follows(clock)
    return nullcontext()


def suite_clock(adapter: Adapter) -> AbstractContextManager[None] | None:
    """One wall-clock freezer for many runs of `adapter`, or None when its runs keep the
    real clock. Starting freezegun costs more than a whole simulated schedule; each run
    then moves the one freezer to its own virtual time (`runtime_clock`)."""
    if not deterministic(adapter):
        return None
    return wall_clock_follows(VirtualClock())


@contextmanager
def open_run(adapter: Adapter, seed: int, history: History, *, hosts: int = 2,
             opened: Callable[[Runtime], Any] | None = None,
             check: bool = True) -> Iterator[Runtime]:
    """Open `adapter`'s runtime for one run and run the body on the runtime's clock.

    It does not close the runtime: `opened` gets it as soon as `open()` returned, and the
    caller closes it (the runner under its own limit, after the body failed or not). With
    `check`, what `open()` returned must be a `Runtime` whose declared world endpoints are
    known (else TypeError or UsageError, as an `open()` that fails); the contract check
    passes False and names the problem itself.
    """
    ctx = RunContext(seed=seed, history=history, config=runtime_config(adapter), hosts=hosts)
    runtime = adapter.open(ctx)
    if opened is not None:
        opened(runtime)
    if check:
        if (wrong := not_a_runtime(runtime)) is not None:
            raise TypeError(wrong)
        world_endpoints(runtime)
    with runtime_clock(runtime, adapter):
        yield runtime
