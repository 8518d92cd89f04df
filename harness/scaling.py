"""Time scaling, for a real engine the harness cannot skip time on.

Scenario files and the checkers speak scenario time ("answer at 3 days", "pinned at most 5
minutes"). The simulator and the Restate path run on a virtual clock, so scenario time costs
no real time. An engine without time skipping and without a timer port the harness can drive
(Temporal's dev server, DBOS) runs on the real clock instead; its adapter then maps scenario
time onto real time, and the application runs with its thresholds mapped the same way.

A single factor cannot serve both of an approval agent's thresholds: at 10 scenario seconds
per real second, 5 minutes take 30 real seconds and 8 days 19 hours. So a scale is given by
anchor points ("5 minutes are 3 real seconds, 8 days are 30"), piecewise linear between them
and from time 0, monotonic and invertible; the linear factor is the special case of one
anchor. Real seconds then stand for very different scenario spans along the way (at the
anchors above one real second is 100 scenario seconds early on and 7 hours near 8 days), so
slack for the engine's own latency is given in real seconds and converted where it applies
(`Scale.span`).

- `Scale`: what a runtime needs of a scale (`real`, `scenario`, `span`, `steepest`).
- `AnchoredScale`: the piecewise-linear scale; `TimeScale`: the fixed factor.
- `guarded()`: a scale refined with a guard band after each bound, so that the slack a
  bound gets is the same just after it as just before it (see its docstring).
- `ScaledClock`: a runtime's `now()` and `advance()` on a scale, over an injected
  monotonic clock and sleep (the real ones by default), as Trio injects its clock.
- `real_seconds()`: a clock of real seconds since it was made; the harness gives it to the
  history of every run on a real engine (`History(wall=...)`), so each record carries its
  real second beside its scenario time, and witnesses print both (`Record.describe`).

Nothing here imports an engine or an extra: an adapter imports it at no cost.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from harness.errors import ConfigError

__all__ = ["AnchoredScale", "Scale", "ScaledClock", "TimeScale", "fmt_real", "guarded",
           "real_seconds"]

# Taken when this module is imported, before any freezegun freezer can replace them: real
# seconds must stay real while simulated runs freeze the wall clock around them.
_PERF_COUNTER = time.perf_counter
_SLEEP = time.sleep
_RESOLUTION = 1e-6  # real seconds
# Real seconds between two ticks of a real-time run (where crashed hosts restart and paused
# ones resume): the runner's waits tick this often, and so does WorkerHosts' own thread.
TICK = 0.05


@runtime_checkable
class Scale(Protocol):
    """Scenario time onto real time: monotonic, invertible, 0 onto 0."""

    def real(self, scenario_seconds: float) -> float:
        """The real second at which scenario second `scenario_seconds` comes."""
        ...

    def scenario(self, real_seconds: float) -> float:
        """The scenario second real second `real_seconds` stands for."""
        ...

    def span(self, real_seconds: float, at: float = 0.0) -> float:
        """How many scenario seconds `real_seconds` real seconds cover from scenario time
        `at`."""
        ...

    @property
    def steepest(self) -> float:
        """The most scenario seconds one real second covers anywhere on the scale."""
        ...


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

    def span(self, real_seconds: float, at: float = 0.0) -> float:
        return real_seconds * self.per_real_second

    @property
    def steepest(self) -> float:
        return self.per_real_second


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value > 0):
        raise ConfigError(f"Expected a finite number > 0 for {what} but got {value!r} "
                          f"(type={type(value).__name__})")
    return float(value)


@dataclass(frozen=True, slots=True)
class AnchoredScale:
    """Scenario time onto real time through anchor points `(scenario, real)`, in seconds.

    `AnchoredScale(((300, 3), (8 * 86400, 30)))`: 5 minutes come at 3 real seconds and 8
    days at 30, linearly in between and from (0, 0) to the first anchor; past the last one
    the last segment's rate goes on. Both coordinates must grow strictly from one anchor to
    the next (else the scale is not invertible): a bad list raises one `ConfigError` naming
    the anchor and the fix.
    """

    anchors: tuple[tuple[float, float], ...]
    # (0, 0) and the anchors, as two sorted columns for bisect.
    _scenario: tuple[float, ...] = field(init=False, repr=False, compare=False)
    _real: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        anchors = self.anchors
        example = "e.g. AnchoredScale(((300, 3), (8 * 86400, 30)))"
        if isinstance(anchors, str | bytes) or not isinstance(anchors, Sequence) or not anchors:
            raise ConfigError(f"Expected a non-empty sequence of (scenario seconds, real "
                              f"seconds) anchors but got anchors={anchors!r}; {example}")
        scenario, real = [0.0], [0.0]
        for i, anchor in enumerate(anchors):
            if isinstance(anchor, str | bytes) or not isinstance(anchor, Sequence) or len(
                    anchor) != 2:
                raise ConfigError(f"Expected anchor {i} to be a pair (scenario seconds, real "
                                  f"seconds) but got {anchor!r}; {example}")
            s_at = _number(anchor[0], f"the scenario seconds of anchor {i}")
            r_at = _number(anchor[1], f"the real seconds of anchor {i}")
            if s_at <= scenario[-1] or r_at <= real[-1]:
                raise ConfigError(
                    f"anchor {i} {tuple(anchor)!r} does not come after "
                    f"{(scenario[-1], real[-1])!r}: both scenario and real seconds must grow "
                    f"strictly from one anchor to the next (the scale must be invertible); "
                    f"{example}")
            scenario.append(s_at)
            real.append(r_at)
        object.__setattr__(self, "anchors", tuple(zip(scenario[1:], real[1:], strict=True)))
        object.__setattr__(self, "_scenario", tuple(scenario))
        object.__setattr__(self, "_real", tuple(real))

    @staticmethod
    def _map(x: float, xs: tuple[float, ...], ys: tuple[float, ...]) -> float:
        # The segment holding x; before 0 and past the last anchor, the nearest segment's
        # rate goes on (negative times only come from clocks read a moment early).
        i = min(max(bisect.bisect_right(xs, x) - 1, 0), len(xs) - 2)
        x0, x1, y0, y1 = xs[i], xs[i + 1], ys[i], ys[i + 1]
        return y0 + (x - x0) * (y1 - y0) / (x1 - x0)

    def real(self, scenario_seconds: float) -> float:
        return self._map(scenario_seconds, self._scenario, self._real)

    def scenario(self, real_seconds: float) -> float:
        return self._map(real_seconds, self._real, self._scenario)

    def span(self, real_seconds: float, at: float = 0.0) -> float:
        return self.scenario(self.real(at) + real_seconds) - at

    @property
    def steepest(self) -> float:
        s, r = self._scenario, self._real
        return max((s[i + 1] - s[i]) / (r[i + 1] - r[i]) for i in range(len(s) - 1))

    def rate_before(self, scenario_seconds: float) -> float:
        """Scenario seconds per real second on the segment that ends at or runs through
        `scenario_seconds` (at an anchor: the segment before it)."""
        s, r = self._scenario, self._real
        i = min(max(bisect.bisect_left(s, scenario_seconds) - 1, 0), len(s) - 2)
        return (s[i + 1] - s[i]) / (r[i + 1] - r[i])

    def guarded(self, bound: float, real_seconds: float) -> AnchoredScale:
        """This scale with a guard band of `real_seconds` after scenario time `bound`.

        For `real_seconds` after `bound` the rate stays the rate before it; from there on
        the scale goes on as before, later by what the band cost (the band runs at the
        earlier, slower rate, so later anchors come that much later in real time). Unchanged
        where the band changes nothing: inside a segment, or past the last anchor.
        """
        rate, at = self.rate_before(bound), self.real(bound)
        end = bound + rate * real_seconds
        lag = at + real_seconds - self.real(end)  # real seconds the band cost
        if bound <= 0 or abs(lag) <= _RESOLUTION:
            return self
        before = [a for a in self.anchors if a[0] < bound]
        after = [(s, r + lag) for s, r in self.anchors if s > end]
        if not after:  # the band runs past the last anchor: keep the last segment's rate on
            tail = end + max(end - bound, 1.0)
            after = [(tail, self.real(tail) + lag)]
        return AnchoredScale((*before, (bound, at), (end, at + real_seconds), *after))


def guarded(scale: Scale, bounds: Sequence[float], real_seconds: float) -> Scale:
    """`scale` with a guard band of `real_seconds` after each of `bounds` (scenario seconds).

    Why: slack for an engine's latency is given in real seconds, and a checker judges a
    bound with `real_seconds` of slack converted at the rate leading up to it. At an anchor
    the rate changes, so the same real lateness after the bound reads very differently: on
    5 minutes at 3 real s and 8 days at 30, a hand-off 4 real ms after 5 minutes lands at
    7.1 hours per real second and reads as 100 s late. With a band the rate stays the rate
    before the bound for `real_seconds` after it, so a bound's slack is the same on both
    sides of it: late by less than `real_seconds` in real time holds, late by more is past
    the slack. The rest of the scale keeps its shape, shifted by what the band cost.

    An `AnchoredScale` gets the bands (in order of the bounds); a `TimeScale` has one rate,
    so it needs none; any other `Scale` is returned as it is.
    """
    if not isinstance(scale, AnchoredScale):
        return scale
    for bound in sorted(set(bounds)):
        scale = scale.guarded(bound, real_seconds)
    return scale


class ScaledClock:
    """Scenario time of a runtime on the real clock, through a `Scale` (`TimeScale`,
    `AnchoredScale`): `now()` and `sleep_until()`.

    `start()` sets scenario time 0 (call it once the runtime is up, so start-up time is not
    scenario time). `monotonic` and `sleep` are injectable for tests; the defaults are the
    real ones.
    """

    __slots__ = ("_monotonic", "_sleep", "_t0", "scale")

    def __init__(self, scale: Scale, *, monotonic: Callable[[], float] = _PERF_COUNTER,
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
                    step: float = TICK) -> None:
        """Sleep until scenario time `until`, calling `tick()` at least every `step` real
        seconds (where an adapter restarts crashed hosts, resumes paused ones)."""
        if step <= 0:
            raise ConfigError(f"Expected step > 0 (real seconds) but got step={step!r}")
        # Done within a microsecond of real time: a float clock cannot always reach `until`
        # exactly, and sleeping ever smaller remainders would never end.
        while (left := self.scale.real(until) - self.real_elapsed()) > _RESOLUTION:
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
