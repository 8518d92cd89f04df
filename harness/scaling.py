"""Time scaling, for a real engine the harness cannot skip time on.

Scenario files and the checkers speak scenario time ("answer at 3 days", "pinned at most 5
minutes"). The simulator and the Restate path run on a virtual clock, so scenario time costs
no real time. An engine without time skipping and without a timer port the harness can drive
(Temporal's dev server, DBOS) runs on the real clock instead; its adapter then maps scenario
time onto real time with a fixed factor, and the application runs with shorter thresholds in
the same proportion: at 10 scenario seconds per real second, a scenario's "60s" takes 6 real
seconds.

- `TimeScale`: the factor, and the conversions both ways.
- `ScaledClock`: a runtime's `now()` and `advance()` on that scale, over an injected
  monotonic clock and sleep (the real ones by default), as Trio injects its clock.
- `real_seconds()`: a clock of real seconds since it was made; the harness gives it to the
  history of every run on a real engine (`History(wall=...)`), so each record carries its
  real second beside its scenario time, and witnesses print both (`Record.describe`).

Nothing here imports an engine or an extra: an adapter imports it at no cost.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from harness.errors import ConfigError

__all__ = ["ScaledClock", "TimeScale", "fmt_real", "real_seconds"]

# Taken when this module is imported, before any freezegun freezer can replace them: real
# seconds must stay real while simulated runs freeze the wall clock around them.
_PERF_COUNTER = time.perf_counter
_SLEEP = time.sleep
_RESOLUTION = 1e-6  # real seconds


@dataclass(frozen=True, slots=True)
class TimeScale:
    """`per_real_second` scenario seconds pass in each real second (1.0: unscaled)."""

    per_real_second: float

    def __post_init__(self) -> None:
        factor = self.per_real_second
        if isinstance(factor, bool) or not isinstance(factor, int | float) or not (
                math.isfinite(factor) and factor > 0):
            raise ConfigError(
                f"Expected a finite number > 0 of scenario seconds per real second but got "
                f"per_real_second={factor!r} (type={type(factor).__name__}); e.g. "
                "TimeScale(10.0) runs 60 scenario seconds in 6 real seconds")

    def real(self, scenario_seconds: float) -> float:
        """How many real seconds `scenario_seconds` take."""
        return scenario_seconds / self.per_real_second

    def scenario(self, real_seconds: float) -> float:
        """How many scenario seconds `real_seconds` are."""
        return real_seconds * self.per_real_second


class ScaledClock:
    """Scenario time of a runtime on the real clock: `now()` and `sleep_until()`.

    `start()` sets scenario time 0 (call it once the runtime is up, so start-up time is not
    scenario time). `monotonic` and `sleep` are injectable for tests; the defaults are the
    real ones.
    """

    __slots__ = ("_monotonic", "_sleep", "_t0", "scale")

    def __init__(self, scale: TimeScale, *, monotonic: Callable[[], float] = _PERF_COUNTER,
                 sleep: Callable[[float], None] = _SLEEP) -> None:
        self.scale = scale
        self._monotonic = monotonic
        self._sleep = sleep
        self._t0 = monotonic()

    def start(self) -> None:
        """Scenario time 0 is now."""
        self._t0 = self._monotonic()

    def real_elapsed(self) -> float:
        """Real seconds since `start()`."""
        return self._monotonic() - self._t0

    def now(self) -> float:
        """Scenario seconds since `start()`."""
        return self.scale.scenario(self.real_elapsed())

    def sleep_until(self, until: float, *, tick: Callable[[], object] | None = None,
                    step: float = 0.05) -> None:
        """Sleep until scenario time `until`, calling `tick()` at least every `step` real
        seconds (where an adapter restarts crashed hosts, resumes paused ones)."""
        if step <= 0:
            raise ConfigError(f"Expected step > 0 (real seconds) but got step={step!r}")
        # Done within a microsecond of real time: a float clock cannot always reach `until`
        # exactly, and sleeping ever smaller remainders would never end.
        while (left := self.scale.real(until - self.now())) > _RESOLUTION:
            self._sleep(min(step, left))
            if tick is not None:
                tick()


def real_seconds() -> Callable[[], float]:
    """A clock of real seconds since this call, to the millisecond (`History(wall=...)`)."""
    start = _PERF_COUNTER()
    return lambda: round(_PERF_COUNTER() - start, 3)


def fmt_real(seconds: float) -> str:
    """Real seconds as a witness prints them beside scenario time: `real 3.2s`."""
    if seconds < 120:
        return f"real {seconds:.3g}s" if seconds < 10 else f"real {seconds:.1f}s"
    return f"real {seconds / 60:.1f}m"
