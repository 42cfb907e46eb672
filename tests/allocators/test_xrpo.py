"""XRPO's allocator: the Student-t critical values against scipy and a t table, the priority
against hand-computed values of its equations, the phased greedy against brute force, and
steps whose allocation is worked out by hand (the official code could not be fetched: the
priority is the paper's as summaries transcribe it; docs/allocators.md)."""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest
from scipy.stats import t as student_t

from rollcli.allocators import create_allocator
from rollcli.allocators._student_t import t_critical
from rollcli.allocators.xrpo import XrpoConfig, half_width, xrpo_extras, xrpo_priority
from rollcli.testing.fakes import FakeBackend, ScriptedBackend, drive_step

# two-sided 95 % critical values t_{0.975, df} from a printed t table (df = 1, 2, 3, 4, 5, 7)
T975 = {1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 5: 2.5706, 7: 2.3646}


@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.1, 0.2, 0.5])
def test_critical_values_match_scipy(alpha: float) -> None:
    for df in range(1, 301):
        assert t_critical(alpha, df) == pytest.approx(student_t.ppf(1 - alpha / 2, df), rel=1e-12)


def test_critical_values_match_a_t_table() -> None:
    for df, value in T975.items():
        assert t_critical(0.05, df) == pytest.approx(value, abs=1e-4)
    with pytest.raises(ValueError, match="df must be >= 1"):
        t_critical(0.05, 0)


def test_priority_against_hand_computed_values() -> None:
    # s = 0.5, n = 4, alpha = 0.05, lambda = 0.1, T = 100:
    # h(4) = 3.1824 * 0.5 / 2 = 0.79561; h(5) = 2.7764 * 0.5 / sqrt(5) = 0.62083
    # bonus = 0.1 * sqrt(log(101) / 4) = 0.10741; Pi = 0.79561 - 0.62083 + 0.10741 = 0.28219
    pi = xrpo_priority(np.array([0.5]), np.array([4]), 100.0, 0.05, 0.1)
    assert pi[0] == pytest.approx(0.28219, abs=2e-5)
    h = half_width(np.array([0.5, 0.5]), np.array([4, 5]), 0.05)
    np.testing.assert_allclose(h, [0.79561, 0.62083], atol=2e-5)
    # a zero-variance prompt: only the bonus, 0.1 * sqrt(log(2) / 2) = 0.058871 at T = 1
    assert xrpo_priority(np.array([0.0]), np.array([2]), 1.0, 0.05, 0.1)[0] == pytest.approx(
        0.1 * math.sqrt(math.log(2) / 2), rel=1e-12
    )
    with pytest.raises(ValueError, match="n >= 2"):
        half_width(np.array([0.5]), np.array([1]), 0.05)


@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.2])
def test_priority_falls_with_n(alpha: float) -> None:
    # the greedy is the top of the table only if every prompt's priorities fall with n
    n = np.arange(2, 400)
    for s, lam, clock in [(0.5, 0.0, 1.0), (0.3, 0.1, 50.0), (1e-3, 1.0, 1e4)]:
        pi = xrpo_priority(np.full(n.size, s), n, clock, alpha, lam)
        assert np.all(np.diff(pi) < 0)


def _greedy(s, n, quota, cap, clock, alpha, lam):
    """One rollout at a time to the largest priority, ties to the earlier prompt."""

    def pi(i, m):
        return round(float(xrpo_priority(s[i : i + 1], n[i : i + 1] + m, clock, alpha, lam)[0]), 12)

    counts = [0] * len(n)
    heap = [(-pi(i, 0), i) for i in range(len(n)) if cap[i] > 0]
    heapq.heapify(heap)
    for _ in range(quota):
        if not heap:
            break
        _p, i = heapq.heappop(heap)
        counts[i] += 1
        if counts[i] < cap[i]:
            heapq.heappush(heap, (-pi(i, counts[i]), i))
    return counts


def test_extras_are_the_greedy() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        k = int(rng.integers(1, 7))
        n = rng.integers(2, 9, k)
        s = rng.choice([0.0, 0.25, 0.5, 0.433], k)  # ties on purpose
        cap = rng.integers(0, 5, k)
        quota = int(rng.integers(0, 14))
        lam, clock = float(rng.choice([0.0, 0.1, 1.0])), float(rng.integers(1, 100))
        extras = xrpo_extras(s, n, quota, cap, clock, 0.05, lam)
        assert extras.tolist() == _greedy(s, n, quota, cap, clock, 0.05, lam)
        assert extras.sum() == min(quota, cap.sum()) and np.all(extras <= cap)


