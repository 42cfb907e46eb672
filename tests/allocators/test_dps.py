"""DPS: selection and HMM filtering against a transcription of the official sampler
(maoyixiu/DPS, ``recipe/dps/task_sampler.py``, commit 5654d52), and hand-computed steps."""

from __future__ import annotations

import numpy as np
import pytest

from rollcli.allocators import PromptSource, create_allocator
from rollcli.allocators._common import take_full_batch
from rollcli.allocators.dps import DpsConfig, dps_filter, dps_prior_alpha
from rollcli.testing.allocator_contract import make_pool
from rollcli.testing.fakes import FakeBackend

# -- transcription of the official BayesianHMMSampler (read, then written out; not imported) ----


class OfficialHMM:
    def __init__(self, batch_size, prior_alpha, prior_pi, strategy, decay, entropy_weight=0.0):
        self.real_batch_size = batch_size
        self.prior_alpha = prior_alpha
        self.prior_pi = prior_pi
        self.alphas, self.pis, self.pis_before, self.sampled_times = {}, {}, {}, {}
        self.learning_rate = 1.0
        self.sampling_strategy = strategy
        self.decay = decay
        self.entropy_weight = entropy_weight

    def get_alpha_pi(self, index):
        index = str(index)
        if index not in self.alphas:
            self.alphas[index] = self.prior_alpha
        if index not in self.pis:
            self.pis[index] = self.prior_pi
        if index not in self.pis_before:
            self.pis_before[index] = self.prior_pi
        if index not in self.sampled_times:
            self.sampled_times[index] = 0
        return self.alphas[index], self.pis[index], self.pis_before[index]

    def predict_next_state(self, alpha, pi):
        p_expected = alpha / alpha.sum(axis=0, keepdims=True)
        pi_next_prior = np.dot(p_expected, pi)
        pi_next_prior /= pi_next_prior.sum()
        return pi_next_prior

    def update_transition_params(self, alpha, pi, pi_next, learning_rate=None):
        if learning_rate is None:
            learning_rate = self.learning_rate
        p_expected = alpha / alpha.sum(axis=0, keepdims=True)
        numerator = np.outer(pi_next, pi) * p_expected
        denominator = numerator.sum()
        update = (numerator / denominator) * learning_rate
        return alpha * self.decay + self.prior_alpha * (1 - self.decay) + update

    def sample_batch(self, candidate_indices):
        state_probs, entropies = [], []
        for index in candidate_indices:
            _, pi, _ = self.get_alpha_pi(str(index))
            state_probs.append(pi)
            entropies.append(-np.sum(pi * np.log(pi + 1e-10)))
        state_probs, entropies = np.array(state_probs), np.array(entropies)
        if self.sampling_strategy == "topk":
            sampled_index = np.argsort(-state_probs[:, 1])[: self.real_batch_size]
        else:  # topk+entropy
            combined_scores = state_probs[:, 1] + entropies * self.entropy_weight
            sampled_index = np.argsort(-combined_scores)[: self.real_batch_size]
        return np.asarray(candidate_indices)[sampled_index]

    def train(self, indices, y):
        for idx, s in zip(indices, y, strict=True):
            idx_str = str(idx)
            alpha, pi, pi_before = self.get_alpha_pi(idx_str)
            state = 1 if s == 0.0 else 3 if s == 1.0 else 2
            pi_new = np.zeros_like(pi)
            pi_new[state - 1] = 1.0
            alpha_new = self.update_transition_params(alpha, pi_before, pi_new)
            pi_next_prior = self.predict_next_state(alpha_new, pi_new)
            pi_next_prior /= pi_next_prior.sum()
            self.alphas[idx_str] = alpha_new
            self.pis_before[idx_str] = pi_new
            self.pis[idx_str] = pi_next_prior
            self.sampled_times[idx_str] += 1
        str_indices = [str(i) for i in indices]
        for idx in self.alphas:
            if idx not in str_indices:
                alpha, pi, pi_before = self.get_alpha_pi(idx)
                pi_new = pi
                alpha_new = self.update_transition_params(
                    alpha, pi_before, pi_new, learning_rate=0.0
                )
                pi_next_prior = self.predict_next_state(alpha_new, pi_new)
                pi_next_prior /= pi_next_prior.sum()
                self.alphas[idx] = alpha_new
                self.pis_before[idx] = pi_new
                self.pis[idx] = pi_next_prior


