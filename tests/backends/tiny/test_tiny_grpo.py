"""GRPO math on hand-computed cases: unequal groups, size-1 groups, clipping, token-mean."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rollcli.backends.tiny.grpo import group_advantages, policy_loss


def test_advantages_hand_cases() -> None:
    pair, triple, single, flat = group_advantages(
        [
            np.array([1.0, 0.0]),
            np.array([1.0, 0.0, 0.0]),
            np.array([1.0]),
            np.array([1.0, 1.0, 1.0]),
        ]
    )
    s = 1 / math.sqrt(2)  # sample std of [1, 0]
    np.testing.assert_allclose(pair, [0.5 / s, -0.5 / s], rtol=1e-5)
    std3 = math.sqrt(1 / 3)  # sample std of [1, 0, 0]
    np.testing.assert_allclose(
        triple, [(2 / 3) / std3, -(1 / 3) / std3, -(1 / 3) / std3], rtol=1e-5
    )
    assert single.tolist() == [0.0]
    assert flat.tolist() == [0.0, 0.0, 0.0]
    for adv in (pair, triple):
        assert abs(adv.sum()) < 1e-9


def test_advantages_without_std_normalisation() -> None:
    (adv,) = group_advantages([np.array([1.0, 0.0, 0.0, 0.0])], std_normalize=False)
    np.testing.assert_allclose(adv, [0.75, -0.25, -0.25, -0.25])


def test_policy_loss_on_policy_is_minus_token_mean_advantage() -> None:
    logp = torch.log(torch.tensor([[0.5, 0.5, 0.1], [0.2, 0.3, 0.9]]))
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    adv = torch.tensor([2.0, -1.0])
    loss, metrics = policy_loss(logp, logp.clone(), adv, mask, clip_eps=0.2, num_tokens=10.0)
    # ratio 1: loss = -(2 * 2 tokens - 1 * 3 tokens) / 10 tokens (two uncounted rows still divide)
    assert float(loss) == pytest.approx(-(4 - 3) / 10)
    assert metrics["clip_frac"] == 0.0


def test_policy_loss_clips_the_ratio() -> None:
    old = torch.zeros(1, 1)
    mask = torch.ones(1, 1)
    for adv, new, expected in [
        (1.0, math.log(2.0), -1.2),  # positive advantage: ratio 2 clipped to 1.2
        (-1.0, math.log(0.5), 0.8),  # negative advantage: ratio 0.5 clipped to 0.8
        (-1.0, math.log(2.0), 2.0),  # negative advantage, ratio above: unclipped (pessimistic)
    ]:
        logp = torch.full((1, 1), new, requires_grad=True)
        loss, _ = policy_loss(logp, old, torch.tensor([adv]), mask, clip_eps=0.2, num_tokens=1.0)
        assert float(loss.detach()) == pytest.approx(expected)
        loss.backward()
        clipped = expected in (-1.2, 0.8)
        assert (float(logp.grad) == 0.0) == clipped


def test_kl_term_is_zero_at_the_reference_and_positive_elsewhere() -> None:
    logp = torch.log(torch.tensor([[0.5, 0.2]]))
    mask = torch.ones(1, 2)
    adv = torch.zeros(1)
    loss, m = policy_loss(
        logp, logp, adv, mask, clip_eps=0.2, num_tokens=2.0, ref_logp=logp, kl_coef=1.0
    )
    assert float(loss) == pytest.approx(0.0) and m["kl"] == pytest.approx(0.0)
    ref = torch.log(torch.tensor([[0.3, 0.4]]))
    loss, m = policy_loss(
        logp, logp, adv, mask, clip_eps=0.2, num_tokens=2.0, ref_logp=ref, kl_coef=0.5
    )
    assert m["kl"] > 0 and float(loss) == pytest.approx(0.5 * m["kl"])
