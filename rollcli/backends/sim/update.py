"""The sim backend's GRPO update math: advantages, per-group sums, the gradient noise scale.

One rollout ``j`` of prompt ``i`` with advantage ``A_j`` contributes to the shared abilities

    x_j = A_j * [(r_j - p_i) w_i + score_noise * xi_j]

and to the prompt's own logit offset ``A_j * [(r_j - p_i) + prompt_noise * zeta_j]``. Every
optimiser step works on whole groups (a group's advantages are normalised together), so the
backend reduces the rollouts of each trained group once per update to a few sums
(:class:`GroupSums`) and each mini-batch adds up the sums of its groups. ``p_i`` enters only
through ``sum_j A_j`` (zero for GRPO's mean-centred advantages), so a mini-batch evaluates it
at the current policy exactly, as a real PPO mini-batch evaluates its score.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["GroupSums", "group_advantages", "group_sums", "noise_scale", "with_baselines"]


def group_advantages(
    rewards: np.ndarray, gid: np.ndarray, sizes: np.ndarray, std_normalize: bool, eps: float
) -> np.ndarray:
    """GRPO advantages: reward minus its group mean, over the group's sample std (ddof=1, as verl).

    A group of one rollout has no baseline: its advantage is 0 (it is mean-centred to 0).
    """
    num_groups = sizes.size
    mean = np.bincount(gid, rewards, num_groups) / np.maximum(sizes, 1)
    centred = rewards - mean[gid]
    if not std_normalize:
        return centred
    sq = np.bincount(gid, centred * centred, num_groups)
    std = np.sqrt(sq / np.maximum(sizes - 1, 1))
    return centred / (std[gid] + eps)


def with_baselines(
    adv: np.ndarray, rewards: np.ndarray, gid: np.ndarray, groups: list
) -> np.ndarray:
    """Rows of groups that carry a baseline get ``reward - baseline``, no std division."""
    baselines = [g.baseline for g in groups]
    if baselines.count(None) == len(baselines):
        return adv
    base = np.array([np.nan if b is None else b for b in baselines])[gid]
    return np.where(np.isnan(base), adv, rewards - base)


@dataclass(frozen=True)
class GroupSums:
    """Per trained group: the sums one optimiser step needs (arrays aligned with the groups)."""

    size: np.ndarray  # rollouts in the group
    adv: np.ndarray  # sum_j A_j
    adv_reward: np.ndarray  # sum_j A_j r_j
    noise: np.ndarray  # (groups, skills): score_noise * sum_j A_j xi_j
    prompt_noise: np.ndarray  # prompt_noise * sum_j A_j zeta_j (zeros when off)
    sq_norm: np.ndarray  # sum_j |x_j|^2 at the generating policy (for the noise scale)
    abs_adv: np.ndarray  # sum_j |A_j|


def group_sums(
    *,
    adv: np.ndarray,
    rewards: np.ndarray,
    p: np.ndarray,
    loadings: np.ndarray | None,
    noise: np.ndarray,
    prompt_noise: np.ndarray | None,
    gid: np.ndarray,
    sizes: np.ndarray,
    score_noise: float,
    prompt_noise_scale: float,
) -> GroupSums:
    """Reduce the trained rollouts (aligned arrays, ``gid`` their group) to :class:`GroupSums`.

    ``p`` is each rollout's success probability under the generating policy, ``loadings`` its
    prompt's skill loadings (None: one skill, loading 1), ``noise`` the stored ``xi`` (rollouts x
    skills) and ``prompt_noise`` the stored ``zeta`` (None when the knob is off).
    """
    g = sizes.size
    resid = rewards - p
    if score_noise > 0:
        weighted_noise = noise * adv[:, None]
        if noise.shape[1] == 1:
            group_noise = np.bincount(gid, weighted_noise[:, 0], g)[:, None]
        else:
            group_noise = np.stack([np.bincount(gid, col, g) for col in weighted_noise.T], axis=1)
        group_noise *= score_noise
    else:
        group_noise = np.zeros((g, noise.shape[1]))
    if loadings is None:
        cross = noise[:, 0]
        w_sq = 1.0
        xi_sq = noise[:, 0] * noise[:, 0]
    else:
        cross = np.einsum("ij,ij->i", loadings, noise)
        w_sq = np.einsum("ij,ij->i", loadings, loadings)
        xi_sq = np.einsum("ij,ij->i", noise, noise)
    per_rollout_sq = (adv * adv) * (
        resid * resid * w_sq + 2.0 * score_noise * resid * cross + score_noise**2 * xi_sq
    )
    if prompt_noise is not None and prompt_noise_scale > 0:
        group_prompt_noise = prompt_noise_scale * np.bincount(gid, adv * prompt_noise, g)
    else:
        group_prompt_noise = np.zeros(g)
    return GroupSums(
        size=sizes,
        adv=np.bincount(gid, adv, g),
        adv_reward=np.bincount(gid, adv * rewards, g),
        noise=group_noise,
        prompt_noise=group_prompt_noise,
        sq_norm=np.bincount(gid, per_rollout_sq, g),
        abs_adv=np.bincount(gid, np.abs(adv), g),
    )


def noise_scale(
    sq_norm_sum: float, grad: np.ndarray, signal: np.ndarray, num_rollouts: int
) -> float | None:
    """The gradient noise scale ``B_noise = tr(Sigma) / |G|^2`` of one mini-batch, in rollouts.

    ``tr(Sigma)`` is the sample variance of the per-rollout gradients ``x_j`` (summed over
    skills), from ``sum_j |x_j|^2`` and their mean ``grad``; ``|G|^2`` is estimated by the
    mini-batch's noise-free mean signal ``signal`` (the score noise is zero-mean). None when the
    mini-batch has no signal or fewer than two rollouts. ``B_noise / num_rollouts`` is the
    mini-batch's inverse squared signal-to-noise ratio (McCandlish et al., 2018).
    """
    signal_sq = float(signal @ signal)
    if num_rollouts < 2 or signal_sq <= 0.0:
        return None
    trace = (sq_norm_sum - num_rollouts * float(grad @ grad)) / (num_rollouts - 1)
    return max(trace, 0.0) / signal_sq
