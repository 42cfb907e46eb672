"""HORA: the hit utility against its closed form, the greedy extras against brute force, and a
step (no official code exists: arXiv 2605.07114's abstract is the source; docs/allocators.md)."""

from __future__ import annotations

import heapq
import itertools
import math

import numpy as np
import pytest

from rollcli.allocators import create_allocator
from rollcli.allocators.hora import HoraConfig, hit_gains, hit_utility, hora_extras
from rollcli.testing.fakes import ScriptedBackend, drive_step


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


@pytest.mark.parametrize(("a", "b"), [(1.0, 1.0), (3.0, 1.0), (1.0, 9.0), (0.5, 2.5), (5.0, 5.0)])
def test_hit_utility_is_one_minus_beta_ratio(a: float, b: float) -> None:
    # P(>= 1 success in m) = 1 - E[(1-p)^m] = 1 - B(a, b + m) / B(a, b)
    for m in range(0, 12):
        closed = 1.0 - math.exp(_log_beta(a, b + m) - _log_beta(a, b))
        assert hit_utility(a, b, m) == pytest.approx(closed, rel=1e-12, abs=1e-12)
    gains = hit_gains(np.array([a]), np.array([b]), 12)[0]
    utilities = [hit_utility(a, b, m) for m in range(13)]
    np.testing.assert_allclose(gains, np.diff(utilities), rtol=1e-12, atol=1e-15)
    assert np.all(np.diff(gains) < 0)  # concave: greedy is optimal


def _greedy(a, b, budget, cap):
    """One rollout at a time to the largest marginal gain, ties to the earlier prompt."""
    counts = [0] * len(a)
    heap = [
        (-round(hit_utility(x, y, 1), 12), i) for i, (x, y) in enumerate(zip(a, b, strict=True))
    ]
    heapq.heapify(heap)
    for _ in range(budget):
        if not heap:
            break
        _g, i = heapq.heappop(heap)
        counts[i] += 1
        if counts[i] < cap:
            m = counts[i]
            gain = hit_utility(a[i], b[i], m + 1) - hit_utility(a[i], b[i], m)
            heapq.heappush(heap, (-round(gain, 12), i))
    return counts


def test_extras_are_the_greedy_and_the_optimum() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        k = int(rng.integers(1, 6))
        a = 1.0 + rng.integers(0, 5, k).astype(float)
        b = 1.0 + rng.integers(0, 5, k).astype(float)
        cap, budget = int(rng.integers(1, 5)), int(rng.integers(0, 10))
        extras = hora_extras(a, b, budget, cap)
        assert extras.tolist() == _greedy(a, b, budget, cap)
        best = max(
            sum(hit_utility(x, y, m) for x, y, m in zip(a, b, alloc, strict=True))
            for alloc in itertools.product(range(cap + 1), repeat=k)
            if sum(alloc) <= budget
        )
        got = sum(hit_utility(x, y, int(m)) for x, y, m in zip(a, b, extras, strict=True))
        assert got == pytest.approx(best, rel=1e-12)


def test_a_step_spends_the_budget_and_trains_every_rollout_of_a_prompt() -> None:
    # prompt 0 always right, 1 always wrong, 2 and 3 half right
    backend = ScriptedBackend([[1.0], [0.0], [1.0, 0.0], [0.0, 1.0]])
    config = HoraConfig(n_mean=4, n_init=2, n_max=8)
    alloc = create_allocator(config, num_prompts=4, rollouts_per_step=16, seed=0)
    groups = drive_step(alloc, backend, 0)
    sizes = {g.prompt_id: g.size for g in groups}
    assert sum(sizes.values()) == 16 and len(groups) == 4
    # posteriors after 2 rollouts: Beta(3,1), Beta(1,3), Beta(2,2), Beta(2,2); 8 extras greedily
    a = np.array([3.0, 1.0, 2.0, 2.0])
    b = np.array([1.0, 3.0, 2.0, 2.0])
    expected = 2 + hora_extras(a, b, 8, 6)
    assert [sizes[p] for p in range(4)] == expected.tolist()
    phases = [ph for _p, ph, _n, _t in backend.generated]
    assert set(phases) == {"first", "extra"}


def test_history_posterior_counts_every_visit_once() -> None:
    backend = ScriptedBackend([[1.0, 0.0, 0.0, 0.0]] * 4)
    config = HoraConfig(n_mean=4, n_init=2, n_max=8, use_history=True)
    alloc = create_allocator(config, num_prompts=4, rollouts_per_step=16, seed=0)
    for step in range(3):
        drive_step(alloc, backend, step)
    # every rollout counted once: 48 told, a quarter of them right
    assert alloc.successes.sum() + alloc.failures.sum() == 48
    assert alloc.successes.sum() == 12
