"""Censored medians, bounded ratios, seed-mean curves, and the coverage of bootstrap intervals on
synthetic runs with a known true speedup."""

from __future__ import annotations

import numpy as np
import pytest

from rollcli.analysis.curves import Bounded, first_crossing
from rollcli.analysis.stats import (
    SeedCurves,
    bootstrap_speedups,
    censored_median,
    crossings,
    percentile_interval,
    ratio,
    resample_indices,
    t_quantile,
)


def test_median_exact_when_the_not_reached_seed_does_not_decide_it():
    values = [Bounded(100.0), Bounded(200.0), Bounded(300.0, "lower")]
    assert censored_median(values) == Bounded(200.0)


def test_median_is_a_lower_bound_when_a_not_reached_seed_decides_it():
    assert censored_median([Bounded(100.0), Bounded(300.0, "lower")]) == Bounded(200.0, "lower")
    assert censored_median([Bounded(5.0, "lower")] * 3) == Bounded(5.0, "lower")
    assert censored_median([]).kind == "unknown"


def test_ratio_bounds():
    assert ratio(Bounded(300.0), Bounded(200.0)) == Bounded(1.5)
    # the allocator did not reach: it needs >= 400, so the speedup is <= 300/400
    assert ratio(Bounded(300.0), Bounded(400.0, "lower")) == Bounded(0.75, "upper")
    # the baseline did not reach: the speedup is >= 400/200
    assert ratio(Bounded(400.0, "lower"), Bounded(200.0)) == Bounded(2.0, "lower")
    assert ratio(Bounded(400.0, "lower"), Bounded(200.0, "lower")).kind == "unknown"
    assert ratio(Bounded(400.0), Bounded(0.0)).kind == "unknown"


def test_seed_curves_average_by_step_over_common_steps():
    curves = SeedCurves.build(
        {
            1: (
                np.array([0, 5, 10, 15]),
                np.array([0.0, 10.0, 20.0, 30.0]),
                np.array([0.0, 0.1, 0.2, 0.3]),
            ),
            0: (np.array([0, 5, 10]), np.array([0.0, 14.0, 26.0]), np.array([0.0, 0.3, 0.5])),
        }
    )
    assert curves.seeds == (0, 1)
    np.testing.assert_array_equal(curves.steps, [0, 5, 10])  # seed 0 has not evaluated step 15
    x, y = curves.mean_curves(curves.all_seeds())
    np.testing.assert_allclose(x[0], [0.0, 12.0, 23.0])
    np.testing.assert_allclose(y[0], [0.0, 0.2, 0.35])
    np.testing.assert_allclose(curves.finals, [0.5, 0.3])  # each seed's own last value
    assert SeedCurves.build({}).num_seeds == 0


def test_mean_curve_ends_on_the_mean_of_finals_when_seeds_end_at_different_x():
    # token counts differ per seed; the step-aligned mean still ends at the mean final accuracy
    steps = np.array([0, 5, 10])
    curves = SeedCurves.build(
        {
            0: (steps, np.array([0.0, 900.0, 2000.0]), np.array([0.1, 0.3, 0.40])),
            1: (steps, np.array([0.0, 1100.0, 2100.0]), np.array([0.1, 0.3, 0.50])),
        }
    )
    target = curves.finals.mean()
    at, reached = crossings(*curves.mean_curves(curves.all_seeds()), np.array([target]))
    assert reached[0] and at[0] == pytest.approx(2050.0)


def test_vectorised_crossings_match_first_crossing():
    rng = np.random.default_rng(0)
    grid = np.cumsum(rng.uniform(1, 5, 12))
    curves = rng.uniform(0, 1, (200, 12))
    targets = rng.uniform(0, 1, 200)
    curves[:5] = 0.5
    targets[:5] = 0.5  # ties at the first point
    x, reached = crossings(grid, curves, targets)
    for i in range(200):
        b = first_crossing(grid, curves[i], targets[i])
        assert b.exact == reached[i]
        assert x[i] == pytest.approx(b.value)


