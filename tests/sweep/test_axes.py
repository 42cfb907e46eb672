"""Sweep axes: Hydra-grammar values, grid/zip/sample expansion, deduplication."""

from __future__ import annotations

import pytest

from rollcli.sweep.axes import (
    SampleAxes,
    SweepAxes,
    expand_points,
    format_value,
    parse_axis,
    to_overrides,
)


def test_parse_axis_forms():
    assert parse_axis("a", "0.1,0.2").values == (0.1, 0.2)
    assert parse_axis("a", "range(0,6,2)").values == (0, 2, 4)
    assert parse_axis("a", "choice(x,y)").values == ("x", "y")
    assert parse_axis("a", [1, 2, 3]).values == (1, 2, 3)
    assert parse_axis("a", 5).values == (5,)
    axis = parse_axis("a", "interval(0.25,1.0)", allow_interval=True)
    assert axis.interval == (0.25, 1.0) and axis.is_continuous


def test_interval_only_under_sample():
    with pytest.raises(ValueError, match="continuous"):
        parse_axis("a", "interval(0,1)")


def test_unparsable_axis_names_key():
    with pytest.raises(ValueError, match="axis 'a.b'"):
        parse_axis("a.b", "range(0,")


def test_grid_is_cartesian_and_zip_is_lockstep():
    grid = (parse_axis("x", "1,2"), parse_axis("y", "a,b,c"))
    zipped = (parse_axis("p", "4,8"), parse_axis("q", "12,8"))
    points = expand_points(SweepAxes(grid=grid, zip=zipped))
    assert len(points) == 2 * 3 * 2
    assert points[0] == (("x", 1), ("y", "a"), ("p", 4), ("q", 12))
    assert points[1] == (("x", 1), ("y", "a"), ("p", 8), ("q", 8))
    assert {dict(p)["q"] for p in points if dict(p)["p"] == 8} == {8}


def test_zip_lengths_must_match():
    zipped = (parse_axis("p", "4,8"), parse_axis("q", "1,2,3"))
    with pytest.raises(ValueError, match="equal lengths"):
        expand_points(SweepAxes(zip=zipped))


def test_a_key_swept_twice_is_an_error():
    with pytest.raises(ValueError, match="one axis only"):
        expand_points(SweepAxes(grid=(parse_axis("x", "1,2"),), zip=(parse_axis("x", "3,4"),)))


def test_duplicate_points_kept_once():
    points = expand_points(SweepAxes(grid=(parse_axis("x", "1,1,2"),)))
    assert points == [(("x", 1),), (("x", 2),)]


@pytest.mark.parametrize("method", ["random", "sobol"])
def test_samples_are_seeded_and_in_range(method):
    axes = (
        parse_axis("alpha", "interval(0.25,0.75)", allow_interval=True),
        parse_axis("gamma", "choice(1,2,4)"),
    )
    sweep = SweepAxes(sample=SampleAxes(method, 16, 3, axes))
    first, again = expand_points(sweep), expand_points(sweep)
    assert first == again
    alphas = [dict(p)["alpha"] for p in first]
    assert all(0.25 <= a <= 0.75 for a in alphas)
    assert {dict(p)["gamma"] for p in first} <= {1, 2, 4}
    other = expand_points(SweepAxes(sample=SampleAxes(method, 16, 4, axes)))
    assert other != first


def test_sobol_covers_the_interval_evenly():
    axis = parse_axis("a", "interval(0,1)", allow_interval=True)
    values = sorted(
        dict(p)["a"] for p in expand_points(SweepAxes(sample=SampleAxes("sobol", 64, 0, (axis,))))
    )
    # every eighth of [0, 1] holds 8 of 64 scrambled Sobol points
    counts = [sum(1 for v in values if k / 8 <= v < (k + 1) / 8) for k in range(8)]
    assert counts == [8] * 8


def test_format_value_round_trips_through_hydra():
    for value in [0.125, 3, True, None, "pilot_commit", "has space", [1, 2]]:
        axis = parse_axis("k", format_value(value))
        assert axis.values == (value,)  # a list is one value, not an axis of its elements
    assert to_overrides((("a.b", 0.5), ("c", "x"))) == ("a.b=0.5", "c=x")