def test_a_step_by_hand() -> None:
    # prompt 0 always right, 1 always wrong, 2 and 3 alternate; budget 4 x 4 = 16, base 2 each.
    # Phase 2 spends ceil(8 / 2) = 4. Priorities at T = 1 (lambda 0.1), s = sqrt(0.5) for 2, 3:
    #   n = 2: 6.3530 - 1.7566 + 0.0589 = 4.655 (prompts 2, 3); n = 3: 0.631 + 0.048 = 0.680
    #   prompts 0, 1 (s = 0): 0.0589 at n = 2  ->  2 extras each to prompts 2 and 3.
    # Phase 3 spends the last 4. Prompts 2, 3 have [1, 0, 1, 0]: s = sqrt(1/3) = 0.5774;
    #   n = 4: 0.9187 - 0.7169 + 0.0416 = 0.243; n = 5: 0.1109 + 0.0372 = 0.148 > 0.0589
    #   ->  2 more each: sizes 2, 2, 6, 6 (prompts 0 and 1 never beat them).
    backend = ScriptedBackend([[1.0], [0.0], [1.0, 0.0], [1.0, 0.0]])
    config = XrpoConfig(n_mean=4, n_init=2, n_max=8, num_phases=3)
    alloc = create_allocator(config, num_prompts=4, rollouts_per_step=16, seed=0)
    groups = drive_step(alloc, backend, 0)
    sizes = {g.prompt_id: g.size for g in groups}
    assert [sizes[p] for p in range(4)] == [2, 2, 6, 6]
    by_phase: dict[str, dict[int, int]] = {}
    for p, phase, n, _t in backend.generated:
        by_phase.setdefault(phase, {})[p] = n
    assert by_phase == {
        "base": {0: 2, 1: 2, 2: 2, 3: 2},
        "phase2": {2: 2, 3: 2},
        "phase3": {2: 2, 3: 2},
    }
    assert alloc.stats()["zero_var_extra"] == 0.0 and alloc.stats()["extra"] == 8.0


def test_the_bonus_reaches_zero_variance_prompts() -> None:
    # With a large lambda the bonus dominates: the extras spread over every prompt by n_q alone
    backend = ScriptedBackend([[1.0], [0.0], [1.0, 0.0], [1.0, 0.0]])
    config = XrpoConfig(n_mean=4, n_init=2, n_max=8, num_phases=2, lam=100.0)
    alloc = create_allocator(config, num_prompts=4, rollouts_per_step=16, seed=0)
    sizes = sorted(g.size for g in drive_step(alloc, backend, 0))
    assert sizes == [4, 4, 4, 4]
    # and with lambda = 0 a zero-variance prompt gets nothing while a mixed one has room
    alloc = create_allocator(
        XrpoConfig(n_mean=4, n_init=2, n_max=16, num_phases=2, lam=0.0),
        num_prompts=4,
        rollouts_per_step=16,
        seed=0,
    )
    groups = drive_step(alloc, ScriptedBackend([[1.0], [0.0], [1.0, 0.0], [1.0, 0.0]]), 0)
    assert {g.prompt_id: g.size for g in groups}[0] == 2
    assert {g.prompt_id: g.size for g in groups}[1] == 2


@pytest.mark.parametrize("clock", ["step", "rollouts"])
def test_every_step_spends_exactly_the_budget(clock: str) -> None:
    backend = FakeBackend(np.random.default_rng(1).uniform(0, 1, 64), seed=1)
    config = XrpoConfig(n_mean=6, n_init=2, n_max=10, num_phases=4, bonus_clock=clock)
    alloc = create_allocator(config, num_prompts=64, rollouts_per_step=96, seed=1)
    for step in range(12):
        groups = drive_step(alloc, backend, step)
        assert len(groups) == 16
        assert sum(g.size for g in groups) == 96
        assert all(2 <= g.size <= 10 for g in groups)


def test_config_checks() -> None:
    with pytest.raises(ValueError, match="n_init must be >= 2"):
        XrpoConfig(n_init=1)
    with pytest.raises(ValueError, match="n_max must be >= n_mean"):
        XrpoConfig(n_max=4)
    with pytest.raises(ValueError, match="alpha"):
        XrpoConfig(alpha=1.0)
    with pytest.raises(ValueError, match="bonus_clock"):
        XrpoConfig(bonus_clock="epochs")  # type: ignore[arg-type]
