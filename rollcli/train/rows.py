"""The metrics row of a training step (docs/CONTRACTS.md §4), built in one place for every backend.

:func:`step_row` turns what one step produced — the rewards of every generated group, the
trained groups, the allocator's ledger and stats, the update's metrics — into the row that
``metrics.jsonl`` holds; :func:`initial_row` is the ``step: 0`` row and :func:`eval_columns` the
``eval/*`` keys of an evaluation. The generic loop (sim, tiny) and verl's trainer both build
their rows here, through :class:`rollcli.train.loop.TrainLoop`. Everything in a row except
``wall_s`` and ``time/*`` is a function of the seeds, so a resumed run reproduces it exactly.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rollcli.allocators.api import BudgetLedger, Group

__all__ = [
    "TOP_LEVEL_STATS",
    "breakdown_columns",
    "eval_columns",
    "initial_row",
    "mean_group_variance",
    "step_row",
]

# allocator.stats() keys that get top-level columns; every other key becomes alloc/<key>
TOP_LEVEL_STATS = ("evicted", "deferred", "epoch")


def mean_group_variance(reward_arrays: Sequence[np.ndarray]) -> float:
    """Mean over groups of the population variance of each group's rewards (0 for no groups)."""
    if not reward_arrays:
        return 0.0
    return _mean_group_variance(*_flatten(reward_arrays))


def _flatten(reward_arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """All rewards as one float64 array, and each array's size."""
    sizes = np.fromiter(map(len, reward_arrays), np.int64, len(reward_arrays))
    return np.concatenate(reward_arrays).astype(np.float64, copy=False), sizes


def _mean_group_variance(rewards: np.ndarray, sizes: np.ndarray) -> float:
    # one vectorised pass: a step can hold tens of thousands of groups
    gid = np.repeat(np.arange(sizes.size), sizes)
    safe = np.maximum(sizes, 1)
    mean = np.bincount(gid, rewards, sizes.size) / safe
    centred = rewards - mean[gid]
    var = np.bincount(gid, centred * centred, sizes.size) / safe
    return float(var.mean())


def initial_row(policy_version: int) -> dict[str, Any]:
    """The ``step: 0`` row, before anything is generated (evaluation columns are added to it)."""
    return {
        "step": 0,
        "cum_rollouts": 0,
        "cum_tokens": 0,
        "wall_s": 0.0,
        "policy_version": int(policy_version),
    }


def step_row(
    step: int,
    *,
    ledger: BudgetLedger,
    stats: Mapping[str, Any],
    generated: Sequence[np.ndarray],
    groups: Sequence[Group],
    update_metrics: Mapping[str, Any],
    policy_version: int,
) -> dict[str, Any]:
    """The row of step ``step``: ``generated`` holds the rewards of every generated group (one
    array per outcome), ``groups`` the trained groups; timings are added by the caller."""
    reward_mean = gen_reward_var = 0.0
    if generated:
        rewards, sizes = _flatten(generated)
        reward_mean = float(rewards.mean())
        gen_reward_var = _mean_group_variance(rewards, sizes)
    trained = [g.rewards for g in groups]
    # the same arrays in the same order (every generated group trained as told): the same value
    reward_var = (
        gen_reward_var
        if len(trained) == len(generated) and all(map(operator.is_, trained, generated))
        else mean_group_variance(trained)
    )
    row: dict[str, Any] = {
        "step": step,
        "cum_rollouts": int(ledger.num_rollouts),
        "cum_tokens": int(ledger.num_tokens),
        "step_rollouts": int(ledger.step_rollouts),
        "step_tokens": int(ledger.step_tokens),
        "reward_mean": reward_mean,
        "reward_var": reward_var,
        "gen_reward_var": gen_reward_var,
        "zero_var_frac": (
            ledger.step_zero_variance_groups / ledger.step_groups if ledger.step_groups else 0.0
        ),
        "prompts_trained": len(groups),
        "rollouts_trained": int(ledger.step_trained_rollouts),
        "cum_rollouts_trained": int(ledger.num_trained_rollouts),
        "evicted": int(stats.get("evicted", 0)),
        "deferred": int(stats.get("deferred", 0)),
        "epoch": int(stats.get("epoch", 0)),
        "policy_version": int(policy_version),
    }
    row.update(breakdown_columns(ledger))
    for key, value in stats.items():
        if key not in TOP_LEVEL_STATS:
            row[f"alloc/{key}"] = _scalar(value)
    for key, value in update_metrics.items():
        row[f"train/{key}"] = _scalar(value)
    return row


def breakdown_columns(ledger: BudgetLedger) -> dict[str, int]:
    """Where this step's rollouts and tokens went (:mod:`rollcli.allocators.breakdown`): the
    per-step flows ``rollouts_<part>`` / ``tokens_<part>``, the level ``*_held`` after the step,
    ``rollouts_skipped`` and ``groups_informative``."""
    step = ledger.where.step
    row = {}
    for part in ("informative", "zero_var", "decision"):
        row[f"rollouts_{part}"] = int(step[f"{part}_rollouts"])
        row[f"tokens_{part}"] = int(step[f"{part}_tokens"])
    row["rollouts_held"] = ledger.where.held_rollouts
    row["tokens_held"] = ledger.where.held_tokens
    row["rollouts_skipped"] = int(step["skipped_rollouts"])
    row["groups_informative"] = int(step["informative_groups"])
    return row


def eval_columns(result: Mapping[str, Any], backend_kind: str = "backend") -> dict[str, Any]:
    """``eval/<key>`` for every key of ``backend.evaluate()``, which must report ``accuracy``."""
    if "accuracy" not in result:
        raise ValueError(f"the {backend_kind} backend's evaluate() returned no 'accuracy'")
    return {f"eval/{key}": _scalar(value) for key, value in result.items()}


def _scalar(value: Any) -> Any:
    """numpy scalars -> Python numbers so rows serialise as plain JSON."""
    if isinstance(value, np.generic):
        return value.item()
    return value
