"""Behaviour of the sim backend: the GRPO estimator, transfer, determinism, lengths, calibration."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollcli.allocators.api import Ask, AskItem, Group
from rollcli.backends import create_backend
from rollcli.backends.sim import SimConfig, create_sim_backend
from rollcli.backends.sim.backend import SimBackend
from rollcli.backends.sim.pool import sigmoid
from rollcli.backends.sim.update import group_advantages

SMALL = {"kind": "sim", "num_train_prompts": 128, "num_eval_prompts": 64}


def make(seed: int = 0, **knobs: object) -> SimBackend:
    return create_sim_backend({**SMALL, **knobs}, seed=seed)


def generate(backend: SimBackend, ids: list[int], n: int) -> list:
    return backend.generate(Ask(tuple(AskItem(i, n) for i in ids)))


def as_groups(outcomes: list) -> list[Group]:
    return [Group(o.prompt_id, o.refs, o.rewards) for o in outcomes]


def test_registered_factory_and_config_object() -> None:
    backend = create_backend(SMALL, seed=0)
    assert isinstance(backend, SimBackend) and backend.num_prompts == 128
    assert create_sim_backend(SimConfig(num_train_prompts=5), seed=1).num_prompts == 5


def test_unknown_knob_lists_valid_ones_and_bad_values_name_the_knob() -> None:
    with pytest.raises(ValueError, match="no knob 'lrr'.*Valid: kind, num_train_prompts"):
        create_sim_backend({"kind": "sim", "lrr": 1.0}, seed=0)
    with pytest.raises(ValueError, match="wrong_length_ratio must be > 0"):
        SimConfig(wrong_length_ratio=0)
    with pytest.raises(ValueError, match="num_skills"):
        SimConfig(num_skills=0)


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_zero_variance_groups_teach_nothing(optimizer: str) -> None:
    backend = make(optimizer=optimizer, score_noise=5.0)
    outcomes = generate(backend, list(range(128)), 8)
    flat = [o for o in outcomes if np.ptp(o.rewards) == 0]
    assert any(o.rewards[0] == 1 for o in flat) and any(o.rewards[0] == 0 for o in flat)
    before = backend.evaluate()
    metrics = backend.update(as_groups(flat))
    assert metrics["grad_norm"] == 0.0 and metrics["informative_groups"] == 0
    assert backend.evaluate() == before
    assert backend.policy_version == 1


def test_one_group_matches_the_hand_computed_grpo_step() -> None:
    # rewards [1,0,0,0]: mean .25, sample std .5, A = [1.5,-.5,-.5,-.5];
    # sum_j A_j (r_j - p) = 1.5 for any p, so the mean over 4 rollouts is 0.375.
    backend = make(optimizer="sgd", lr=0.1, score_noise=0.0)
    for _ in range(200):
        (outcome,) = generate(backend, [3], 4)
        if outcome.rewards.tolist() == [1.0, 0.0, 0.0, 0.0]:
            break
    else:
        pytest.fail("no [1, 0, 0, 0] group in 200 tries")
    metrics = backend.update(as_groups([outcome]))
    assert metrics["signal_norm"] == pytest.approx(0.375, rel=1e-5)
    assert backend.theta[0] == pytest.approx(0.1 * 0.375, rel=1e-5)


def test_score_noise_is_unbiased() -> None:
    # Averaged over many groups, the noisy gradient's mean equals the noise-free signal
    # (one optimiser step per update, so theta / lr is that step's gradient).
    backend = make(score_noise=3.0, num_minibatches=1)
    outcomes = generate(backend, list(range(128)) * 20, 8)
    groups = as_groups(outcomes)
    signal, noisy = [], []
    for start in range(0, len(groups), 64):
        clean = make(score_noise=3.0, optimizer="sgd", num_minibatches=1)
        clean._store = backend._store  # same rollouts, fresh policy
        metrics = clean.update(groups[start : start + 64])
        signal.append(metrics["signal_norm"])
        noisy.append(clean.theta[0] / clean.config.lr)
    assert np.mean(noisy) == pytest.approx(np.mean(signal), abs=4 * np.std(noisy) / 6)


def test_learning_transfers_through_the_shared_ability() -> None:
    backend = make(score_noise=0.0, lr=0.05)
    others = np.arange(10, 128)
    p_before = backend.success_probabilities(others)
    acc_before = backend.evaluate()["accuracy"]
    for _ in range(20):
        backend.update(as_groups(generate(backend, list(range(10)), 16)))
    assert np.all(backend.success_probabilities(others) > p_before)
    assert backend.evaluate()["accuracy"] > acc_before + 0.01


def test_transfer_follows_shared_skills() -> None:
    backend = make(num_skills=2, skill_concentration=0.05, score_noise=0.0, optimizer="sgd", lr=1.0)
    loadings = backend.pool.train_loadings
    skill0 = np.flatnonzero(loadings[:, 0] > 0.95)
    skill1 = np.flatnonzero(loadings[:, 1] > 0.95)
    train, held = skill0[:8], skill0[8:]
    assert len(held) > 5 and len(skill1) > 5

    def logit(ids: np.ndarray) -> np.ndarray:
        p = backend.success_probabilities(ids)
        return np.log(p) - np.log1p(-p)

    before0, before1 = logit(held), logit(skill1)
    for _ in range(20):
        backend.update(as_groups(generate(backend, train.tolist(), 16)))
    gain0 = np.mean(logit(held) - before0)
    gain1 = np.mean(logit(skill1) - before1)
    assert gain0 > 0.3 and gain1 < 0.2 * gain0


def test_deterministic_under_a_seed_and_the_pool_is_fixed_by_pool_seed() -> None:
    a, b, c = make(seed=1), make(seed=1), make(seed=2)
    ids = list(range(0, 128, 3))
    ra = [o.rewards.tolist() for o in generate(a, ids, 8)]
    assert ra == [o.rewards.tolist() for o in generate(b, ids, 8)]
    assert ra != [o.rewards.tolist() for o in generate(c, ids, 8)]
    np.testing.assert_array_equal(a.pool.train_difficulty, c.pool.train_difficulty)
    other_pool = make(seed=1, pool_seed=5)
    assert not np.array_equal(a.pool.train_difficulty, other_pool.pool.train_difficulty)


def test_success_probabilities_match_sampled_frequencies() -> None:
    backend = make()
    ids = [0, 1, 2, 3]
    outcomes = generate(backend, ids, 20000)
    freq = np.array([o.rewards.mean() for o in outcomes])
    np.testing.assert_allclose(freq, backend.success_probabilities(np.array(ids)), atol=0.015)
    with pytest.raises(ValueError, match="outside the pool"):
        backend.success_probabilities(np.array([128]))


def test_wrong_answers_run_longer() -> None:
    exact = make(length_sigma=0.0, length_difficulty=0.0, mean_tokens=100, wrong_length_ratio=2.0)
    for o in generate(exact, list(range(20)), 8):
        np.testing.assert_array_equal(o.num_tokens, np.where(o.rewards > 0, 100, 200))
    noisy = make(mean_tokens=500, wrong_length_ratio=1.5, max_tokens=900)
    outcomes = generate(noisy, list(range(128)), 32)
    tokens = np.concatenate([o.num_tokens for o in outcomes])
    rewards = np.concatenate([o.rewards for o in outcomes])
    assert tokens.max() <= 900 and tokens.min() >= 1
    assert tokens[rewards == 0].mean() > 1.2 * tokens[rewards == 1].mean()


def test_sampled_evaluation_does_not_touch_training_randomness() -> None:
    a, b = make(eval_samples=4), make(eval_samples=4)
    a.evaluate()
    a.evaluate()
    assert [o.rewards.tolist() for o in generate(a, [1, 2], 8)] == [
        o.rewards.tolist() for o in generate(b, [1, 2], 8)
    ]
    assert a.evaluate() == b.evaluate()


def test_update_rejects_freed_and_foreign_refs() -> None:
    backend = make()
    first, second = generate(backend, [0, 1], 4)
    with pytest.raises(ValueError, match="generated for prompt 1"):
        backend.update([Group(0, second.refs, second.rewards)])
    backend.retain(first.refs)
    assert backend.num_stored_rollouts == 4
    with pytest.raises(KeyError, match="freed"):
        backend.update(as_groups([second]))


def test_default_scenario_resembles_a_small_math_model_pool() -> None:
    # docs/sim.md: ~39 % mean success, a quarter of prompts near 0, a tenth near 1,
    # about half of all 8-rollout groups zero-variance at the start.
    backend = create_sim_backend({"kind": "sim"}, seed=0)
    p = backend.success_probabilities(np.arange(backend.num_prompts))
    assert 0.3 < p.mean() < 0.5
    assert (p < 0.05).mean() > 0.2 and (p > 0.95).mean() > 0.05
    assert 0.35 < np.mean(p**8 + (1 - p) ** 8) < 0.6
    assert sigmoid(0.0) == 0.5


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=12), min_size=1, max_size=8)
)
def test_grpo_advantages_match_the_closed_form(groups: list[list[float]]) -> None:
    # per group: advantages sum to 0, vanish for constant groups, and sum_j A_j r_j equals
    # sqrt(G (G-1) q (1-q)) / (1 + eps / std) (sample std, ddof=1)
    sizes = np.array([len(g) for g in groups])
    rewards = np.concatenate([np.array(g) for g in groups])
    gid = np.repeat(np.arange(len(groups)), sizes)
    adv = group_advantages(rewards, gid, sizes, True, 1e-6)
    for k, g in enumerate(groups):
        a, r = adv[gid == k], np.array(g)
        assert abs(a.sum()) < 1e-9
        if np.ptp(r) == 0:
            assert np.all(a == 0)
        else:
            n, q = len(r), r.mean()
            std = np.sqrt(n * q * (1 - q) / (n - 1))
            expected = np.sqrt(n * (n - 1) * q * (1 - q)) * std / (std + 1e-6)
            assert a @ r == pytest.approx(expected, rel=1e-9)