def test_resampling_pairs_shared_seeds():
    rng = np.random.default_rng(0)
    idx_b, idx_a = resample_indices([0, 1, 2, 3], [3, 2, 1, 0], 500, rng)
    base_seeds = np.array([0, 1, 2, 3])[idx_b]
    alloc_seeds = np.array([3, 2, 1, 0])[idx_a]
    assert (base_seeds == alloc_seeds).all()  # the same seed drawn for both
    assert len(np.unique(base_seeds)) == 4
    idx_b, idx_a = resample_indices([0, 1, 5], [0, 1, 7, 8], 100, rng)
    assert idx_b.shape == (100, 3) and idx_a.shape == (100, 4)
    assert (np.array([0, 1, 5])[idx_b[:, :2]] == np.array([0, 1, 7, 8])[idx_a[:, :2]]).all()


def test_t_quantiles():
    # two-sided 95 % and 99 % critical values of Student's t (printed tables, 4 decimals); the
    # Cornish-Fisher series this replaced gave 5.7949 at df 3, 99 % (issue 28)
    table = {
        0.975: ((1, 12.7062), (2, 4.3027), (3, 3.1824), (5, 2.5706), (10, 2.2281), (30, 2.0423)),
        0.995: ((1, 63.6567), (2, 9.9248), (3, 5.8409), (4, 4.6041), (9, 3.2498)),
    }
    for p, rows in table.items():
        for df, value in rows:
            assert t_quantile(p, df) == pytest.approx(value, abs=1e-4), (p, df)
    with pytest.raises(ValueError, match="df must be >= 1"):
        t_quantile(0.975, 0)


def test_percentile_interval():
    assert percentile_interval(np.arange(101.0), 0.9) == pytest.approx((5.0, 95.0))
    # expanded for few seeds: wider than the plain one, approaching it as seeds grow
    samples = np.random.default_rng(0).normal(0, 1, 20000)
    plain = percentile_interval(samples, 0.95)
    few = percentile_interval(samples, 0.95, num_seeds=4)
    many = percentile_interval(samples, 0.95, num_seeds=400)
    assert few[1] - few[0] > 1.3 * (plain[1] - plain[0])
    assert many[1] - many[0] == pytest.approx(plain[1] - plain[0], rel=0.02)
    assert percentile_interval(np.array([np.inf, np.nan]), 0.9) is None
    with pytest.raises(ValueError, match="confidence"):
        percentile_interval(np.arange(3.0), 1.5)


GRID = np.linspace(0, 1000, 11)
STEPS = np.arange(11) * 5


def _linear_seeds(slopes: np.ndarray, first_seed: int = 0) -> dict[str, SeedCurves]:
    """Accuracy = 0.1 + slope * x / 1000 per seed: the seed-mean curve crosses target T at
    1000 (T - 0.1) / mean(slope)."""
    curves = {s + first_seed: (STEPS, GRID, 0.1 + a * GRID / 1000) for s, a in enumerate(slopes)}
    return {"rollouts": SeedCurves.build(curves)}


def _trial(n_seeds: int, paired: bool, rng: np.random.Generator, seed: int):
    # true mean slopes 0.5 (baseline) and 0.625 (allocator): true speedup 1.25 at any target
    shared = rng.normal(0, 0.08, n_seeds) if paired else 0.0
    base = 0.5 + shared + rng.normal(0, 0.03, n_seeds)
    alloc = 0.625 + 1.25 * shared + rng.normal(0, 0.0375, n_seeds)
    ci = bootstrap_speedups(
        _linear_seeds(base),
        _linear_seeds(alloc),
        lambda idx: np.full(idx.shape[0], 0.4),
        num_resamples=1000,
        seed=seed,
    )["rollouts"]
    return ci


@pytest.mark.parametrize("paired", [True, False])
def test_interval_coverage_near_nominal(paired):
    rng = np.random.default_rng(7)
    hits = 0
    trials = 300
    for t in range(trials):
        lo, hi = _trial(8, paired, rng, t)
        hits += lo <= 1.25 <= hi
    # nominal 95 %; 300 trials give a standard error of ~1.3 points
    assert 0.88 <= hits / trials <= 0.99


