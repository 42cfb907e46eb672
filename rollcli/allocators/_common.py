"""Helpers shared by rollcli's own allocators: merged groups, an order-free reward variance,
knob checks, whole loader batches. (State helpers are public, in :mod:`rollcli.allocators.state`.)
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np

from rollcli.allocators.api import Group, Outcome, PromptSource

__all__ = [
    "KeptGroups",
    "merge_outcomes",
    "reward_variance",
    "check_at_least",
    "check_choice",
    "check_group_sizes",
    "active_ids",
    "nested_config",
    "take_full_batch",
]


class KeptGroups:
    """Mixin for an allocator that keeps its step's training groups in ``self._groups`` (set in
    ``_tell``) and hands them over, emptied, when the step ends. Put it before ``BaseAllocator``
    in the bases."""

    _groups: list[Group]

    def _train_groups(self) -> list[Group]:
        groups, self._groups = self._groups, []
        return groups


def merge_outcomes(prompt_id: int, outcomes: Sequence[Outcome]) -> Group:
    """One training group holding every rollout of ``outcomes`` (all of one prompt), in order."""
    if len(outcomes) == 1:
        (o,) = outcomes
        return Group(prompt_id, tuple(o.refs), np.array(o.rewards, dtype=float))
    refs = tuple(chain.from_iterable([o.refs for o in outcomes]))
    rewards = np.concatenate([o.rewards for o in outcomes]) if outcomes else np.zeros(0)
    return Group(prompt_id, refs, rewards.astype(float, copy=False))


def greedy_counts(gains: np.ndarray, quota: int) -> np.ndarray:
    """Units per row of ``gains`` (``rows x depth``, each row's marginal gains non-increasing,
    ``-inf`` where a row may not go): ``quota`` single units, each to the largest next gain, ties
    to the earlier row. Because every row falls, that greedy is the ``quota`` largest entries
    (stable, row-major). Gains equal to 12 decimals are ties, so floating-point rounding in
    computing them cannot break a tie; ``-inf`` entries are never taken."""
    rows, depth = gains.shape
    if rows == 0 or depth == 0 or quota <= 0:
        return np.zeros(rows, dtype=np.int64)
    flat = np.round(gains, 12).ravel()
    take = min(int(quota), int(np.count_nonzero(flat > -np.inf)))
    order = np.argsort(-flat, kind="stable")[:take]
    return np.bincount(order // depth, minlength=rows).astype(np.int64)


def reward_variance(rewards: np.ndarray) -> float:
    """Population variance (ddof 0) that equal rewards in any order give identically.

    ``np.var`` sums in array order, so ``[0, 0, 0, 1, 0, 0]`` and ``[0, 0, 0, 0, 1, 0]`` differ
    in the last bit, and so do ``k`` and ``n - k`` successes: allocators that rank by variance
    would then break equal variances by reward order instead of their tie rule. Integer rewards
    (binary, +-1) are computed exactly as ``(n * sum(r^2) - sum(r)^2) / n^2``; other rewards
    are sorted first, so at least any order of the same rewards gives the same value.
    """
    r = np.asarray(rewards, dtype=float)
    n = r.size
    if n == 0:
        return 0.0
    q = float((r * r).sum())
    if q < 2.0**53 and np.array_equal(r, np.rint(r)):
        # integers with |r| <= r^2: every partial sum of r and r^2 is an exact float
        s = int(r.sum())
        return (n * int(q) - s * s) / (n * n)  # Python ints: one correctly rounded division
    return float(np.var(np.sort(r)))


def check_at_least(config: Any, minimum: int, *knobs: str) -> None:
    """Raise ``ValueError`` naming the first of ``knobs`` (attributes of ``config``) that is
    below ``minimum`` (or NaN), in the order given."""
    for knob in knobs:
        value = getattr(config, knob)
        if not value >= minimum:
            raise ValueError(f"{knob} must be >= {minimum}, got {value}")


def check_fraction(config: Any, *knobs: str) -> None:
    """Raise ``ValueError`` naming the first of ``knobs`` (attributes of ``config``) outside
    ``[0, 1]`` (or NaN), in the order given."""
    for knob in knobs:
        value = getattr(config, knob)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{knob} must be in [0, 1], got {value}")


def check_choice(knob: str, value: Any, valid: Sequence[Any]) -> None:
    """Raise ``ValueError`` naming the knob and the valid values when ``value`` is not one of them."""
    if value not in valid:
        raise ValueError(f"{knob} must be one of {', '.join(map(str, valid))}; got {value!r}")


def check_group_sizes(n_min: int, n_max: int) -> None:
    """The group-size bounds of the budget allocators: ``2 <= n_min <= n_max``, errors naming the knob."""
    if n_min < 2:
        raise ValueError(f"n_min must be >= 2 (a single rollout teaches nothing), got {n_min}")
    if n_max < n_min:
        raise ValueError(f"n_max must be >= n_min={n_min}, got {n_max}")


def active_ids(source: PromptSource) -> np.ndarray:
    """Every prompt of the pool not evicted, in id order."""
    ids = np.arange(source.num_prompts)
    if source.num_evicted:
        ids = ids[[not source.is_evicted(int(i)) for i in ids]]
    return ids


def nested_config(knob: str, value: Any, cls: type) -> Any:
    """Turn a mapping into the nested frozen config ``cls``; unknown keys fail with the valid ones."""
    if isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"{knob} must be a mapping, got {type(value).__name__}")
    names = [f.name for f in dataclasses.fields(cls)]
    for key in value:
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise ValueError(f"{knob} has no key '{key}'.{hint} Valid: {', '.join(names)}.")
    return cls(**value)


def take_full_batch(source: PromptSource, k: int) -> list[int]:
    """The next ``k`` prompts of the epoch order, as a ``DataLoader(drop_last=True)`` yields them.

    When fewer than ``k`` active prompts are left in the epoch, that tail is dropped and the next
    epoch starts; ``k`` at or above the active pool gives the whole pool (each epoch one batch).
    MoPPS and SPO read their candidate pools from such a loader.
    """
    k = min(k, source.num_active)
    if source.remaining_in_epoch() < k:
        source.new_epoch()
    return source.take(k, wrap=False)
