"""SPO's selector on hand-computed cases, and against a transcription of the official trainer.

TRANSCRIPTION FOR TESTING ONLY: ``_official_*`` is transcribed from verl-project/verl-recipe at
commit 48ea0a797fa29867ea0ad92aff7d284eec7d4be3, ``spo/spo_ray_trainer.py`` (``fit``: the
``prompt2weight`` draw over a dataloader batch, the advantage ``r - p_hats`` before the batch
standardisation, and the ``rho.type: constant`` tracker update). Its ``np.random.choice``
draws from a passed ``numpy.random.Generator``, so both sides share one random stream.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from rollcli.allocators import PromptSource, create_allocator, create_config
from rollcli.allocators._common import take_full_batch
from rollcli.allocators.spo import spo_weights
from rollcli.testing import FakeBackend, ScriptedBackend
from rollcli.testing.allocator_contract import make_pool


def _official_draw(batch_prompts, prompt2alpha, prompt2beta, train_batch_size, rng):
    EXPLORATION_EPSILON = 0.05
    full_prompts = list(prompt2alpha)
    prompt2phat = {
        k: float(prompt2alpha[k]) / float(prompt2alpha[k] + prompt2beta[k]) for k in full_prompts
    }
    prompt2weight = {
        k: ((prompt2phat[k] * (1.0 - prompt2phat[k])) ** 0.5) + EXPLORATION_EPSILON
        for k in full_prompts
    }
    items = []
    weights = []
    for i, p in enumerate(batch_prompts):
        w = float(prompt2weight.get(p, 0.0))
        items.append(i)
        weights.append(w)
    M = len(items)
    weights_np = np.asarray(weights, dtype=np.float64)
    wsum = float(weights_np.sum())
    probs = weights_np / wsum if wsum > 0.0 else np.full(M, 1.0 / M, dtype=np.float64)
    probs = probs / probs.sum()
    target_bs = int(train_batch_size)
    replace = target_bs > M
    selected_pos = rng.choice(M, size=target_bs, replace=replace, p=probs)
    return [batch_prompts[j] for j in selected_pos.tolist()]


def _official_update(micro_prompts, r, prompt2alpha, prompt2beta, rho=0.875):
    alpha = np.array([prompt2alpha[_] for _ in micro_prompts])
    beta = np.array([prompt2beta[_] for _ in micro_prompts])
    p_hats = alpha / (alpha + beta)
    advantages = r - p_hats  # then standardised over the batch (not part of the selector)
    alpha = rho * alpha + r
    beta = rho * beta + (1 - r)
    for i in range(len(alpha)):
        prompt2alpha[micro_prompts[i]] = alpha[i].item()
        prompt2beta[micro_prompts[i]] = beta[i].item()
    return advantages


def test_draws_baselines_and_tracker_match_the_official_trainer() -> None:
    num, batch, candidates = 500, 32, 200
    backend = FakeBackend(make_pool(num, seed=5), 5)
    a = create_allocator(
        {"kind": "spo", "candidate_prompts": candidates},
        num_prompts=num,
        rollouts_per_step=batch,
        seed=2,
    )
    prompt2alpha = dict.fromkeys(range(num), 0.5)
    prompt2beta = dict.fromkeys(range(num), 0.5)
    twin = PromptSource(num_prompts=num, seed=2)  # the allocator's epoch order (the dataloader)
    for step in range(30):
        rng = copy.deepcopy(a.rng)
        expected = _official_draw(
            take_full_batch(twin, candidates), prompt2alpha, prompt2beta, batch, rng
        )
        a.start_step(step)
        ask = a.ask()
        assert ask.prompt_ids == expected
        outcomes = backend.generate(ask)
        a.tell(outcomes)
        groups = a.train_groups()
        r = np.array([o.rewards[0] for o in outcomes])
        advantages = _official_update(ask.prompt_ids, r, prompt2alpha, prompt2beta)
        got = np.array([g.rewards[0] - g.baseline for g in groups])
        assert got.tolist() == pytest.approx(advantages.tolist(), abs=1e-12)
    ids = np.arange(num)
    assert a.alpha.tolist() == pytest.approx([prompt2alpha[p] for p in ids], abs=1e-12)
    assert a.beta.tolist() == pytest.approx([prompt2beta[p] for p in ids], abs=1e-12)
    assert a.source.epoch >= 10


def test_tracker_and_baseline_by_hand() -> None:
    backend = ScriptedBackend([[1.0], [0.0]])
    a = create_allocator({"kind": "spo"}, num_prompts=2, rollouts_per_step=2, seed=0)
    a.start_step(0)
    a.tell(backend.generate(a.ask()))
    groups = sorted(a.train_groups(), key=lambda g: g.prompt_id)
    # baseline: the tracker's p_hat before the update, 0.5 / (0.5 + 0.5)
    assert [(g.size, g.baseline) for g in groups] == [(1, 0.5), (1, 0.5)]
    # a <- .875 * .5 + r, b <- .875 * .5 + (1 - r)
    assert a.alpha.tolist() == [1.4375, 0.4375] and a.beta.tolist() == [0.4375, 1.4375]
    assert a.posterior_mean([0]).tolist() == [1.4375 / 1.875]
    a.start_step(1)
    a.tell(backend.generate(a.ask()))
    groups = sorted(a.train_groups(), key=lambda g: g.prompt_id)
    assert groups[0].baseline == pytest.approx(1.4375 / 1.875)


def test_groups_of_n_update_once_per_visit() -> None:
    backend = ScriptedBackend([[1, 1, 0, 1]])
    a = create_allocator(
        {"kind": "spo", "n": 4, "rho": 0.5, "advantage": "group"},
        num_prompts=1,
        rollouts_per_step=4,
        seed=0,
    )
    a.start_step(0)
    a.tell(backend.generate(a.ask()))
    (group,) = a.train_groups()
    assert group.baseline is None and group.size == 4  # GRPO over the group
    assert (a.alpha[0], a.beta[0]) == (0.5 * 0.5 + 3, 0.5 * 0.5 + 1)


def test_weights_by_hand_and_draw_frequencies() -> None:
    alpha, beta = np.array([0.5, 9.0, 1.0]), np.array([0.5, 1.0, 0.0])
    w = spo_weights(alpha, beta, 0.05)
    assert w.tolist() == pytest.approx([0.55, math.sqrt(0.09) + 0.05, 0.05])
    picks = np.zeros(3)
    for seed in range(3000):
        a = create_allocator({"kind": "spo"}, num_prompts=3, rollouts_per_step=1, seed=seed)
        a.alpha, a.beta = alpha.copy(), beta.copy()
        a.start_step(0)
        picks[a.ask().prompt_ids[0]] += 1
    expected = w / w.sum() * 3000  # .579, .368, .053
    assert np.all(np.abs(picks - expected) < 4 * np.sqrt(expected))


def test_whole_pool_draws_distinct_prompts() -> None:
    a = create_allocator({"kind": "spo"}, num_prompts=50, rollouts_per_step=40, seed=0)
    backend = FakeBackend(np.full(50, 0.5), 0)
    for step in range(5):
        a.start_step(step)
        ask = a.ask()
        assert len(set(ask.prompt_ids)) == 40
        a.tell(backend.generate(ask))
        a.train_groups()
    small = create_allocator({"kind": "spo"}, num_prompts=10, rollouts_per_step=40, seed=0)
    small.start_step(0)
    assert sorted(small.ask().prompt_ids) == list(range(10))  # at most the pool, each once


@pytest.mark.parametrize(
    ("knobs", "match"),
    [
        ({"n": 0}, "n must be >= 1"),
        ({"rho": 1.5}, "rho must be in"),
        ({"alpha0": 0.0}, "alpha0 and beta0 must be > 0"),
        ({"epsilon": 0.0}, "epsilon must be > 0"),
        ({"candidate_prompts": -1}, "candidate_prompts must be >= 0"),
        ({"advantage": "grpo"}, "advantage must be one of baseline, group"),
        ({"advantage": "group"}, "advantage=group needs n >= 2"),
    ],
)
def test_bad_knobs_name_themselves(knobs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        create_config({"kind": "spo", **knobs})


def test_paper_preset() -> None:
    config = create_config({"kind": "spo", "preset": "paper"})
    assert (config.n, config.rho, config.epsilon, config.alpha0) == (1, 0.875, 0.05, 0.5)
