"""PODS: the max-variance subset on hand-computed cases and against a transcription of the
official rule; batch sizes, generated vs trained rollouts, the ablation rules."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from rollcli.allocators import create_allocator
from rollcli.allocators.pods import (
    PodsConfig,
    max_variance_subsets,
    open_r1_max_variance_subsets,
    subset_search_order,
)

from .conftest import run_scripted_step
from .official_pods import (
    official_advantages,
    official_max_variance_indices,
    official_open_r1_indices,
)


@pytest.mark.parametrize(
    ("rewards", "m", "kept"),
    [
        # i = 2 (two 1s, two 0s) has the largest variance, 1/4
        ([1, 1, 1, 1, 0, 0, 0, 0], 4, [0, 1, 6, 7]),
        # all equal: every subset has variance 0, the first tried (top m) stays
        ([1, 1, 1, 1, 1, 1], 3, [0, 1, 2]),
        # top 4 = [1, 0, 0, 0] and i = 1 tie at 3/16: the top m, tried first, stays
        ([0, 0, 1, 0, 0, 0], 4, [2, 0, 1, 3]),
        # bottom 4 = [1, 1, 1, 0] (3/16) beats the top 4 (0); i = 1, 2, 3 only tie it
        ([1, 1, 1, 1, 1, 0], 4, [2, 3, 4, 5]),
        # non-binary: the extremes, i = 1
        ([3, 2, 1, 0], 2, [0, 3]),
        ([0.5, 2.0, 0.0, 2.0, 0.5], 2, [1, 2]),
        # n == m: every candidate is the whole group (top m)
        ([0, 1, 0], 3, [1, 0, 2]),
    ],
)
def test_hand_computed_subsets(rewards: list[float], m: int, kept: list[int]) -> None:
    assert max_variance_subsets(np.array(rewards, dtype=float), m).tolist() == kept


def test_search_order_is_the_official_one() -> None:
    assert subset_search_order(4).tolist() == [4, 0, 1, 2, 3]


def _reward_cases(rng: np.random.Generator, count: int):
    """Random (rewards, m) of several reward kinds; every reward lies on the 2^-16 grid except
    the continuous ones."""
    for _ in range(count):
        n = int(rng.integers(2, 40))
        m = int(rng.integers(2, n + 1))
        kind = rng.integers(4)
        if kind == 0:  # binary, any success rate
            r = (rng.random(n) < rng.random()).astype(float)
        elif kind == 1:  # the paper's shaped rewards: correctness 2 + format 0.5 + xml 0.125 steps
            r = (
                2.0 * (rng.random(n) < 0.5)
                + 0.5 * (rng.random(n) < 0.5)
                + 0.125 * rng.integers(5, size=n)
            )
        elif kind == 2:  # +-1
            r = np.where(rng.random(n) < rng.random(), 1.0, -1.0)
        else:  # continuous
            r = rng.random(n).astype(np.float32).astype(float)
        yield r, m, kind


def test_matches_the_transcribed_official_rule() -> None:
    """Same rewards in, same kept rollouts out, over 1,500 random groups (each reward kind)."""
    rng = np.random.default_rng(0)
    kinds = np.zeros(4, dtype=int)
    for r, m, kind in _reward_cases(rng, 1500):
        ours = max_variance_subsets(r, m).tolist()
        theirs = official_max_variance_indices(torch.tensor(r, dtype=torch.float32), m)
        assert ours == theirs, (r.tolist(), m)
        kinds[kind] += 1
    assert kinds.min() > 300  # every kind was exercised


def test_batched_rows_equal_one_at_a_time() -> None:
    rng = np.random.default_rng(1)
    rewards = (rng.random((64, 12)) < 0.4).astype(float)
    rows = max_variance_subsets(rewards, 5)
    assert rows.shape == (64, 5)
    assert [row.tolist() for row in rows] == [max_variance_subsets(r, 5).tolist() for r in rewards]


def _exact_first_best(r: np.ndarray, m: int) -> int:
    """The official choice of i in exact rational arithmetic (Fractions)."""
    s = sorted((Fraction(x) for x in r.tolist()), reverse=True)
    best, best_var = None, None
    for i in subset_search_order(m).tolist():
        kept = s[:i] + s[len(s) - (m - i) :]
        mean = sum(kept) / m
        var = sum((x - mean) ** 2 for x in kept)
        if best_var is None or var > best_var:
            best, best_var = i, var
    return best


def test_exact_ties_go_to_the_first_found() -> None:
    # 7 ones, 9 zeros: for odd m, k and m - k ones tie exactly; the first found must win
    r = np.array([1.0] * 7 + [0.0] * 9)
    for m in range(2, 17):
        i = _exact_first_best(r, m)
        expected = list(range(i)) + list(range(16 - (m - i), 16))
        assert max_variance_subsets(r, m).tolist() == expected, m
    assert max_variance_subsets(r, 5).tolist() == [0, 1, 13, 14, 15]  # 2 ones, not 3
    # rewards off the 2^-16 grid take the float path
    assert max_variance_subsets(np.array([0.1, 0.7, 0.3, 0.9]), 2).tolist() == [3, 0]


def test_step_generates_n_and_trains_the_kept_m() -> None:
    patterns = [[1, 1, 1, 0, 0, 0], [1.0], [0, 0, 0, 0, 0, 1]]
    order, run, groups = run_scripted_step(
        {"kind": "pods", "n": 6, "m": 4}, patterns, 12, num_prompts=8
    )
    alloc, asks = run.allocator, run.asks
    assert alloc.batch_prompts == 3 and alloc.max_step_rollouts == 18
    assert asks == [[(order[i], 6, "main") for i in range(3)]]
    # prompt 0: refs 0-5 rewards 1 1 1 0 0 0 -> i = 2: refs 0, 1 (top) and 4, 5 (bottom)
    # prompt 1: all 1 -> the top 4; prompt 2: one success -> top 4 (ties the later ones)
    assert [(g.prompt_id, list(g.refs), g.rewards.tolist()) for g in groups] == [
        (order[0], [0, 1, 4, 5], [1, 1, 0, 0]),
        (order[1], [6, 7, 8, 9], [1, 1, 1, 1]),
        (order[2], [17, 12, 13, 14], [1, 0, 0, 0]),
    ]
    assert all(g.baseline is None for g in groups)  # GRPO over the kept m
    ledger = alloc.ledger
    assert (ledger.step_rollouts, ledger.step_trained_rollouts) == (18, 12)
    stats = alloc.stats()
    assert stats["mean_top"] == pytest.approx((2 + 4 + 4) / 3)
    assert (stats["total_generated"], stats["total_trained"]) == (18, 12)


def test_budget_generated_and_divisibility() -> None:
    config = {"kind": "pods", "n": 6, "m": 4, "budget": "generated"}
    _, run, groups = run_scripted_step(config, [[1, 0]] * 8, 12)
    alloc = run.allocator
    assert alloc.batch_prompts == 2 and alloc.max_step_rollouts == 12
    assert [g.size for g in groups] == [4, 4]
    with pytest.raises(ValueError, match=r"not divisible by m=4 \(budget=trained\)"):
        create_allocator(
            {"kind": "pods", "n": 6, "m": 4}, num_prompts=8, rollouts_per_step=10, seed=0
        )
    with pytest.raises(ValueError, match="n must be >= m"):
        PodsConfig(n=4, m=8)
    with pytest.raises(ValueError, match="m must be >= 2"):
        PodsConfig(n=4, m=1)
    with pytest.raises(ValueError, match="rule must be one of"):
        PodsConfig(rule="max_var")  # type: ignore[arg-type]


def test_ablation_rules() -> None:
    patterns = [[0, 1, 0, 1, 1, 0]]
    config = {"kind": "pods", "n": 6, "m": 3, "rule": "max_reward"}
    _, _, (g,) = run_scripted_step(config, patterns, 3, num_prompts=8)
    assert list(g.refs) == [1, 3, 4] and g.rewards.tolist() == [1, 1, 1]
    picks = set()
    for seed in range(20):
        config = {"kind": "pods", "n": 6, "m": 3, "rule": "random"}
        _, _, (group,) = run_scripted_step(config, patterns, 3, num_prompts=8, seed=seed)
        assert len(set(group.refs)) == 3 and set(group.refs) <= set(range(6))
        picks.add(tuple(sorted(group.refs)))
    assert len(picks) > 5  # seeded, and not one fixed subset


def test_advantages_are_normalised_over_the_kept_rollouts() -> None:
    """The tiny backend's GRPO advantage of a kept group is the official one."""
    from rollcli.backends.tiny.grpo import group_advantages

    rng = np.random.default_rng(2)
    for _ in range(50):
        r = (rng.random(16) < rng.random()).astype(float)
        kept = r[max_variance_subsets(r, 8)]
        if np.ptp(kept) == 0:
            continue  # zero advantage both ways
        (ours,) = group_advantages([kept], eps=1e-4)  # the official eps (the backend's is 1e-6)
        theirs = official_advantages(torch.tensor(kept, dtype=torch.float32), 8).numpy()
        np.testing.assert_allclose(ours, theirs, rtol=1e-5)


