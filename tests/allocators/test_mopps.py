"""MoPPS on hand-computed cases, and against a transcription of the official sampler.

TRANSCRIPTION FOR TESTING ONLY: ``_OfficialPosteriorSampler`` is transcribed from
thu-rllab/MoPPS at commit a883f519bb2ec9e6bea3cb586639ee9c4f4cf146,
``recipe/ours/mopps.py`` (``PosteriorSampler.sample_batch`` and ``train``) with the success rate
of ``recipe/ours/our_ray_trainer.py::our_group_reward``. Its global ``np.random`` calls draw from
a passed ``numpy.random.Generator`` instead, so both sides can share one random stream.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from rollcli.allocators import PromptSource, create_allocator, create_config
from rollcli.allocators._common import take_full_batch
from rollcli.allocators.mopps import MoppsConfig, select_candidates
from rollcli.testing import FakeBackend, ScriptedBackend
from rollcli.testing.allocator_contract import make_pool


class _OfficialPosteriorSampler:
    def __init__(self, real_batch_size, n, decay_ratio, strategy, lower=0.3, upper=0.7):
        self.real_batch_size = real_batch_size
        self.n = n
        self.alpha: dict[str, float] = {}
        self.beta: dict[str, float] = {}
        self.prior_alpha = 1.0
        self.prior_beta = 1.0
        self.decay_ratio = decay_ratio
        self.target_mean = 0.5
        self.lower_bound = lower
        self.upper_bound = upper
        self.sampling_strategy = strategy

    def sample_batch(self, candidate_indices, rng):
        m = len(candidate_indices)
        assert self.real_batch_size <= m, "batch_size must be <= number of candidates"
        target_mu = self.target_mean
        local_alpha = []
        local_beta = []
        for index in candidate_indices:
            index = str(index)
            if index not in self.alpha:
                self.alpha[index] = self.prior_alpha
            local_alpha.append(self.alpha[index])
            if index not in self.beta:
                self.beta[index] = self.prior_beta
            local_beta.append(self.beta[index])
        local_alpha = np.array(local_alpha)
        local_beta = np.array(local_beta)
        sampled_r = rng.beta(local_alpha, local_beta)
        if self.sampling_strategy == "uniform":
            sampled_index = rng.choice(m, size=self.real_batch_size, replace=False)
        elif self.sampling_strategy == "topk":
            distances = (sampled_r - target_mu) ** 2
            sampled_index = np.argsort(distances)[: self.real_batch_size]
        elif self.sampling_strategy == "threshold":
            in_range_mask = (sampled_r >= self.lower_bound) & (sampled_r <= self.upper_bound)
            in_range_indices = np.where(in_range_mask)[0]
            if len(in_range_indices) >= self.real_batch_size:
                rng.shuffle(in_range_indices)
                sampled_index = in_range_indices[: self.real_batch_size]
            else:
                scores = np.zeros_like(sampled_r)
                too_low = sampled_r < self.lower_bound
                too_high = sampled_r > self.upper_bound
                scores[too_low] = self.lower_bound - sampled_r[too_low]
                scores[too_high] = sampled_r[too_high] - self.upper_bound
                sampled_index = np.argsort(scores)[: self.real_batch_size]
        return np.asarray(candidate_indices)[sampled_index]

    def train(self, indices, y):
        for idx, s in zip(indices, y, strict=True):
            idx = str(idx)
            # (the official `... if n > 1 else 8` binds to the whole sum: n = 8 here)
            self.alpha[idx] = (
                self.alpha[idx] * self.decay_ratio
                + self.prior_alpha * (1 - self.decay_ratio)
                + s * self.n
            )
            self.beta[idx] = (
                self.beta[idx] * self.decay_ratio
                + self.prior_beta * (1 - self.decay_ratio)
                + (1 - s) * self.n
            )


def _official_success_rate(rewards: np.ndarray) -> float:
    acc = (rewards >= 1).astype(int)  # our_ray_trainer: acc = (acc >= 1).int()
    return acc.sum() / len(acc)


@pytest.mark.parametrize(
    ("strategy", "decay", "lower", "upper"),
    [("topk", 1.0, 0.3, 0.7), ("threshold", 0.5, 0.3, 0.7), ("threshold", 1.0, 0.45, 0.5),
     ("uniform", 0.5, 0.3, 0.7)],
)  # fmt: skip
def test_decisions_and_posteriors_match_the_official_sampler(strategy, decay, lower, upper) -> None:
    num, n, rollouts = 600, 8, 256  # B = 32 prompts from 4 x 32 = 128 candidates
    backend = FakeBackend(make_pool(num, seed=3), 3)
    config = {"kind": "mopps", "n": n, "candidate_factor": 4.0, "decay": decay,
              "strategy": strategy, "lower": lower, "upper": upper, "candidates": "epoch"}  # fmt: skip
    a = create_allocator(config, num_prompts=num, rollouts_per_step=rollouts, seed=1)
    official = _OfficialPosteriorSampler(32, n, decay, strategy, lower, upper)
    twin = PromptSource(num_prompts=num, seed=1)  # the allocator's epoch order, for the candidates
    for step in range(25):
        rng = copy.deepcopy(a.rng)
        expected = official.sample_batch(take_full_batch(twin, 128), rng).tolist()
        a.start_step(step)
        ask = a.ask()
        # the same prompts (order aside: the official argsort is not stable, and its threshold
        # fallback ranks every in-band draw at score 0, so equal scores come out in any order)
        assert sorted(ask.prompt_ids) == sorted(expected)
        outcomes = backend.generate(ask)
        a.tell(outcomes)
        a.train_groups()
        official.train(ask.prompt_ids, [_official_success_rate(o.rewards) for o in outcomes])
    seen = [int(k) for k in official.alpha]
    assert a.alpha[seen].tolist() == pytest.approx([official.alpha[str(p)] for p in seen])
    assert a.beta[seen].tolist() == pytest.approx([official.beta[str(p)] for p in seen])
    assert a.source.epoch >= 4  # 25 x 128 candidates over a pool of 600


def test_posterior_update_by_hand() -> None:
    backend = ScriptedBackend([[1, 1, 1, 0]] * 4)  # 3 successes of 4 each visit
    for decay, alpha, beta in (
        (1.0, 1 + 3 + 3, 1 + 1 + 1),
        (0.5, 0.5 * 4 + 0.5 + 3, 0.5 * 2 + 0.5 + 1),
    ):
        a = create_allocator(
            {"kind": "mopps", "n": 4, "candidate_factor": 1.0, "decay": decay},
            num_prompts=4,
            rollouts_per_step=16,
            seed=0,
        )
        for step in range(2):  # the 4 candidates are the batch: every prompt, every step
            a.start_step(step)
            a.tell(backend.generate(a.ask()))
            groups = a.train_groups()
        assert sorted(g.prompt_id for g in groups) == [0, 1, 2, 3]  # every group trains
        # visit 1: (1 + 3, 1 + 1); visit 2 with decay lam: lam * a + (1 - lam) * 1 + 3
        assert a.alpha.tolist() == [alpha] * 4 and a.beta.tolist() == [beta] * 4
        assert a.posterior_mean([0]).tolist() == [alpha / (alpha + beta)]


def test_rewards_below_one_are_failures() -> None:
    backend = ScriptedBackend([[1.0, 0.9, 0.5, 0.0]])
    a = create_allocator(
        {"kind": "mopps", "n": 4, "candidate_factor": 1.0},
        num_prompts=1,
        rollouts_per_step=4,
        seed=0,
    )
    a.start_step(0)
    a.tell(backend.generate(a.ask()))
    assert (a.alpha[0], a.beta[0]) == (2.0, 4.0)


def test_selection_rules_by_hand() -> None:
    rng = np.random.default_rng(0)
    draws = np.array([0.1, 0.46, 0.9, 0.56, 0.5, 0.3])
    topk = MoppsConfig(strategy="topk")
    assert select_candidates(draws, 3, topk, rng).tolist() == [4, 1, 3]  # |p - .5|: 0, .04, .06
    band = MoppsConfig(strategy="threshold", lower=0.3, upper=0.7)
    inside = select_candidates(draws, 2, band, rng).tolist()
    assert len(inside) == 2 and set(inside) <= {1, 3, 4, 5}  # random among the in-band draws
    narrow = MoppsConfig(strategy="threshold", lower=0.45, upper=0.5)
    # two in band (score 0), then the closest outside: .56 (.06), .3 (.15) -> positions 1, 4, 3
    assert select_candidates(draws, 3, narrow, rng).tolist() == [1, 4, 3]


def test_candidates_random_draws_from_the_whole_pool() -> None:
    a = create_allocator(
        {"kind": "mopps", "n": 2, "candidate_factor": 3.0},
        num_prompts=100,
        rollouts_per_step=8,
        seed=0,
    )
    assert (a.batch_prompts, a.num_candidates) == (4, 12)
    backend = FakeBackend(np.full(100, 0.5), 0)
    asked = []
    for step in range(20):
        a.start_step(step)
        ask = a.ask()
        asked.append(ask.prompt_ids)
        a.tell(backend.generate(ask))
        a.train_groups()
        assert a.stats()["candidates"] == 12
    assert a.source.epoch == 0  # random candidates do not walk the epoch order
    assert len({p for ids in asked for p in ids}) > 40


def test_epoch_candidates_drop_the_short_tail() -> None:
    a = create_allocator(
        {"kind": "mopps", "n": 2, "candidate_factor": 3.0, "candidates": "epoch"},
        num_prompts=30,
        rollouts_per_step=8,
        seed=0,
    )
    backend = FakeBackend(np.full(30, 0.5), 0)
    for step in range(3):  # 12 + 12 candidates, then 6 left < 12: a new epoch
        a.start_step(step)
        a.tell(backend.generate(a.ask()))
        a.train_groups()
    assert a.source.epoch == 1


@pytest.mark.parametrize(
    ("knobs", "match"),
    [
        ({"n": 0}, "n must be >= 1"),
        ({"candidate_factor": 0.5}, "candidate_factor must be >= 1"),
        ({"decay": 1.5}, "decay must be in"),
        ({"prior_alpha": 0.0}, "prior_alpha and prior_beta must be > 0"),
        ({"lower": 0.8}, "lower <= upper"),
        ({"strategy": "best"}, "strategy must be one of topk, threshold, uniform"),
        ({"candidates": "all"}, "candidates must be one of random, epoch"),
    ],
)
def test_bad_knobs_name_themselves(knobs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        create_config({"kind": "mopps", **knobs})


def test_presets() -> None:
    math = create_config({"kind": "mopps", "preset": "paper-math"})
    countdown = create_config({"kind": "mopps", "preset": "paper-countdown"})
    assert (math.candidate_factor, math.decay, math.n) == (16.0, 1.0, 8)
    assert (countdown.candidate_factor, countdown.decay) == (8.0, 0.5)