def test_pairing_by_seed_narrows_the_interval():
    rng = np.random.default_rng(11)
    shared = rng.normal(0, 0.1, 6)
    base = 0.5 + shared + rng.normal(0, 0.01, 6)
    alloc = 0.625 + 1.25 * shared + rng.normal(0, 0.0125, 6)
    target = lambda idx: np.full(idx.shape[0], 0.4)  # noqa: E731
    paired = bootstrap_speedups(_linear_seeds(base), _linear_seeds(alloc), target)["rollouts"]
    # the same curves under disjoint seed labels: resampled independently
    relabelled = _linear_seeds(alloc, first_seed=100)
    unpaired = bootstrap_speedups(_linear_seeds(base), relabelled, target)["rollouts"]
    assert paired[1] - paired[0] < 0.5 * (unpaired[1] - unpaired[0])
    assert paired[0] <= 1.25 <= paired[1]


def test_one_seed_gives_no_interval_and_draws_are_reproducible():
    one = _linear_seeds(np.array([0.5]))
    three = _linear_seeds(np.array([0.5, 0.6, 0.55]))
    target = lambda idx: np.full(idx.shape[0], 0.4)  # noqa: E731
    assert bootstrap_speedups(one, three, target) == {"rollouts": None}
    assert bootstrap_speedups(three, three, target, seed=4) == bootstrap_speedups(
        three, three, target, seed=4
    )


@pytest.mark.parametrize(("n_seeds", "seed"), [(4, 0), (6, 1), (8, 7)])
def test_paired_bootstrap_is_scipys_where_scipy_applies(n_seeds, seed):
    """One level, both sides on the same seeds: the interval is exactly scipy.stats.bootstrap's
    (paired=True, percentile method at the expanded level, the same generator seed). rollcli
    keeps its own resampler for what scipy's cannot do: base model x seed draws (two levels),
    seeds only one side ran (unpaired), and one draw shared by the rollout, token and time axes."""
    import inspect
    import math
    from statistics import NormalDist

    from scipy import stats

    rng = np.random.default_rng(100 + seed)
    steps = np.arange(1, 21)

    def curves(rate: float) -> SeedCurves:
        rates = rate * (1 + 0.15 * rng.standard_normal(n_seeds))
        return SeedCurves.build(
            {s: (steps, steps * 1000.0, 1 - np.exp(-r * steps)) for s, r in enumerate(rates)}
        )

    base, alloc = curves(0.10), curves(0.14)

    def targets(idx_b: np.ndarray) -> np.ndarray:
        return base.finals[idx_b].mean(axis=1)

    ours = bootstrap_speedups(
        {"rollouts": base}, {"rollouts": alloc}, targets, num_resamples=3000, seed=seed
    )["rollouts"]

    def speedup(idx_b: np.ndarray, idx_a: np.ndarray, axis: int = -1) -> np.ndarray:
        ib, ia = np.atleast_2d(idx_b), np.atleast_2d(idx_a)
        goal = targets(ib)
        ratio = (
            crossings(*base.mean_curves(ib), goal)[0] / crossings(*alloc.mean_curves(ia), goal)[0]
        )
        return ratio if np.ndim(idx_b) > 1 else ratio[0]

    tail = NormalDist().cdf(-math.sqrt(n_seeds / (n_seeds - 1)) * t_quantile(0.975, n_seeds - 1))
    key = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"
    theirs = stats.bootstrap(
        (np.arange(n_seeds), np.arange(n_seeds)),
        speedup,
        paired=True,
        vectorized=True,
        n_resamples=3000,
        method="percentile",
        confidence_level=1 - 2 * tail,
        **{key: np.random.default_rng(seed)},
    ).confidence_interval
    assert ours == pytest.approx((theirs.low, theirs.high), rel=1e-12)
