"""The time scale of engines without time skipping: anchors, inverse, monotonicity, errors,
and the clock that runs on it (the linear `TimeScale` is the one-anchor case)."""

from __future__ import annotations

import itertools
import math

import pytest

from harness.errors import ConfigError
from harness.scaling import AnchoredScale, Scale, ScaledClock, TimeScale

DAY = 86400.0
APPROVAL = AnchoredScale(((300.0, 3.0), (8 * DAY, 30.0)))


def test_anchors_map_exactly_and_linearly_in_between() -> None:
    assert APPROVAL.real(0) == 0
    assert APPROVAL.real(300) == pytest.approx(3.0)
    assert APPROVAL.real(8 * DAY) == pytest.approx(30.0)
    assert APPROVAL.real(150) == pytest.approx(1.5)  # from (0, 0) to the first anchor
    middle = (300 + 8 * DAY) / 2
    assert APPROVAL.real(middle) == pytest.approx(16.5)
    # Past the last anchor, the last segment's rate goes on.
    rate = (8 * DAY - 300) / 27
    assert APPROVAL.scenario(31.0) == pytest.approx(8 * DAY + rate)


def test_the_inverse_undoes_the_mapping_both_ways() -> None:
    for scenario in (0.0, 1.0, 299.0, 300.0, 301.0, 3 * DAY, 8 * DAY, 9 * DAY):
        assert APPROVAL.scenario(APPROVAL.real(scenario)) == pytest.approx(scenario)
    for real in (0.0, 0.5, 3.0, 17.2, 30.0, 45.0):
        assert APPROVAL.real(APPROVAL.scenario(real)) == pytest.approx(real)


def test_the_scale_is_strictly_monotonic() -> None:
    points = [i * 1000.0 for i in range(0, 800)]
    reals = [APPROVAL.real(p) for p in points]
    assert all(a < b for a, b in itertools.pairwise(reals))


def test_a_real_second_spans_what_its_segment_says() -> None:
    # One real second is 100 scenario seconds early on, about 7 hours near 8 days: slack
    # given in real seconds is converted where it applies.
    assert APPROVAL.span(1.0, at=0.0) == pytest.approx(100.0)
    assert APPROVAL.span(1.0, at=8 * DAY) == pytest.approx((8 * DAY - 300) / 27)
    assert APPROVAL.steepest == pytest.approx((8 * DAY - 300) / 27)


def test_the_linear_scale_is_the_one_anchor_case() -> None:
    linear, anchored = TimeScale(10.0), AnchoredScale(((60.0, 6.0),))
    for seconds in (0.0, 5.0, 60.0, 600.0):
        assert linear.real(seconds) == pytest.approx(anchored.real(seconds))
    assert linear.span(2.0, at=50) == anchored.span(2.0, at=50) == pytest.approx(20.0)
    assert linear.steepest == anchored.steepest == pytest.approx(10.0)
    assert isinstance(linear, Scale) and isinstance(anchored, Scale)


@pytest.mark.parametrize("anchors", [
    (), [], "5m=3s", ((300, 3), (300, 5)), ((300, 3), (600, 3)), ((300, 3), (200, 5)),
    ((0, 1),), ((1, 0),), ((1, -2),), ((math.inf, 2),), ((math.nan, 2),), ((1, True),),
    ((1, "2"),), ((1, 2, 3),), (1, 2),
])
def test_bad_anchors_raise_one_clear_config_error(anchors: object) -> None:
    with pytest.raises(ConfigError, match="anchor") as info:
        AnchoredScale(anchors)  # type: ignore[arg-type]
    assert "AnchoredScale(((300, 3), (8 * 86400, 30)))" in str(info.value) or \
        "Expected a finite number" in str(info.value)


def test_the_clock_sleeps_until_the_real_second_of_a_scenario_time() -> None:
    real = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        real[0] += seconds

    clock = ScaledClock(APPROVAL, monotonic=lambda: real[0], sleep=sleep)
    clock.start()
    ticks: list[float] = []
    clock.sleep_until(300.0, tick=lambda: ticks.append(real[0]), step=1.0)
    assert real[0] == pytest.approx(3.0)
    assert clock.now() == pytest.approx(300.0)
    clock.sleep_until(3 * DAY, step=100.0)
    # 3 days come at the real second the second segment gives them, not at 3 days / 100.
    assert real[0] == pytest.approx(APPROVAL.real(3 * DAY))
    assert clock.now() == pytest.approx(3 * DAY)
    assert len(ticks) == 3


# -- the guard band after a bound ----------------------------------------------------------

def test_a_guard_band_keeps_the_rate_before_an_anchor_for_its_real_seconds_after() -> None:
    from harness.scaling import guarded

    band = guarded(APPROVAL, (300.0,), 1.0)
    assert isinstance(band, AnchoredScale)
    # Up to the bound nothing moves; for one real second after it the rate stays 100 per
    # real second (the rate before 5 minutes), where the user's scale runs at 7.1 hours.
    assert band.real(300.0) == pytest.approx(3.0)
    assert band.rate_before(300.0) == band.rate_before(399.0) == pytest.approx(100.0)
    assert band.scenario(3.004) == pytest.approx(300.4)
    assert APPROVAL.scenario(3.004) == pytest.approx(402.4, abs=0.1)
    assert band.real(400.0) == pytest.approx(4.0)
    # Past the band the user's scale goes on, later by what the band cost (1 real second
    # less the 4 ms the user's scale takes from 5 minutes to 400 s): the same rate onwards.
    lag = 1.0 - (APPROVAL.real(400.0) - 3.0)
    for at in (DAY, 3 * DAY, 8 * DAY, 9 * DAY):
        assert band.real(at) == pytest.approx(APPROVAL.real(at) + lag)
    assert band.span(1.0, at=3 * DAY) == pytest.approx(APPROVAL.span(1.0, at=3 * DAY))
    points = [i * 500.0 for i in range(0, 1600)]
    assert all(a < b for a, b in itertools.pairwise(band.real(p) for p in points))


def test_a_guard_band_changes_nothing_where_the_rate_does_not_change() -> None:
    from harness.scaling import guarded

    # Inside a segment, past the last anchor, and on a linear scale, the rate after a bound
    # already is the rate before it.
    assert guarded(APPROVAL, (3 * DAY,), 1.0) is APPROVAL
    assert guarded(APPROVAL, (8 * DAY, 9 * DAY), 1.0) is APPROVAL
    linear = TimeScale(10.0)
    assert guarded(linear, (300.0, 8 * DAY), 1.0) is linear


def test_a_guard_band_over_later_anchors_keeps_the_tail_rate() -> None:
    from harness.scaling import guarded

    # Anchors closer after the bound than the band is wide are inside it: dropped; past the
    # band the scale runs at the user's rate beyond the last anchor, shifted by the band.
    dense = AnchoredScale(((300.0, 3.0), (350.0, 3.001), (500.0, 3.002)))
    band = guarded(dense, (300.0,), 1.0)
    assert isinstance(band, AnchoredScale)
    assert band.real(400.0) == pytest.approx(4.0)
    assert band.span(1.0, at=band.scenario(10.0)) == pytest.approx(dense.span(1.0, at=600.0))
    assert all(a < b for a, b in itertools.pairwise(band.real(p) for p in range(0, 5000, 7)))
