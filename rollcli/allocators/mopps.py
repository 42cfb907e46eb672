"""MoPPS: a Beta posterior of each prompt's success rate, Thompson-sampled to pick the batch.

MoPPS (thu-rllab/MoPPS; ``recipe/ours/mopps.py`` and ``recipe/ours/our_ray_trainer.py``) keeps a
``Beta(a, b)`` posterior per prompt, starting from the prior ``Beta(prior_alpha, prior_beta)``
(1, 1). Each step it takes a candidate pool of ``candidate_factor * B`` prompts (``B =
rollouts_per_step // n``), draws ``p ~ Beta(a, b)`` for every candidate and keeps the ``B`` whose
draws are closest to ``target_mean`` (``topk``: smallest ``(p - 0.5)^2``). Each kept prompt gets
``n`` rollouts and trains as one GRPO group, whatever its rewards. With success share ``s`` of
its ``n`` rollouts (a reward >= 1 counts as a success, as the official binary accuracy does)
its posterior becomes::

    a <- decay * a + (1 - decay) * prior_alpha + s * n
    b <- decay * b + (1 - decay) * prior_beta + (1 - s) * n

``decay`` is the paper's lambda: 1 (no decay) for math, 0.5 for countdown and geometry. The
``threshold`` and ``uniform`` strategies of the official sampler are here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._beta import BetaSelector
from rollcli.allocators._common import check_at_least, check_choice, check_fraction, take_full_batch
from rollcli.allocators.api import Group, Outcome
from rollcli.allocators.registry import register_allocator

__all__ = ["MoppsConfig", "MoppsAllocator", "select_candidates"]


@dataclass(frozen=True)
class MoppsConfig:
    """MoPPS; defaults are the published math setting (candidates 16 x B, no decay, top-k).

    Train batch ``B = rollouts_per_step // n`` prompts, drawn from ``int(candidate_factor * B)``
    candidates (at most the active pool).
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["mopps"] = "mopps"
    n: int = 8
    candidate_factor: float = 16.0
    decay: float = 1.0
    prior_alpha: float = 1.0
    prior_beta: float = 1.0
    strategy: Literal["topk", "threshold", "uniform"] = "topk"
    target_mean: float = 0.5
    lower: float = 0.3
    upper: float = 0.7
    candidates: Literal["random", "epoch"] = "random"

    def __post_init__(self) -> None:
        check_at_least(self, 1, "n")
        if not self.candidate_factor >= 1.0:
            raise ValueError(
                f"candidate_factor must be >= 1 (the batch is drawn from the candidates), got {self.candidate_factor}"
            )
        check_fraction(self, "decay")
        if not (self.prior_alpha > 0.0 and self.prior_beta > 0.0):
            raise ValueError(
                f"prior_alpha and prior_beta must be > 0, got {self.prior_alpha}, {self.prior_beta}"
            )
        check_fraction(self, "target_mean")
        if not 0.0 <= self.lower <= self.upper <= 1.0:
            raise ValueError(
                f"need 0 <= lower <= upper <= 1, got lower={self.lower}, upper={self.upper}"
            )
        check_choice("strategy", self.strategy, ["topk", "threshold", "uniform"])
        check_choice("candidates", self.candidates, ["random", "epoch"])


def select_candidates(
    sampled: np.ndarray, k: int, config: MoppsConfig, rng: np.random.Generator
) -> np.ndarray:
    """Positions of the ``k`` candidates the official ``sample_batch`` keeps, from their draws.

    ``topk``: the ``k`` smallest ``(p - target_mean)^2`` (a stable sort: equal draws keep their
    candidate order). ``threshold``: ``k`` at random among draws in ``[lower, upper]`` when there
    are that many, else the ``k`` closest to the band (in-band draws score 0). ``uniform``: ``k``
    at random, the draws unused.
    """
    m = len(sampled)
    if config.strategy == "uniform":
        return rng.choice(m, size=k, replace=False)
    if config.strategy == "topk":
        return np.argsort((sampled - config.target_mean) ** 2, kind="stable")[:k]
    inside = np.flatnonzero((sampled >= config.lower) & (sampled <= config.upper))
    if len(inside) >= k:
        return rng.permutation(inside)[:k]
    scores = np.zeros(m)
    low, high = sampled < config.lower, sampled > config.upper
    scores[low] = config.lower - sampled[low]
    scores[high] = sampled[high] - config.upper
    return np.argsort(scores, kind="stable")[:k]


@register_allocator
class MoppsAllocator(BetaSelector):
    """Thompson sampling over a candidate pool with per-prompt Beta posteriors."""

    config_class = MoppsConfig
    presets = {
        # DeepSeek-R1-Distill-Qwen-1.5B / 7B on MATH: ts_ratio 16, no decay, top-k, n 8
        # (recipe/ours/scripts/math/math_verl_{1.5b,7b}_topk_noinit.sh)
        "paper-math": {"n": 8, "candidate_factor": 16.0, "decay": 1.0, "strategy": "topk"},
        # Qwen2.5-3B / 7B on Countdown and Geometry3k: ts_ratio 8, decay 0.5
        # (recipe/ours/scripts/{countdown,geo3k}/*_topk_noinit.sh)
        "paper-countdown": {"n": 8, "candidate_factor": 8.0, "decay": 0.5, "strategy": "topk"},
        "paper-geometry": {"n": 8, "candidate_factor": 8.0, "decay": 0.5, "strategy": "topk"},
    }

    def __init__(self, config: MoppsConfig, **kwargs: Any) -> None:
        super().__init__(config, alpha0=config.prior_alpha, beta0=config.prior_beta, **kwargs)
        self.num_candidates = int(config.candidate_factor * self.batch_prompts)
        self._last = {"candidates": 0, "sampled_p": 0.0, "posterior_mean": 0.0}

    def _choose(self) -> list[int]:
        cfg = self.config
        if cfg.candidates == "epoch":
            pool = np.asarray(take_full_batch(self.source, self.num_candidates), dtype=np.int64)
        else:
            pool = np.asarray(self.source.sample(self.num_candidates, self.rng), dtype=np.int64)
        if pool.size == 0:
            return []
        sampled = self.rng.beta(self.alpha[pool], self.beta[pool])
        picked = select_candidates(sampled, min(self.batch_prompts, pool.size), cfg, self.rng)
        chosen = pool[picked]
        self._last = {
            "candidates": int(pool.size),
            "sampled_p": float(sampled[picked].mean()),
            "posterior_mean": float(self.posterior_mean(chosen).mean()),
        }
        return chosen.tolist()

    def _tell(self, outcomes: list[Outcome]) -> None:
        ids, rewards = self._told(outcomes)
        cfg, lam = self.config, self.config.decay
        successes = np.count_nonzero(rewards >= 1.0, axis=1).astype(float)
        self.alpha[ids] = lam * self.alpha[ids] + (1 - lam) * cfg.prior_alpha + successes
        self.beta[ids] = lam * self.beta[ids] + (1 - lam) * cfg.prior_beta + (cfg.n - successes)
        self._groups += [Group(o.prompt_id, o.refs, o.rewards) for o in outcomes]
