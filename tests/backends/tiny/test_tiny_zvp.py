"""RL-ZVP on the tiny backend: zero-variance groups train with the entropy-guided token
advantage (rollcli.backends.zvp), computed from the pre-update policy; off, they do not train."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rollcli.allocators.api import Ask, AskItem, Group
from rollcli.backends import create_backend
from rollcli.backends.tiny import backend as tiny_backend
from rollcli.backends.tiny.model import pad_batch, response_logprobs_entropy

from .conftest import micro_config


def test_zero_variance_groups_train_with_the_entropy_formula(
    tiny_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alpha = 0.2
    cfg = micro_config(tiny_cache, zero_variance_advantage="rl_zvp", rl_zvp_alpha=alpha,
                       num_minibatches=1)  # fmt: skip
    backend = create_backend(cfg, seed=0)
    right, wrong = backend.generate(Ask((AskItem(0, 3), AskItem(1, 3))))
    groups = [Group(0, right.refs, np.ones(3)), Group(1, wrong.refs, np.zeros(3))]
    # the formula, from the policy before the update
    prompts = [backend.pool.prompts[backend._store[r][0]] for g in groups for r in g.refs]
    responses = [backend._store[r][1] for g in groups for r in g.refs]
    inputs, targets, mask = pad_batch(prompts, responses)
    with torch.no_grad():
        _lp, entropy = response_logprobs_entropy(backend.model, inputs, targets, 1.0)
    expected = torch.zeros_like(mask)
    for b in range(6):
        h = entropy[b][mask[b] > 0]
        a = alpha * h if b < 3 else -alpha * (h.max() - h)
        expected[b][mask[b] > 0] = a
    seen = []
    real = tiny_backend.policy_loss

    def spy(logp, old_logp, advantages, m, **kw):
        seen.append(advantages.clone())
        return real(logp, old_logp, advantages, m, **kw)

    monkeypatch.setattr(tiny_backend, "policy_loss", spy)
    weights = {k: v.clone() for k, v in backend.model.state_dict().items()}
    metrics = backend.update(groups)
    assert metrics["skipped"] == 0.0 and metrics["zvp_rows"] == 6.0
    (adv,) = seen
    torch.testing.assert_close(adv * mask, expected, atol=1e-6, rtol=1e-5)
    assert not all(torch.equal(weights[k], v) for k, v in backend.model.state_dict().items())


def test_off_by_default_zero_variance_groups_teach_nothing(tiny_cache: Path) -> None:
    backend = create_backend(micro_config(tiny_cache), seed=0)
    (outcome,) = backend.generate(Ask((AskItem(0, 4),)))
    metrics = backend.update([Group(0, outcome.refs, np.ones(4))])
    assert metrics["skipped"] == 1.0 and "zvp_rows" not in metrics


def test_mixed_groups_keep_grpo_and_baselines_are_left_alone(tiny_cache: Path) -> None:
    cfg = micro_config(tiny_cache, zero_variance_advantage="rl_zvp")
    backend = create_backend(cfg, seed=0)
    a, b = backend.generate(Ask((AskItem(0, 2), AskItem(1, 2))))
    metrics = backend.update(
        [Group(0, a.refs, np.array([1.0, 0.0])), Group(1, b.refs, np.ones(2), baseline=0.5)]
    )
    assert metrics["zvp_rows"] == 0.0 and metrics["rows_forwarded"] == 4
