"""PODS (Xu et al. 2025, "Not All Rollouts are Useful"): generate ``n`` rollouts, train ``m``.

Each step gives every prompt of the batch ``n`` rollouts in one ask, then keeps ``m`` of them
per prompt and trains on those only (GRPO's advantage normalised over the kept ``m``). The
official rule (``trainer/maxvargrpo_trainer.py`` of YixuanEvenXu/pods, and the same loop in its
open-r1 ``grpo_trainer.py``): sort the rewards descending; among the ``m + 1`` subsets
``{top i} U {bottom m - i}`` (i = 0 .. m) keep the one with the largest unbiased variance. The
search starts from the top ``m`` and then tries i = 0, 1, ..., m - 1, replacing the best only on
a strictly larger variance, so ties go to the first found in that order (:func:`subset_search_order`).
The kept rollouts are listed as the official code lists them: the top ``i`` in descending reward
order, then the bottom ``m - i``.

``rule`` also offers the paper's two ablations (``maxrewardgrpo_trainer.py``: the top ``m``;
``randomgrpo_trainer.py``: ``m`` drawn uniformly without replacement, here from ``self.rng``),
and ``max_variance_open_r1``, the search as the 8-GPU open-r1 trainer executed it: there
``indices = sorted_indices[:, :m]`` is a view, so each improvement is written into
``sorted_indices`` and changes every later candidate (:func:`open_r1_max_variance_subsets`).

``budget`` maps the spec's ``rollouts_per_step`` onto a batch: ``trained`` (default) makes it
the trained rollouts, ``B = rollouts_per_step // m`` prompts, so one step generates
``B * n = (n / m) * rollouts_per_step`` (like DAPO's and Pilot-Commit's overspend, the ledger
counts all of it, and ``cum_rollouts`` vs ``cum_rollouts_trained`` shows both); ``generated``
makes it the generated rollouts, ``B = rollouts_per_step // n``.

Choices where the official code leaves room, documented in docs/allocators.md: equal rewards
are ordered by a stable sort (earlier rollouts first; torch's sort there is unstable, which only
changes *which* of equal-reward rollouts is kept, never the kept rewards), and variances are
compared exactly for rewards that are multiples of 2^-16 (binary, +-1, the paper's shaped
rewards in steps of 1/8), so ties follow the tie rule, not float rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._common import KeptGroups, check_choice
from rollcli.allocators.api import Ask, AskItem, BaseAllocator, Group, Outcome
from rollcli.allocators.registry import register_allocator
from rollcli.allocators.state import group_from_json, group_to_json

__all__ = [
    "PodsConfig",
    "PodsAllocator",
    "max_variance_subsets",
    "open_r1_max_variance_subsets",
    "subset_search_order",
]

RULES = ["max_variance", "max_reward", "random", "max_variance_open_r1"]
# variances are compared exactly for rewards on this grid (multiples of 2^-16), in int64
_SCALE = 2.0**16


@dataclass(frozen=True)
class PodsConfig:
    """PODS; defaults are the official trainer's (``num_generations_reward=32``,
    ``num_generations_grad=8``: the MATH setting). Batch: see ``budget`` (module docstring)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["pods"] = "pods"
    n: int = 32
    m: int = 8
    rule: Literal["max_variance", "max_reward", "random", "max_variance_open_r1"] = "max_variance"
    budget: Literal["trained", "generated"] = "trained"

    def __post_init__(self) -> None:
        if self.m < 2:
            raise ValueError(
                f"m must be >= 2 (GRPO normalises over the kept rollouts), got {self.m}"
            )
        if self.n < self.m:
            raise ValueError(f"n must be >= m (n generated, m kept), got n={self.n}, m={self.m}")
        check_choice("rule", self.rule, RULES)
        check_choice("budget", self.budget, ["trained", "generated"])


def subset_search_order(m: int) -> np.ndarray:
    """The official search order of ``i`` (top i + bottom m - i): ``m`` first, then 0 .. m-1."""
    return np.array([m, *range(m)], dtype=np.int64)