# -- differential test --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("knobs", "seed"),
    [
        ({}, 0),
        ({"preset": "paper-countdown"}, 1),
        ({"decay": 1.0, "prior_alpha": "stability"}, 2),
        ({"strategy": "topk+entropy", "entropy_weight": 0.3, "prior_alpha": "progress"}, 3),
        ({"prior_pi": "2", "decay": 0.9}, 4),
    ],
)
def test_selection_and_filtering_match_the_official_sampler(knobs: dict, seed: int) -> None:
    """25 steps, 16 prompts a step from a pool of 400: the selected prompts (in order) and the
    whole filtered state agree with the transcription step by step."""
    num, n, steps = 400, 4, 25
    config = {"kind": "dps", "n": n, **knobs}
    alloc = create_allocator(config, num_prompts=num, rollouts_per_step=16 * n, seed=seed)
    cfg = alloc.config
    official = OfficialHMM(
        16,
        dps_prior_alpha(cfg.prior_alpha),
        {"uniform": np.ones(3) / 3, "2": np.array([0.0, 1.0, 0.0])}[cfg.prior_pi],
        cfg.strategy,
        cfg.decay,
        cfg.entropy_weight,
    )
    source = PromptSource(num_prompts=num, seed=seed)  # the allocator's candidate stream
    backend = FakeBackend(make_pool(num, seed=seed), seed=seed)
    for step in range(steps):
        candidates = take_full_batch(source, alloc.num_candidates)
        expected = official.sample_batch(candidates)
        alloc.start_step(step)
        ask = alloc.ask()
        assert ask.prompt_ids == expected.tolist(), f"step {step}"
        outcomes = backend.generate(ask)
        alloc.tell(outcomes)
        assert alloc.ask() is None
        backend.update(alloc.train_groups())
        official.train(expected.tolist(), [float(np.mean(o.rewards >= 1.0)) for o in outcomes])
    known = sorted(int(k) for k in official.alphas)
    assert np.flatnonzero(alloc.known).tolist() == known
    for p in known:
        np.testing.assert_allclose(alloc.alpha[p], official.alphas[str(p)], rtol=1e-12)
        np.testing.assert_allclose(alloc.pi[p], official.pis[str(p)], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(alloc.pi_prev[p], official.pis_before[str(p)], rtol=1e-12)


# -- hand-computed behaviour --------------------------------------------------------------------


def test_one_observation_by_hand() -> None:
    """Prior 1 everywhere, no decay: observing state 2 from the uniform prediction."""
    alpha = np.ones((1, 3, 3))
    pi = np.full((1, 3), 1 / 3)
    new_alpha, new_pi, prev = dps_filter(
        alpha, pi, pi.copy(), np.array([1]), prior=np.ones((3, 3)), decay=1.0
    )
    # joint mass 1/3 on each of row 2's cells, normalised: + 1/3 to each of alpha[1, :]
    np.testing.assert_allclose(new_alpha[0], [[1, 1, 1], [4 / 3] * 3, [1, 1, 1]])
    # column 2 of P is (1, 4/3, 1) / (10/3): the prediction from state 2
    np.testing.assert_allclose(new_pi[0], [0.3, 0.4, 0.3])
    np.testing.assert_array_equal(prev[0], [0.0, 1.0, 0.0])


def test_partly_solved_prompts_come_first() -> None:
    """After one visit, a prompt solved half the time is ranked above solved and unsolved ones."""
    backend_p = np.array([0.0, 1.0, 0.5, 0.5, 0.0, 1.0, 0.0, 1.0])
    alloc = create_allocator(
        {"kind": "dps", "n": 64, "candidate_factor": 1.0, "decay": 1.0},
        num_prompts=8,
        rollouts_per_step=8 * 64,
        seed=0,
    )
    backend = FakeBackend(backend_p, seed=0)
    alloc.start_step(0)
    alloc.tell(backend.generate(alloc.ask()))
    alloc.train_groups()
    assert alloc.pi[2, 1] > alloc.pi[0, 1] and alloc.pi[3, 1] > alloc.pi[1, 1]
    assert alloc.pi[0, 0] > alloc.pi[0, 2] and alloc.pi[1, 2] > alloc.pi[1, 0]


def test_config_errors_name_the_knob() -> None:
    with pytest.raises(ValueError, match="prior_alpha"):
        DpsConfig(prior_alpha="sticky")
    with pytest.raises(ValueError, match="decay"):
        DpsConfig(decay=1.5)
    with pytest.raises(ValueError, match="candidate_factor"):
        DpsConfig(candidate_factor=0.5)