@pytest.mark.parametrize(("n", "m"), [(128, 32), (64, 16), (12, 5)])
def test_open_r1_rule_matches_the_8gpu_trainer_as_it_ran(n: int, m: int) -> None:
    """Issue 29, mend (c): the open-r1 loop aliases ``indices`` into ``sorted_indices``;
    ``max_variance_open_r1`` keeps what it kept, and differs from the paper's rule often."""
    rng = np.random.default_rng(n + m)
    binary = (rng.random((300, n)) < rng.uniform(0.05, 0.95, (300, 1))).astype(float)
    shaped = rng.integers(0, 9, (300, n)) / 8.0
    for rewards in (binary, shaped):
        want = official_open_r1_indices(torch.tensor(rewards, dtype=torch.float32), m)
        ours = open_r1_max_variance_subsets(rewards, m)
        np.testing.assert_array_equal(ours, want.numpy())
    paper = max_variance_subsets(binary, m)
    as_run = open_r1_max_variance_subsets(binary, m)
    differ = np.mean([set(a) != set(b) for a, b in zip(paper, as_run, strict=True)])
    kept_var = np.take_along_axis(binary, as_run, 1).var(1).sum()
    best_var = np.take_along_axis(binary, paper, 1).var(1).sum()
    assert differ > 0.1 and kept_var < best_var


def test_the_8gpu_presets_say_which_rule_they_run() -> None:
    from rollcli.allocators import create_config

    paper = create_config({"kind": "pods", "preset": "paper-gsm8k-8gpu"})
    as_run = create_config({"kind": "pods", "preset": "paper-gsm8k-8gpu-as-run"})
    assert (paper.n, paper.m, paper.rule) == (128, 32, "max_variance")
    assert (as_run.n, as_run.m, as_run.rule) == (128, 32, "max_variance_open_r1")