def max_variance_subsets(rewards: np.ndarray, m: int) -> np.ndarray:
    """For each row of ``rewards`` (prompts x n), the indices of the ``m`` rollouts PODS keeps.

    Rows are sorted descending (stable); candidate ``i`` is the top ``i`` plus the bottom
    ``m - i``; the candidate with the largest variance wins, the first in
    :func:`subset_search_order` on ties. Returns an int array (prompts x m), top ``i`` first in
    descending order, then the bottom ``m - i``. A 1-D ``rewards`` gives a 1-D result.
    """
    r = np.asarray(rewards, dtype=float)
    one = r.ndim == 1
    if one:
        r = r[None, :]
    num, n = r.shape
    if not 1 <= m <= n:
        raise ValueError(f"max_variance_subsets: need 1 <= m <= n, got m={m}, n={n}")
    order = np.argsort(-r, axis=1, kind="stable")
    s = np.take_along_axis(r, order, axis=1)
    tops = subset_search_order(m)
    scores = _exact_scores(s, m, tops)
    if scores is None:
        scores = _float_scores(s, m, tops)
    best = tops[np.argmax(scores, axis=1)]  # argmax: the first maximum, the official strict '>'
    j = np.arange(m)
    positions = np.where(j < best[:, None], j, n - m + j)  # [0, i) then [n - m + i, n)
    kept = np.take_along_axis(order, positions, axis=1)
    return kept[0] if one else kept


def open_r1_max_variance_subsets(rewards: np.ndarray, m: int) -> np.ndarray:
    """The subset the 8-GPU open-r1 ``grpo_trainer.py`` (YixuanEvenXu/pods 187f43b) keeps for
    each row of ``rewards`` (prompts x n): the paper's search with its aliasing.

    There ``indices = sorted_indices[:, :m]`` is a view of the sorted order, and
    ``indices[max_mask] = _indices[max_mask]`` writes each improvement into the first ``m``
    columns of that order, so every later candidate ``cat(sorted[:, :i], sorted[:, i - m:])``
    is built from the overwritten order. numpy slices are views too: the loop below is the
    official one, with the exact variance comparison of :func:`max_variance_subsets` and a
    stable sort. Its result can be far from the paper's (issue 29: up to 73 % of groups differ).
    """
    r = np.asarray(rewards, dtype=float)
    one = r.ndim == 1
    if one:
        r = r[None, :]
    num, n = r.shape
    if not 1 <= m <= n:
        raise ValueError(f"open_r1_max_variance_subsets: need 1 <= m <= n, got m={m}, n={n}")
    sorted_indices = np.argsort(-r, axis=1, kind="stable")
    indices = sorted_indices[:, :m]  # a view, as in the official code
    variances = _subset_scores(r, indices)
    for i in range(m):
        candidate = np.concatenate([sorted_indices[:, :i], sorted_indices[:, i - m :]], axis=1)
        scores = _subset_scores(r, candidate)
        better = scores > variances
        if better.any():
            variances[better] = scores[better]
            indices[better] = candidate[better]  # writes into sorted_indices
    kept = indices.copy()
    return kept[0] if one else kept


