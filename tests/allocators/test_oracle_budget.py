"""The budget-aware oracle: a group's expected signal and noise, the budget split, the allocator."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from rollcli.allocators.oracle_budget import BudgetOracleAllocator, BudgetOracleConfig
from rollcli.allocators.oracle_signal import (
    SignalTable,
    allocate_rollouts,
    group_signal_stats,
    objective_value,
    size_menu,
)
from rollcli.testing import FakeBackend


def test_group_stats_by_hand() -> None:
    # n = 2, p = .5: k = 1 with prob .5; A = +-1/sqrt(2)... sum A r = sqrt(1*1*1/2), sum A^2 = 1
    s, v = group_signal_stats(0.5, 2)
    assert s[0] == pytest.approx(0.5 * math.sqrt(0.5)) and v[0] == pytest.approx(0.5)
    # n = 4, p = .5: k = 1, 3 (prob 1/4 each) give 1.5, k = 2 (prob 3/8) gives sqrt(3)
    s, v = group_signal_stats(0.5, 4)
    assert s[0] == pytest.approx(0.25 * 1.5 * 2 + 0.375 * math.sqrt(3))
    assert v[0] == pytest.approx(3 * (1 - 2 / 16))
    # Dr.GRPO: both are E[k (n - k) / n] = (n - 1) p (1 - p)
    s, v = group_signal_stats(np.array([0.3]), 5, std_normalize=False)
    assert s[0] == pytest.approx(4 * 0.3 * 0.7) and v[0] == pytest.approx(4 * 0.3 * 0.7)
    s, v = group_signal_stats(np.array([0.0, 1.0]), 8)
    assert s.tolist() == [0.0, 0.0] and v.tolist() == [0.0, 0.0]
    assert group_signal_stats(0.5, 1)[0][0] == 0.0


@pytest.mark.parametrize("n", [3, 6])
def test_group_stats_match_grpo_advantages_enumerated(n: int) -> None:
    p = 0.3
    s_exp = v_exp = 0.0
    for k in range(n + 1):
        r = np.array([1.0] * k + [0.0] * (n - k))
        if 0 < k < n:
            a = (r - r.mean()) / r.std(ddof=1)
            prob = math.comb(n, k) * p**k * (1 - p) ** (n - k)
            s_exp += prob * float(a @ r)
            v_exp += prob * float(a @ a)
    s, v = group_signal_stats(p, n)
    assert s[0] == pytest.approx(s_exp, rel=1e-12) and v[0] == pytest.approx(v_exp, rel=1e-12)


def test_size_menu_and_table_interpolation() -> None:
    menu = size_menu(2, 128)
    assert menu[:15].tolist() == list(range(2, 17)) and menu[-1] == 128
    assert np.all(np.diff(menu) > 0) and np.all(np.diff(menu[14:]) / menu[14:-1] < 0.25)
    assert size_menu(4, 4).tolist() == [4] and size_menu(20, 40)[0] == 20
    table = SignalTable(menu)
    p = np.random.default_rng(0).random(200)
    signal, noise = table.lookup(p)
    for column, n in enumerate(menu):
        s, v = group_signal_stats(p, int(n))
        np.testing.assert_allclose(signal[:, column], s, rtol=1e-4, atol=1e-9)
        np.testing.assert_allclose(noise[:, column], v, rtol=1e-4, atol=1e-9)


def test_equal_prompts_tie_by_key_and_big_groups_win() -> None:
    p = np.array([0.5, 0.5, 0.0])
    # S(.5, 4) = 1.40 > 2 S(.5, 2) = .71: one group of 4; the lower tie key gets it
    for objective in ("signal", "snr"):
        got = allocate_rollouts(p, 4, n_min=2, n_max=4, objective=objective,
                                tie_key=np.array([1.0, 0.0, 2.0]))  # fmt: skip
        assert got.tolist() == [0, 4, 0]
        got = allocate_rollouts(p, 4, n_min=2, n_max=4, objective=objective)
        assert got.tolist() == [4, 0, 0]


def test_budget_is_spent_in_full_or_left_below_n_min() -> None:
    assert allocate_rollouts(np.array([0.5, 0.1]), 4, n_min=2, n_max=2).tolist() == [2, 2]
    # 3 rollouts, groups of exactly 2: one stays unspent
    assert allocate_rollouts(np.array([0.5, 0.5]), 3, n_min=2, n_max=2).sum() == 2
    # 4 rollouts, at most 3 a group: the 3-group gives one back to open a group of 2
    assert allocate_rollouts(np.array([0.9, 0.002]), 4, n_min=2, n_max=3).tolist() == [2, 2]
    # nothing informative: the budget is still spent, in legal group sizes
    got = allocate_rollouts(np.zeros(3), 8, n_min=2, n_max=4)
    assert got.sum() == 8 and set(got.tolist()) <= {0, 2, 3, 4}
    assert allocate_rollouts(np.array([0.5]), 1, n_min=2, n_max=4).tolist() == [0]
    assert allocate_rollouts(np.zeros(0), 8, n_min=2, n_max=4).tolist() == []


def test_snr_keeps_noisy_hard_prompts_out() -> None:
    # p = .03 at 8 rollouts: S/V = .37, below half the batch's ratio (~.5 / 2): it only adds
    # noise, so the signal-to-noise objective gives everything to the p = .5 prompt
    p = np.array([0.5, 0.03])
    assert allocate_rollouts(p, 16, n_min=2, n_max=16, objective="snr").tolist() == [16, 0]
    # capped at 8 per prompt, the rest must go to the hard prompt
    assert allocate_rollouts(p, 16, n_min=2, n_max=8, objective="snr").tolist() == [8, 8]


def _exhaustive(p: np.ndarray, budget: int, n_min: int, n_max: int, objective: str) -> float:
    options = [0, *range(n_min, n_max + 1)]
    best = -1.0
    for counts in itertools.product(options, repeat=len(p)):
        if sum(counts) == budget:
            best = max(best, objective_value(p, np.array(counts), objective)[0])
    return best


def test_near_the_exhaustive_optimum_on_small_cases() -> None:
    rng = np.random.default_rng(1)
    ratios = []
    for _ in range(60):
        m = int(rng.integers(1, 5))
        n_max = int(rng.integers(2, 8))
        budget = int(rng.integers(2, m * n_max + 1))
        p = rng.random(m) if rng.random() < 0.7 else rng.choice([0.5, 0.02, 0.97, 0.0], m)
        for objective in ("snr", "signal"):
            best = _exhaustive(p, budget, 2, n_max, objective)
            if best <= 0:
                continue
            got = allocate_rollouts(p, budget, n_min=2, n_max=n_max, objective=objective)
            assert got.sum() == budget  # every budget here can be spent exactly
            ratios.append(objective_value(p, got, objective)[0] / best)
    ratios = np.array(ratios)
    assert ratios.min() > 0.98 and ratios.max() <= 1 + 1e-9
    assert np.mean(ratios > 1 - 1e-9) > 0.85


def test_large_pool_beats_fixed_n_selection() -> None:
    rng = np.random.default_rng(0)
    p = 1 / (1 + np.exp(-rng.normal(-1, 3, 4096)))
    got = allocate_rollouts(p, 4096, n_min=2, n_max=128, tie_key=rng.random(4096))
    assert got.sum() == 4096
    fixed = np.zeros(4096, dtype=np.int64)
    fixed[np.argsort(-p * (1 - p))[:512]] = 8  # the selection-only oracle at n = 8
    assert objective_value(p, got, "snr")[0] > objective_value(p, fixed, "snr")[0]


def make_oracle(p: np.ndarray, budget: int, **knobs: object) -> BudgetOracleAllocator:
    backend = FakeBackend(p, 0)
    return BudgetOracleAllocator(
        BudgetOracleConfig(**knobs),  # type: ignore[arg-type]
        num_prompts=len(p),
        rollouts_per_step=budget,
        seed=0,
        oracle=backend.success_probabilities,
    )


def test_allocator_asks_the_split_and_trains_every_rollout() -> None:
    p = np.array([0.0, 1.0, 0.5, 0.9, 0.3, 0.55, 0.05, 0.75])
    backend = FakeBackend(p, 0)
    oracle = make_oracle(p, 24, n_max=8)
    oracle.start_step(0)
    ask = oracle.ask()
    assert ask is not None and ask.num_rollouts == 24
    assert {i.prompt_id for i in ask.items} == {2, 4, 5}  # the three closest to .5
    assert all(i.num_rollouts == 8 for i in ask.items)
    oracle.tell(backend.generate(ask))
    assert oracle.ask() is None
    groups = oracle.train_groups()
    assert sum(g.size for g in groups) == 24
    stats = oracle.stats()
    assert stats["groups"] == 3 and stats["mean_group_size"] == 8 and stats["objective"] > 0
    state = json.loads(json.dumps(oracle.state_dict()))
    again = make_oracle(p, 24, n_max=8)
    again.load_state_dict(state)
    assert again.stats() == stats


def test_config_errors() -> None:
    with pytest.raises(ValueError, match="n_min must be >= 2"):
        BudgetOracleConfig(n_min=1)
    with pytest.raises(ValueError, match="n_max must be >= n_min"):
        BudgetOracleConfig(n_min=8, n_max=4)
    with pytest.raises(ValueError, match="objective"):
        BudgetOracleConfig(objective="loss")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="below n_min"):
        make_oracle(np.full(4, 0.5), 1)
