"""GRPO's math: group-normalised advantages and the clipped, token-mean policy loss.

Advantages are computed per group, whatever its size: ``A_i = (r_i - mean) / (std + eps)``
with the group's sample (unbiased) standard deviation, as ``torch.std`` in verl's GRPO, or
``r_i - mean`` when ``std_normalize`` is off (Dr.GRPO). A group of one rollout, or one whose
rewards are all equal, gets advantage 0 everywhere: it teaches nothing. A group that carries a
baseline (``Group.baseline``, Reinforce-Ada) gets ``r_i - baseline`` instead.

The loss is PPO's clipped surrogate, averaged over every response token of the batch
(token-mean), plus ``kl_coef`` times the k3 estimate of KL(policy || reference) on the same
tokens. The denominator is passed in so that rows left out of the forward pass (zero
advantage, no KL term) still count, which keeps the loss identical to the full batch's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["group_advantages", "policy_loss"]


def group_advantages(
    rewards: Sequence[np.ndarray],
    *,
    std_normalize: bool = True,
    eps: float = 1e-6,
    baselines: Sequence[float | None] | None = None,
) -> list[np.ndarray]:
    """One advantage array per group (same shapes as ``rewards``).

    A group with a baseline (``baselines[i]`` not None) gets ``r - baseline``: no group mean,
    no std division, and a group of one rollout or of equal rewards still learns.
    """
    out = []
    for i, group in enumerate(rewards):
        r = np.asarray(group, dtype=np.float64)
        if baselines is not None and baselines[i] is not None:
            out.append(r - float(baselines[i]))
            continue
        if r.size <= 1 or np.ptp(r) == 0:
            out.append(np.zeros_like(r))
            continue
        centred = r - r.mean()
        out.append(centred / (r.std(ddof=1) + eps) if std_normalize else centred)
    return out


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float,
    num_tokens: float,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped surrogate loss over ``mask``ed tokens divided by ``num_tokens``; returns metrics.

    ``logp``, ``old_logp``, ``mask`` and ``ref_logp`` are [B, T]; ``advantages`` is [B] (one
    value per rollout, broadcast over its tokens) or [B, T] (per token: RL-ZVP's rows).
    """
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * adv
    pg = -torch.minimum(unclipped, clipped)
    loss = (pg * mask).sum() / num_tokens
    metrics = {}
    with torch.no_grad():
        masked = mask.sum().clamp_min(1.0)
        metrics["clip_frac"] = float(((unclipped != clipped).float() * mask).sum() / masked)
        metrics["ratio_mean"] = float((ratio * mask).sum() / masked)
    if ref_logp is not None and kl_coef > 0:
        delta = ref_logp - logp
        kl = torch.exp(delta) - delta - 1.0  # k3: unbiased, non-negative
        kl_term = (kl * mask).sum() / num_tokens
        loss = loss + kl_coef * kl_term
        metrics["kl"] = float(kl_term.detach())
    metrics["pg_loss"] = float((pg * mask).sum().detach() / num_tokens)
    return loss, metrics
