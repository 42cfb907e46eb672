"""The verl backend's advantage step: verl's estimator per group, then the groups' own baselines.

The trainer gives every training group its own ``uid`` and lets verl's ``compute_advantage``
(GRPO by default: ``(r - mean) / (std + eps)`` over each uid) fill ``advantages`` and
``returns``. A group that carries a baseline (``Group.baseline``: Reinforce-Ada's
global-statistics advantage) gets ``r - baseline`` on every response token instead, with no
std division, exactly as the sim and tiny backends apply it. The per-row baseline travels in
the batch as the non-tensor column ``rollcli_baseline`` (NaN: the group has none), so padding
and verl's batch balancing keep it aligned with its row. Imports verl; runs in the trainer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo.ray_trainer import compute_advantage

from rollcli.backends.shaping import (
    format_bonus,
    overlong_penalty,
    partial_credit_bonus,
    shaping_enabled,
)
from rollcli.backends.zvp import rl_zvp_advantages, zero_variance_rows

__all__ = [
    "BASELINE_KEY",
    "apply_baselines",
    "apply_rl_zvp",
    "baseline_column",
    "compute_group_advantages",
    "shaped_token_rewards",
]

BASELINE_KEY = "rollcli_baseline"


def baseline_column(baselines: Sequence[float | None], sizes: Sequence[int]) -> np.ndarray:
    """One float per row (NaN where the row's group has no baseline), groups in order."""
    per_group = np.array([np.nan if b is None else float(b) for b in baselines], dtype=float)
    return np.repeat(per_group, np.asarray(sizes, dtype=np.int64))


def apply_baselines(batch: Any) -> int:
    """Overwrite ``advantages`` and ``returns`` of rows with a baseline by ``(score - b) * mask``.

    ``score`` is the row's summed ``token_level_rewards``. Returns the number of rows changed.
    """
    column = batch.non_tensor_batch.get(BASELINE_KEY)
    if column is None:
        return 0
    base = np.asarray(column, dtype=float)
    rows = np.flatnonzero(~np.isnan(base))
    if rows.size == 0:
        return 0
    index = torch.as_tensor(rows, dtype=torch.long)
    scores = batch.batch["token_level_rewards"][index].sum(dim=-1)
    mask = batch.batch["response_mask"][index]
    values = (scores - torch.as_tensor(base[rows], dtype=scores.dtype)).unsqueeze(-1) * mask
    for key in ("advantages", "returns"):
        batch.batch[key][index] = values.to(batch.batch[key].dtype)
    return int(rows.size)


def shaped_token_rewards(
    scores: torch.Tensor,
    response_mask: torch.Tensor,
    backend: Any,
    formatted: Sequence[float] | np.ndarray | None = None,
    tests_passed: Sequence[float] | np.ndarray | None = None,
) -> torch.Tensor:
    """``token_level_rewards`` from the success scores (``rm_scores``, the score on a response's
    last token) plus the backend's shaping, added on that same token: DAPO's overlong penalty
    (``L_max`` = ``max_response_len``), ``format_score`` for a wrong response whose
    ``formatted`` flag (the reward function's, one per row) is 1, and ``code_partial_credit`` x
    ``tests_passed`` (the reward function's fraction, one per row) for a failing solution.
    Without shaping: ``scores`` itself."""
    format_score = float(getattr(backend, "format_score", 0.0) or 0.0)
    partial_credit = float(getattr(backend, "code_partial_credit", 0.0) or 0.0)
    overlong = shaping_enabled(backend.overlong_buffer_len, backend.overlong_penalty_factor)
    if not overlong and format_score <= 0 and partial_credit <= 0:
        return scores
    lengths = response_mask.sum(-1).long()
    shaping = np.zeros(len(lengths))
    if overlong:
        shaping += overlong_penalty(
            lengths.numpy(),
            max_len=backend.max_response_len,
            buffer_len=backend.overlong_buffer_len,
            penalty_factor=backend.overlong_penalty_factor,
        )
    if format_score > 0:
        if formatted is None:
            raise ValueError("format_score > 0 but the batch carries no format flags")
        success = scores.sum(-1).float().numpy()
        shaping += format_bonus(success, np.asarray(formatted, dtype=float), format_score)
    if partial_credit > 0:
        if tests_passed is None:
            raise ValueError("code_partial_credit > 0 but the batch carries no tests-passed column")
        fraction = np.asarray(tests_passed, dtype=float)
        shaping += partial_credit_bonus(scores.sum(-1).float().numpy(), fraction, partial_credit)
    out = scores.clone()
    rows = torch.nonzero(lengths > 0).flatten()
    out[rows, lengths[rows] - 1] += torch.as_tensor(shaping, dtype=out.dtype)[rows]
    return out


def apply_rl_zvp(batch: Any, entropys: torch.Tensor, alpha: float) -> int:
    """RL-ZVP (rollcli.backends.zvp): overwrite ``advantages`` and ``returns`` of the rows of
    zero-variance groups (same ``uid``, at least two rows, equal summed ``token_level_rewards``,
    no baseline) by the entropy-guided token advantage; ``entropys`` are the old pass's
    ([rows, response tokens], aligned with the batch), the sign each row's success
    (``token_level_scores``). Pad rows have their own uid and no response tokens: never
    reshaped. Returns the number of rows changed."""
    base = batch.non_tensor_batch.get(BASELINE_KEY)
    eligible = None if base is None else np.isnan(np.asarray(base, dtype=float))
    train = batch.batch["token_level_rewards"].sum(-1).float().numpy()
    rows = np.flatnonzero(zero_variance_rows(batch.non_tensor_batch["uid"], train, eligible))
    if rows.size == 0:
        return 0
    index = torch.as_tensor(rows, dtype=torch.long)
    mask = batch.batch["response_mask"][index]
    correct = batch.batch["token_level_scores"][index].sum(-1) > 0.5
    values = rl_zvp_advantages(correct, entropys[index].float(), mask, alpha)
    for key in ("advantages", "returns"):
        batch.batch[key][index] = values.to(batch.batch[key].dtype)
    return int(rows.size)


def compute_group_advantages(batch: Any, algorithm: Any) -> Any:
    """verl's ``compute_advantage`` with the run's ``algorithm`` config, then :func:`apply_baselines`."""
    batch = compute_advantage(
        batch,
        adv_estimator=algorithm.adv_estimator,
        norm_adv_by_std_in_grpo=algorithm.get("norm_adv_by_std_in_grpo", True),
        config=algorithm,
    )
    apply_baselines(batch)
    return batch
