"""TRANSCRIPTION FOR TESTING ONLY: the official PODS subset choice, line by line.

Source: YixuanEvenXu/pods, ``trainer/maxvargrpo_trainer.py`` (``_prepare_inputs``, "Select the
variance-maximizing set of indices"), commit 187f43b648f69385103029c2dd0934521e17bb71. The
multi-GPU ``open-r1/src/open_r1/grpo_trainer.py`` of the same commit runs the same loop batched
over prompts. Kept as close to the original as torch allows, so that
tests/allocators/test_pods.py can check rollcli's vectorised rule against it. Not used by rollcli.

One deliberate change: ``sort(..., stable=True)``. The original's sort is unstable, so *which* of
several equal-reward rollouts it keeps is unspecified; the stable sort makes the kept indices
comparable one for one (the kept rewards, and the variance, do not depend on it).
"""

from __future__ import annotations

import torch


def official_max_variance_indices(rewards: torch.Tensor, num_generations_grad: int) -> list[int]:
    """The indices the official code keeps for one prompt's ``rewards`` (its ``indices``)."""
    # Select the variance-maximizing set of indices
    _, sorted_indices = rewards.sort(descending=True, stable=True)
    sorted_indices = list(sorted_indices.cpu().numpy())
    indices = sorted_indices[:num_generations_grad]
    variance = rewards[indices].var().item()
    for i in range(num_generations_grad):
        _indices = sorted_indices[:i] + sorted_indices[i - num_generations_grad :]
        _variance = rewards[_indices].var().item()
        if _variance > variance:
            variance = _variance
            indices = _indices
    return [int(j) for j in indices]


def official_advantages(rewards: torch.Tensor, num_generations_grad: int) -> torch.Tensor:
    """The official advantages of the kept rewards: (r - mean) / (std + 1e-4) over the m."""
    mean_grouped_rewards = rewards.view(-1, num_generations_grad).mean(dim=1)
    std_grouped_rewards = rewards.view(-1, num_generations_grad).std(dim=1)
    mean_grouped_rewards = mean_grouped_rewards.repeat_interleave(num_generations_grad, dim=0)
    std_grouped_rewards = std_grouped_rewards.repeat_interleave(num_generations_grad, dim=0)
    return (rewards - mean_grouped_rewards) / (std_grouped_rewards + 1e-4)


def official_open_r1_indices(rewards: torch.Tensor, num_generations: int) -> torch.Tensor:
    """The 8-GPU trainer's loop (``open-r1/src/open_r1/grpo_trainer.py``, ``mode == "train"``),
    batched over prompts as there: ``rewards`` is (prompts, pods_full_size). ``indices`` is a
    view of ``sorted_indices``, so each improvement is written into the sorted order (the
    aliasing of issue 29, mend c). Stable sort, as above."""
    sorted_indices = rewards.argsort(dim=1, descending=True, stable=True)
    indices = sorted_indices[:, :num_generations]
    variances = rewards.gather(1, indices).var(dim=1)
    for i in range(num_generations):
        _indices = torch.cat(
            [sorted_indices[:, :i], sorted_indices[:, i - num_generations :]], dim=1
        )
        _variances = rewards.gather(1, _indices).var(dim=1)
        max_mask = _variances > variances
        if max_mask.any():
            variances[max_mask] = _variances[max_mask]
            indices[max_mask] = _indices[max_mask]
    return indices
