"""Known-answer tests of crossings, smoothing and bounded values on synthetic curves."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollcli.analysis.curves import Bounded, first_crossing, smooth


def test_linear_interpolation_between_evaluations():
    # crosses 0.5 a quarter of the way from x=100 (0.4) to x=200 (0.8)
    assert first_crossing([0, 100, 200], [0.0, 0.4, 0.8], 0.5) == Bounded(125.0)


def test_not_reached_is_a_lower_bound_at_the_last_point():
    b = first_crossing([0, 100, 200], [0.1, 0.2, 0.3], 0.5)
    assert b == Bounded(200.0, "lower")
    assert b.number() is None
    assert b.display("{:.0f}") == ">= 200"
    assert b.to_json("{:.0f}") == {"kind": "lower", "display": ">= 200", "lower_bound": 200.0}
    assert "value" not in b.to_json()


def test_tie_with_target_crosses_at_that_point():
    assert first_crossing([0, 100, 200, 300], [0.2, 0.5, 0.5, 0.9], 0.5) == Bounded(100.0)


def test_target_equal_to_a_mean_of_equal_values_is_reached():
    target = float(np.mean([0.3, 0.3, 0.3]))  # 0.30000000000000004
    assert first_crossing([0, 10], [0.1, 0.3], target) == Bounded(10.0)


def test_curve_starting_above_target_crosses_at_its_first_point():
    assert first_crossing([0, 50], [0.9, 0.95], 0.5) == Bounded(0.0)


def test_non_monotone_curve_takes_the_first_crossing():
    # reaches 0.6 between 100 and 200, dips below, crosses again later: the first one counts
    x = [0, 100, 200, 300, 400]
    y = [0.2, 0.4, 0.8, 0.3, 0.9]
    assert first_crossing(x, y, 0.6) == Bounded(150.0)


def test_non_monotone_curve_whose_peak_misses_the_target():
    b = first_crossing([0, 1, 2, 3], [0.1, 0.7, 0.2, 0.6], 0.75)
    assert b.kind == "lower" and b.value == 3.0


def test_empty_curve_and_nan_target_are_unknown():
    assert first_crossing([], [], 0.5).kind == "unknown"
    assert first_crossing([0, 1], [0.1, 0.9], math.nan).kind == "unknown"
    assert Bounded.unknown().display() == "n/a"


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="shape"):
        first_crossing([0, 1], [0.1], 0.5)


def test_trailing_moving_average():
    y = [0.0, 1.0, 2.0, 3.0, 4.0]
    np.testing.assert_allclose(smooth(y, 1), y)
    np.testing.assert_allclose(smooth(y, 2), [0.0, 0.5, 1.5, 2.5, 3.5])
    np.testing.assert_allclose(smooth(y, 3), [0.0, 0.5, 1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="smooth"):
        smooth(y, 0)


def test_smoothing_delays_a_noisy_spike_crossing():
    x = [0, 100, 200, 300, 400]
    y = [0.2, 0.7, 0.3, 0.6, 0.7]  # a single lucky evaluation at x=100
    assert first_crossing(x, y, 0.6).value == pytest.approx(80.0)
    smoothed = smooth(y, 2)  # [0.2, 0.45, 0.5, 0.45, 0.65]
    assert first_crossing(x, smoothed, 0.6) == Bounded(pytest.approx(375.0))


def test_bounded_displays():
    assert Bounded(1.234).display() == "1.23"
    assert Bounded(1.234, "upper").display("{:.1f}x") == "<= 1.2x"
    assert Bounded(2.0, "upper").to_json()["upper_bound"] == 2.0


@settings(max_examples=150, deadline=None)
@given(
    ys=st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=30),
    target=st.floats(0, 1, allow_nan=False),
    steps=st.lists(st.floats(0.5, 100), min_size=30, max_size=30),
)
def test_crossing_properties(ys, target, steps):
    x = np.concatenate([[0.0], np.cumsum(steps)])[: len(ys)]
    y = np.asarray(ys)
    b = first_crossing(x, y, target)
    if (y >= target - 1e-9).any():
        assert b.exact
        i = int(np.flatnonzero(y >= target - 1e-9)[0])
        lo = x[i - 1] if i else x[0]
        assert lo - 1e-9 <= b.value <= x[i] + 1e-9
        if i:  # the interpolated line passes through the target there
            yy = np.interp(b.value, [x[i - 1], x[i]], [y[i - 1], y[i]])
            assert yy == pytest.approx(target, abs=1e-6)
    else:
        assert b.kind == "lower" and b.value == x[-1]