def _subset_scores(r: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """A score ordered as the variance of each row's rewards at ``idx`` (equal sizes): exact
    ``m * sum(x^2) - sum(x)^2`` on the 2^-16 grid, else the float variance."""
    vals = np.take_along_axis(r, idx, axis=1)
    scaled = vals * _SCALE
    m = idx.shape[1]
    top = float(np.abs(scaled).max()) if scaled.size else 0.0
    if np.array_equal(scaled, np.rint(scaled)) and float(m) * m * top * top < 2.0**62:
        x = scaled.astype(np.int64)
        return m * (x * x).sum(axis=1) - x.sum(axis=1) ** 2
    return vals.var(axis=1)


def _exact_scores(s: np.ndarray, m: int, tops: np.ndarray) -> np.ndarray | None:
    """``m * sum(x^2) - sum(x)^2`` (m^2 times the population variance) per candidate, in exact
    int64 arithmetic on rewards scaled by 2^16; None when the rewards are not on that grid or
    the sums could overflow int64 (``n^2 * max|x|^2 >= 2^62``)."""
    scaled = s * _SCALE
    if not np.array_equal(scaled, np.rint(scaled)):
        return None
    n = s.shape[1]
    top = float(np.abs(scaled).max()) if scaled.size else 0.0
    if float(n) * n * top * top >= 2.0**62:
        return None
    x = scaled.astype(np.int64)
    zero = np.zeros((x.shape[0], 1), dtype=np.int64)
    p1 = np.concatenate([zero, np.cumsum(x, axis=1)], axis=1)
    p2 = np.concatenate([zero, np.cumsum(x * x, axis=1)], axis=1)
    bottom = n - m + tops  # candidate i: prefix [0, i) plus suffix [n - m + i, n)
    s1 = p1[:, tops] + p1[:, -1:] - p1[:, bottom]
    s2 = p2[:, tops] + p2[:, -1:] - p2[:, bottom]
    return m * s2 - s1 * s1


def _float_scores(s: np.ndarray, m: int, tops: np.ndarray) -> np.ndarray:
    """Two-pass population variance of every candidate's rewards (any float rewards)."""
    n = s.shape[1]
    j = np.arange(m)
    positions = np.where(j[None, :] < tops[:, None], j[None, :], n - m + j[None, :])
    candidates = s[:, positions]  # prompts x (m + 1) x m
    return candidates.var(axis=2)


@register_allocator
class PodsAllocator(KeptGroups, BaseAllocator):
    """One ask of ``n`` rollouts per prompt; each prompt trains its ``m`` kept rollouts."""

    config_class = PodsConfig
    presets = {
        # single-GPU Qwen2.5-3B-Instruct runs of the paper (results/Instruct-*-512-n-m-*.json)
        "paper-gsm8k": {"n": 64, "m": 16},
        "paper-math": {"n": 32, "m": 8},
        # the 8-GPU open-r1 runs (open-r1/exp.sh: --pods_full_size=128 --num_generations=32),
        # with the paper's rule: NOT what those runs executed (their search aliased its order;
        # issue 29, mend c) -- that is the next preset
        "paper-gsm8k-8gpu": {"n": 128, "m": 32},
        "paper-gsm8k-8gpu-as-run": {"n": 128, "m": 32, "rule": "max_variance_open_r1"},
    }

    def __init__(self, config: PodsConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        per_prompt = config.m if config.budget == "trained" else config.n
        knob = "m" if config.budget == "trained" else "n"
        self.batch_prompts = self.prompts_per_step(
            per_prompt, f"{knob}={per_prompt} (budget={config.budget})"
        )
        self._asked = False
        self._groups: list[Group] = []
        self._mean_top = 0.0
        self._totals = {"prompts": 0, "generated": 0, "trained": 0}

    @property
    def max_step_rollouts(self) -> int:
        """``B * n``: every prompt's ``n`` rollouts (above the budget with ``budget=trained``)."""
        return self.batch_prompts * self.config.n

    def _start_step(self) -> None:
        self._asked = False
        self._groups = []
        self._mean_top = 0.0

    def _ask(self) -> Ask | None:
        if self._asked:
            return None
        self._asked = True
        n = self.config.n
        return Ask(tuple([AskItem(p, n, "main") for p in self.source.take(self.batch_prompts)]))

    def _tell(self, outcomes: list[Outcome]) -> None:
        if not outcomes:
            return
        cfg = self.config
        rewards = np.stack([o.rewards for o in outcomes]).astype(float, copy=False)
        if cfg.rule == "max_variance":
            kept = max_variance_subsets(rewards, cfg.m)
        elif cfg.rule == "max_variance_open_r1":
            kept = open_r1_max_variance_subsets(rewards, cfg.m)
        elif cfg.rule == "max_reward":
            kept = np.argsort(-rewards, axis=1, kind="stable")[:, : cfg.m]
        else:
            kept = np.argsort(self.rng.random(rewards.shape), axis=1)[:, : cfg.m]
        # how many of the kept rollouts are among the top m by reward (m: max_reward's choice)
        rank = np.argsort(np.argsort(-rewards, axis=1, kind="stable"), axis=1)
        self._mean_top = float((np.take_along_axis(rank, kept, axis=1) < cfg.m).sum(1).mean())
        kept_rewards = np.take_along_axis(rewards, kept, axis=1)
        self._groups = [
            Group(o.prompt_id, tuple(map(o.refs.__getitem__, idx)), r)
            for o, idx, r in zip(outcomes, kept.tolist(), kept_rewards, strict=True)
        ]
        self._totals["prompts"] += len(outcomes)
        self._totals["generated"] += rewards.size
        self._totals["trained"] += kept.size

    def stats(self) -> dict[str, float]:
        """``mean_top``: kept rollouts among the top ``m`` by reward, per prompt (``m``: the
        subset was the top ``m``; lower: bottom rollouts were kept for their spread)."""
        return {
            **super().stats(),
            "batch_prompts": self.batch_prompts,
            "mean_top": self._mean_top,
            **{f"total_{k}": v for k, v in self._totals.items()},
        }

    def _state(self) -> dict[str, Any]:
        return {
            "asked": self._asked,
            "groups": [group_to_json(g) for g in self._groups],
            "mean_top": self._mean_top,
            "totals": dict(self._totals),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self._asked = bool(state["asked"])
        self._groups = [group_from_json(g) for g in state["groups"]]
        self._mean_top = float(state["mean_top"])
        self._totals = {k: int(v) for k, v in state["totals"].items()}
