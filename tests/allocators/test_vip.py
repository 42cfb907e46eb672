"""VIP: the allocation program against its KKT solution and exhaustive search, the GP mean update
against the explicit GP formula, and a scripted run (no official code exists: HieuNT91/VIP holds
a README only; the equations are arXiv 2602.01601's as the docs cite them)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from rollcli.allocators import create_allocator
from rollcli.allocators.vip import VipConfig, variance_factor, vip_counts, vip_mean_update
from rollcli.testing.allocator_contract import make_pool
from rollcli.testing.fakes import FakeBackend, drive_step


def _objective(w: np.ndarray, n: np.ndarray, estimator: str) -> float:
    return float((w * variance_factor(n, estimator)).sum())


def _exhaustive(w: np.ndarray, budget: int, n_min: int, n_max: int, estimator: str) -> float:
    best = np.inf
    for n in itertools.product(range(n_min, n_max + 1), repeat=len(w)):
        if sum(n) == budget:
            best = min(best, _objective(w, np.array(n), estimator))
    return best


def test_variance_factors_are_the_papers() -> None:
    # Dr. GRPO: (n - 1) / n^2; RLOO: 1 / (n - 1) (times 4 s^2 p (1 - p), which is w)
    assert variance_factor(np.array([2, 4]), "dr_grpo").tolist() == [0.25, 3 / 16]
    assert variance_factor(np.array([2, 5]), "rloo").tolist() == [1.0, 0.25]


def test_rloo_allocation_is_the_kkt_solution() -> None:
    # minimise sum w_q / (n_q - 1) s.t. sum n_q = C: the Lagrangian gives n_q - 1 proportional
    # to sqrt(w_q). sqrt(w) = 1, 2, 3, 4 (/10) and C - B = 20 give n - 1 = 2, 4, 6, 8 exactly.
    w = np.array([1.0, 4.0, 9.0, 16.0]) / 100.0
    counts = vip_counts(w, 24, n_min=2, n_max=16, estimator="rloo")
    assert counts.tolist() == [3, 5, 7, 9]


def test_kkt_with_a_binding_bound() -> None:
    # sqrt(w) = 0.1, 0.2, 0.8: unbounded, n - 1 = 24 sqrt(w) / 1.1 puts the third prompt at 18.5 >
    # n_max = 12; it stops there and the KKT rule shares the other 15 rollouts: n - 1 = 13 sqrt(w)
    # / 0.3 = 4.33, 8.67. The integer optimum is 5 and 10 (exhaustive search agrees).
    w = np.array([1.0, 4.0, 64.0]) / 100.0
    counts = vip_counts(w, 27, n_min=2, n_max=12, estimator="rloo")
    assert counts.tolist() == [5, 10, 12]
    assert _objective(w, counts, "rloo") == pytest.approx(_exhaustive(w, 27, 2, 12, "rloo"))


@pytest.mark.parametrize(("estimator", "n_min"), [("rloo", 2), ("rloo", 3), ("dr_grpo", 3)])
def test_greedy_matches_exhaustive_search(estimator: str, n_min: int) -> None:
    rng = np.random.default_rng(0)
    for _ in range(25):
        p = rng.uniform(0.0, 1.0, 4)
        w = p * (1.0 - p)
        budget = int(rng.integers(4 * n_min, 4 * 8 + 1))
        counts = vip_counts(w, budget, n_min=n_min, n_max=8, estimator=estimator)
        assert counts.sum() == budget
        assert _objective(w, counts, estimator) == pytest.approx(
            _exhaustive(w, budget, n_min, 8, estimator), abs=1e-12
        )


def test_budget_exact_and_bounds_held() -> None:
    rng = np.random.default_rng(1)
    for estimator in ("rloo", "dr_grpo"):
        for _ in range(50):
            num = int(rng.integers(1, 200))
            p = rng.uniform(0.0, 1.0, num)
            n_min, n_max = 2, int(rng.integers(2, 33))
            n_mean = int(rng.integers(n_min, n_max + 1))
            counts = vip_counts(p * (1 - p), num * n_mean, n_min=n_min, n_max=n_max,
                                estimator=estimator)  # fmt: skip
            assert counts.sum() == num * n_mean
            assert counts.min() >= n_min and counts.max() <= n_max


def test_equal_weights_give_uniform_and_zero_variance_prompts_the_floor() -> None:
    counts = vip_counts(np.full(6, 0.25), 48, n_min=2, n_max=16, estimator="rloo")
    assert counts.tolist() == [8] * 6
    counts = vip_counts(np.array([0.25, 1e-9, 0.25, 1e-9]), 32, n_min=2, n_max=16,
                        estimator="dr_grpo")  # fmt: skip
    assert counts.tolist() == [14, 2, 14, 2]


def test_mean_update_is_the_gp_posterior_mean() -> None:
    # explicit GP: m_new(x) = m(x) + K(x, X) (K(X, X) + noise I)^-1 r over a batch X and unseen x
    ks, kc, noise = 1.3, 0.2, 0.7
    r = np.array([0.5, -1.2, 2.0, 0.1])
    batch = np.arange(4)
    points = np.arange(6)  # 4 and 5 are not in the batch

    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return ks * (a[:, None] == b[None, :]) + kc

    alpha = np.linalg.solve(kernel(batch, batch) + noise * np.eye(4), r)
    want = kernel(points, batch) @ alpha
    own, common = vip_mean_update(r, kernel_self=ks, kernel_shared=kc, noise=noise)
    assert (own + common).tolist() == pytest.approx(want[:4].tolist())
    assert [common, common] == pytest.approx(want[4:].tolist())


def test_a_step_moves_the_prediction_and_the_next_allocation() -> None:
    # prompts 0-3 always solved, 4-7 never, 8-15 half: after one uniform step (all predictions
    # 0.5), the saturated prompts are predicted near 0 / 1 and get fewer rollouts on their next visit
    pool = np.array([1.0] * 4 + [0.0] * 4 + [0.5] * 8)
    config = VipConfig(n_mean=4, n_min=2, n_max=8, noise=0.25)
    alloc = create_allocator(config, num_prompts=16, rollouts_per_step=64, seed=0)
    backend = FakeBackend(pool, seed=0)
    groups = drive_step(alloc, backend, 0)
    assert sorted(len(g.refs) for g in groups) == [4] * 16  # equal predictions: uniform
    p = alloc.predicted_p(np.arange(16))
    assert p[:4].min() > 0.6 and p[4:8].max() < 0.4
    groups = drive_step(alloc, backend, 1)
    sizes = {g.prompt_id: len(g.refs) for g in groups}
    assert sum(sizes.values()) == 64
    saturated = [sizes[q] for q in range(8)]
    assert max(saturated) < 4 < max(sizes.values())
    assert np.mean(saturated) < np.mean([sizes[q] for q in range(8, 16)])
    assert alloc.stats()["variance_ratio"] < 1.0


def test_the_gp_state_resumes() -> None:
    config = VipConfig(n_mean=4, n_min=2, n_max=8)
    alloc = create_allocator(config, num_prompts=50, rollouts_per_step=32, seed=0)
    backend = FakeBackend(make_pool(50), seed=0)
    for step in range(3):
        drive_step(alloc, backend, step)
    again = create_allocator(config, num_prompts=50, rollouts_per_step=32, seed=0)
    again.load_state_dict(json.loads(json.dumps(alloc.state_dict())))
    assert again.shared == alloc.shared
    assert np.array_equal(again.offset, alloc.offset)


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"n_min": 1}, "n_min"),
        ({"n_mean": 20}, "n_mean"),
        ({"noise": 0.0}, "noise"),
        ({"kernel_shared": -1.0}, "kernel_shared"),
        ({"clip_eps": 0.5}, "clip_eps"),
        ({"high_clamp": 1.5}, "high_clamp"),
        ({"solver": "slsqp"}, "needs estimator: inverse_n"),
    ],
)
def test_bad_knobs_are_refused(knobs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        VipConfig(**knobs)
