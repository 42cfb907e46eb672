"""CurES: the draw and the split against a transcription of the official code (ZexuSun/CurES,
commit eccf298), and hand-computed steps."""

from __future__ import annotations

import numpy as np
import pytest

from rollcli.allocators import create_allocator
from rollcli.allocators.cures import CuresConfig, cures_counts, cures_sampling_probabilities
from rollcli.testing import ScriptedBackend

from .conftest import StepRecorder

# -- transcription of the official decision rule (not imported: read, then written out) ---------


def official_probs(counter: list[dict[str, int]]) -> np.ndarray:
    """``EpicSampler.update_difficulty`` then ``__iter__``'s probabilities (epic_sampler.py)."""
    difficulties, alphas = [], []
    for cnt in counter:
        alpha = cnt["Accepted"]
        beta = cnt["All"] - alpha
        difficulties.append((alpha + 1) / (alpha + 1 + beta + 1))  # Beta(alpha+1, beta+1).mean
        alphas.append(alpha)
    w = np.array(difficulties)
    t_vec = (np.array(alphas) + 1) / 1e-2
    scores = np.exp(np.sqrt(w * (1 - w)) / t_vec)
    return scores / scores.sum()


def official_sample_sizes(
    correct_counts: list[int], num_rollout_min: int, batch_size: int, num_rollout_max: int
) -> list[int]:
    """``EPICInitializer.init_sample_size`` (stage_0_init_difficulty_sample_size.py) with every
    log-prob gradient norm equal to 1 (an allocator sees no gradients)."""
    all_sigmas = []
    for k in correct_counts:
        grads = {"correct": [1.0] * k or [0], "wrong": [1.0] * (num_rollout_min - k) or [0]}
        alpha, beta = k / num_rollout_min, (num_rollout_min - k) / num_rollout_min
        sigma = alpha * (beta**2) * np.mean(np.power(grads["correct"], 2))
        sigma += (alpha**2) * beta * np.mean(np.power(grads["wrong"], 2))
        sigma -= (
            (alpha**2)
            * (beta**2)
            * np.power((np.mean(grads["correct"]) - np.mean(grads["wrong"])), 2)
        )
        all_sigmas.append(np.sqrt(sigma))
    rollout_budget = batch_size * num_rollout_max
    weights = np.array(all_sigmas) / np.sum(all_sigmas)
    return np.round(rollout_budget * weights).astype("int").tolist()


# -- differential tests ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(20))
def test_probabilities_match_the_official_sampler(seed: int) -> None:
    rng = np.random.default_rng(seed)
    total = rng.integers(0, 40, size=200)
    accepted = rng.binomial(total, rng.uniform(0, 1, size=200))
    counter = [{"Accepted": int(a), "All": int(n)} for a, n in zip(accepted, total, strict=True)]
    ours = cures_sampling_probabilities(accepted.astype(float), total.astype(float), 100.0)
    np.testing.assert_allclose(ours, official_probs(counter), rtol=1e-12, atol=0)


@pytest.mark.parametrize("seed", range(20))
def test_split_matches_the_official_sample_sizes(seed: int) -> None:
    """The split from a 4-rollout pilot's success share, 16 prompts x 8 mean, official rounding."""
    rng = np.random.default_rng(seed)
    correct = rng.integers(0, 5, size=16)
    if not ((correct > 0) & (correct < 4)).any():
        correct[0] = 2  # the official divides by a zero sum otherwise
    official = official_sample_sizes(correct.tolist(), 4, batch_size=16, num_rollout_max=8)
    ours = cures_counts(correct / 4.0, 16 * 8)
    assert ours.tolist() == official


def test_draw_equals_the_official_choice_on_one_stream() -> None:
    """The official draws ``np.random.choice(all, size=B, replace=False, p=probs)``; through one
    shared Generator (the legacy global stream draws differently) the batch is the same."""
    rng = np.random.default_rng(7)
    total = rng.integers(0, 12, size=64).astype(float)
    accepted = np.floor(total * rng.uniform(0, 1, size=64))
    alloc = create_allocator({"kind": "cures"}, num_prompts=64, rollouts_per_step=8 * 8, seed=3)
    alloc.accepted, alloc.total = accepted.copy(), total.copy()
    stream = np.random.default_rng()
    stream.bit_generator.state = alloc.rng.bit_generator.state
    counter = [{"Accepted": int(a), "All": int(n)} for a, n in zip(accepted, total, strict=True)]
    expected = stream.choice(np.arange(64), size=8, replace=False, p=official_probs(counter))
    alloc.start_step(0)
    ask = alloc.ask()
    assert sorted(ask.prompt_ids) == sorted(expected.tolist())


# -- hand-computed behaviour --------------------------------------------------------------------


def test_split_follows_sqrt_q_one_minus_q() -> None:
    counts = cures_counts(np.array([0.5, 0.1, 0.0, 1.0]), 40)
    # sigma = 0.5, 0.3, 0, 0 -> 40 * 5/8 = 25, 40 * 3/8 = 15
    assert counts.tolist() == [25, 15, 0, 0]
    assert cures_counts(np.array([0.0, 1.0]), 16).tolist() == [0, 0]
    assert cures_counts(np.array([0.5, 0.5, 0.5]), 16, rounding="exact").tolist() == [6, 5, 5]
    assert cures_counts(np.array([0.5, 0.5]), 16, group_multiple=4).tolist() == [8, 8]


def test_a_step_updates_counts_and_trains_every_group() -> None:
    backend = ScriptedBackend([[1.0, 0.0]] * 4 + [[1.0]] * 4)
    alloc = create_allocator(
        {"kind": "cures", "n_mean": 4, "size_from": "last_visit"},
        num_prompts=8,
        rollouts_per_step=16,
        seed=0,
    )
    run = StepRecorder(alloc, backend)
    groups = run.step(0)
    assert sum(k for _, k, _ in run.asks[0]) == 16  # every last share is the prior 0.5
    assert {g.prompt_id for g in groups} == {p for p, _, _ in run.asks[0]}
    for p, k, _ in run.asks[0]:
        assert alloc.total[p] == k
        assert alloc.last_share[p] == (1.0 if p >= 4 else 0.5)
    # a prompt whose last visit was all correct is drawn but gets no rollouts (sigma 0)
    flat = {int(p) for p in np.flatnonzero(alloc.last_share == 1.0)}
    assert flat
    dropped = 0.0
    for step in range(1, 6):
        run.step(step)
        assert not flat & {p for p, _, _ in run.asks[0]}
        dropped += alloc.stats()["dropped"]
    assert dropped > 0  # some were drawn, and left out


def test_max_step_rollouts_bounds_numpy_rounding() -> None:
    alloc = create_allocator(
        {"kind": "cures", "n_mean": 4, "group_multiple": 2},
        num_prompts=40,
        rollouts_per_step=40,
        seed=0,
    )
    # B = 10, units = 20: at most 20 + 5 units of 2
    assert alloc.max_step_rollouts == 50


def test_config_errors_name_the_knob() -> None:
    with pytest.raises(ValueError, match="temperature"):
        CuresConfig(temperature=0.0)
    with pytest.raises(ValueError, match="group_multiple"):
        CuresConfig(n_mean=6, group_multiple=4)
    with pytest.raises(ValueError, match="rollouts_per_step=30 is not divisible by n_mean=8"):
        create_allocator({"kind": "cures"}, num_prompts=10, rollouts_per_step=30, seed=0)
