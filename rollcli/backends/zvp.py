"""RL-ZVP: an advantage for zero-variance groups from the policy's token entropies (tiny, verl).

RL-ZVP (Le et al., "No Prompt Left Behind", arXiv 2509.21880, ICLR 2026) keeps GRPO's advantage
for every group whose rewards differ and gives a *zero-variance* group (every response right, or
every response wrong) a token-level advantage instead of GRPO's zero (the paper's eq. 5, as two
independent third-party transcriptions give it; the paper's own text could not be read here):

* every response right: ``A_t = alpha * H_t``;
* every response wrong: ``A_t = -alpha * (max_k H_k - H_t)``, the max over the response's tokens;

with ``H_t`` the entropy of the policy's next-token distribution (over the vocabulary, at the
sampling temperature) at response token ``t``, detached: a constant of the loss, computed with
the weights that generated the step (verl's "old" pass; the tiny backend's pre-update pass).
Direction from correctness, magnitude from entropy: a right answer is reinforced most where the
policy was unsure, a wrong one is pushed down most where it was confident.

The backends' knob pair (``zero_variance_advantage: rl_zvp``, ``rl_zvp_alpha``; off by default)
is checked by :func:`check_zvp`. A group counts as zero-variance when it has at least two
rollouts, no baseline (``Group.baseline``), and equal *training* rewards (success plus shaping,
:mod:`rollcli.backends.shaping`) — exactly the groups GRPO gives advantage 0. The sign is the
response's success (reward > 0.5). torch is imported by :func:`rl_zvp_advantages` only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["ZVP_MODES", "ZVP_KNOBS", "check_zvp", "zero_variance_rows", "rl_zvp_advantages"]

ZVP_MODES = ("zero", "rl_zvp")
# added after specs were written: LATE_KNOBS of the backends that have them (job ids unchanged)
ZVP_KNOBS = ("zero_variance_advantage", "rl_zvp_alpha")


def check_zvp(backend: str, mode: str, alpha: float) -> None:
    """Raise ``ValueError`` naming the knob when the RL-ZVP knobs are not usable."""
    if mode not in ZVP_MODES:
        raise ValueError(
            f"{backend} backend: zero_variance_advantage must be one of {', '.join(ZVP_MODES)} "
            f"(zero: GRPO's; rl_zvp: RL-ZVP's entropy-guided advantage), got {mode!r}"
        )
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise ValueError(f"{backend} backend: rl_zvp_alpha must be a number, got {alpha!r}")
    if not (math.isfinite(alpha) and alpha > 0):
        raise ValueError(
            f"{backend} backend: rl_zvp_alpha must be a finite number > 0, got {alpha}"
        )


def zero_variance_rows(
    group_ids: Any, train_rewards: Any, eligible: Any | None = None
) -> np.ndarray:
    """Rows (one per rollout) of the groups RL-ZVP reshapes: groups of at least two rows, all
    ``eligible`` (no baseline), whose training rewards are all equal. ``group_ids`` labels each
    row's group (any hashable values)."""
    ids = np.asarray(group_ids, dtype=object)
    rewards = np.asarray(train_rewards, dtype=np.float64)
    ok = np.ones(len(ids), dtype=bool) if eligible is None else np.asarray(eligible, dtype=bool)
    _keys, inverse, counts = np.unique(ids.astype(str), return_inverse=True, return_counts=True)
    low = np.full(len(counts), np.inf)
    high = np.full(len(counts), -np.inf)
    np.minimum.at(low, inverse, rewards)
    np.maximum.at(high, inverse, rewards)
    all_ok = np.ones(len(counts), dtype=bool)
    np.logical_and.at(all_ok, inverse, ok)
    flat = (counts >= 2) & (low == high) & all_ok
    return flat[inverse]


def rl_zvp_advantages(correct: Any, entropy: Any, mask: Any, alpha: float) -> Any:
    """Token advantages ``(rows, tokens)`` of zero-variance rows (torch tensors): ``alpha * H`` for
    a right response, ``-alpha * (max H - H)`` for a wrong one; 0 off the response ``mask``."""
    import torch

    m = mask.to(entropy.dtype)
    h = entropy.detach() * m
    # entropies are >= 0, so padding (0) never raises the max over a response's tokens
    h_max = h.max(dim=-1, keepdim=True).values
    right = torch.as_tensor(correct, dtype=torch.bool, device=h.device).unsqueeze(-1)
    return torch.where(right, alpha * h, -alpha * (h_max - h)) * m
