"""SPO's prompt selector: a discounted Beta tracker per prompt, prompts drawn by sqrt(p(1-p)).

Single-stream Policy Optimization (verl-recipe ``spo/spo_ray_trainer.py``; the one prompt
selector verl's own recipes ship) tracks each prompt's success rate with ``Beta(a, b)``,
initialised to ``(alpha0, beta0) = (0.5, 0.5)``. Each step draws ``B = rollouts_per_step // n``
distinct prompts with probability proportional to ``sqrt(p (1 - p)) + epsilon`` where ``p = a / (a
+ b)``, ``epsilon = 0.05``; after a prompt's rollouts with rewards ``r``::

    a <- rho * a + sum(r)
    b <- rho * b + sum(1 - r)

The published run takes one rollout per prompt (``n = 1``) and trains on the advantage ``r -
p_hat`` with ``p_hat`` the tracker's value before the update: ``advantage: baseline`` gives every
group that baseline (``Group.baseline``, no std division). ``advantage: group`` trains GRPO groups
instead (``n >= 2``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._beta import BetaSelector
from rollcli.allocators._common import check_at_least, check_choice, check_fraction, take_full_batch
from rollcli.allocators.api import Group, Outcome
from rollcli.allocators.registry import register_allocator

__all__ = ["SpoConfig", "SpoAllocator", "spo_weights"]


@dataclass(frozen=True)
class SpoConfig:
    """SPO's selector; defaults are the published setting (n 1, rho 0.875, epsilon 0.05).

    Train batch ``B = rollouts_per_step // n`` prompts, drawn from the whole active pool
    (``candidate_prompts: 0``) or from the next ``candidate_prompts`` of the epoch order.
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["spo"] = "spo"
    n: int = 1
    rho: float = 0.875
    alpha0: float = 0.5
    beta0: float = 0.5
    epsilon: float = 0.05
    candidate_prompts: int = 0
    advantage: Literal["baseline", "group"] = "baseline"

    def __post_init__(self) -> None:
        check_at_least(self, 1, "n")
        check_fraction(self, "rho")
        if not (self.alpha0 > 0.0 and self.beta0 > 0.0):
            raise ValueError(f"alpha0 and beta0 must be > 0, got {self.alpha0}, {self.beta0}")
        if not self.epsilon > 0.0:
            raise ValueError(
                f"epsilon must be > 0 (every prompt keeps a chance to be drawn), got {self.epsilon}"
            )
        if self.candidate_prompts < 0:
            raise ValueError(
                f"candidate_prompts must be >= 0 (0: the whole pool), got {self.candidate_prompts}"
            )
        check_choice("advantage", self.advantage, ["baseline", "group"])
        if self.advantage == "group" and self.n < 2:
            raise ValueError(
                f"advantage=group needs n >= 2 (GRPO over one rollout is 0), got n={self.n}"
            )


def spo_weights(alpha: np.ndarray, beta: np.ndarray, epsilon: float) -> np.ndarray:
    """``sqrt(p (1 - p)) + epsilon`` with ``p = a / (a + b)``, elementwise."""
    p = alpha / (alpha + beta)
    return np.sqrt(p * (1.0 - p)) + epsilon


@register_allocator
class SpoAllocator(BetaSelector):
    """Weighted draws by the tracker's binomial std; one ask per step."""

    config_class = SpoConfig
    presets = {
        # Qwen3-8B on DAPO-Math-17k (en): 1024 prompts x 1 response, constant-rho update
        # (spo/train.sh METHOD=SPO; spo/config/spo_trainer.yaml rho.value / clip_lower 0.875)
        "paper": {"n": 1, "rho": 0.875, "epsilon": 0.05, "alpha0": 0.5, "beta0": 0.5},
    }

    def __init__(self, config: SpoConfig, **kwargs: Any) -> None:
        super().__init__(config, alpha0=config.alpha0, beta0=config.beta0, **kwargs)
        self._last = {"p_hat": 0.0, "weight": 0.0}

    def _choose(self) -> list[int]:
        cfg = self.config
        weights = spo_weights(self.alpha, self.beta, cfg.epsilon)
        if cfg.candidate_prompts:
            pool = np.asarray(take_full_batch(self.source, cfg.candidate_prompts), dtype=np.int64)
            w = weights[pool]
            k = min(self.batch_prompts, pool.size)
            chosen = self.rng.choice(pool, size=k, replace=False, p=w / w.sum()).tolist()
        else:
            chosen = self.source.sample(self.batch_prompts, self.rng, weights=weights)
        if chosen:
            self._last = {
                "p_hat": float(self.posterior_mean(chosen).mean()),
                "weight": float(weights[chosen].mean()),
            }
        return chosen

    def _tell(self, outcomes: list[Outcome]) -> None:
        ids, rewards = self._told(outcomes)
        rho, n = self.config.rho, self.config.n
        p_hat = self.posterior_mean(ids)  # before the update: the baseline
        wins = rewards.sum(axis=1)
        self.alpha[ids] = rho * self.alpha[ids] + wins  # ids are distinct within an ask
        self.beta[ids] = rho * self.beta[ids] + (n - wins)
        baselines = p_hat.tolist() if self.config.advantage == "baseline" else [None] * len(ids)
        self._groups += [
            Group(o.prompt_id, o.refs, o.rewards, b)
            for o, b in zip(outcomes, baselines, strict=True)
        ]
