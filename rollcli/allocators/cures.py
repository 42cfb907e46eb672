"""CurES: Beta-binomial counts per prompt drive both which prompts a step draws and how many
rollouts each gets.

CurES (arXiv 2510.01037, ICLR 2026; code ZexuSun/CurES, ``epic/epic_sampler.py``,
``epic/stage_0_init_difficulty_sample_size.py``, ``epic/epic_ray_trainer.py``, commit eccf298)
keeps per prompt a count of accepted (reward > ``acceptance_threshold``) and all rollouts. Each
step:

1. **Sampling.** ``B = rollouts_per_step // n_mean`` distinct prompts are drawn from the active
   pool with probabilities ``softmax(sqrt(p (1 - p)) / t)``, ``p = (acc + 1) / (all + 2)`` the
   mean of the Beta(acc + 1, all - acc + 1) posterior and ``t = temperature * (acc + 1)``
   (official ``EpicSampler.__iter__``: ``t_vec = (alpha_vec + 1) / 1e-2``, so temperature 100).
2. **Rollout counts.** The step's ``B * n_mean`` rollouts are split in proportion to each
   drawn prompt's gradient-noise scale ``sigma`` (the paper's eq. 127 as
   ``init_sample_size`` computes it). With ``q`` the prompt's success share, the official
   ``sigma^2 = q (1-q)^2 E[g_c^2] + q^2 (1-q) E[g_w^2] - q^2 (1-q)^2 (E g_c - E g_w)^2``
   needs the norms ``g`` of per-response log-prob gradients, which an allocator never sees;
   with equal norms for correct and wrong responses it is ``g^2 q (1 - q)``, so ``sigma`` is
   ``sqrt(q (1 - q))`` up to a factor common to every prompt. ``size_from`` picks ``q``: the
   posterior mean (default) or the success share of the prompt's last visit (what the
   official's 4-rollout pilot gives). Counts are ``group_multiple * round(budget /
   group_multiple * sigma / sum(sigma))`` (numpy's round, as the official; ``rounding:
   exact`` keeps the step at the budget by largest remainders); a prompt at 0 is not generated.

Every generated prompt's rollouts train as one GRPO group. Rewards above
``acceptance_threshold`` count as accepted, as the official counter does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._common import check_at_least, check_choice
from rollcli.allocators._one_ask import OneAskStep
from rollcli.allocators.api import AskItem, Group, Outcome
from rollcli.allocators.registry import register_allocator

__all__ = ["CuresConfig", "CuresAllocator", "cures_sampling_probabilities", "cures_counts"]


@dataclass(frozen=True)
class CuresConfig:
    """CurES; defaults follow the published scripts (``runs/scripts/run_epic.sh``)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["cures"] = "cures"
    n_mean: int = 8
    temperature: float = 100.0
    acceptance_threshold: float = 0.5
    size_from: Literal["posterior", "last_visit"] = "posterior"
    group_multiple: int = 1
    rounding: Literal["round", "exact"] = "round"

    def __post_init__(self) -> None:
        check_at_least(self, 1, "n_mean", "group_multiple")
        if not self.temperature > 0.0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.n_mean % self.group_multiple:
            raise ValueError(
                f"n_mean={self.n_mean} must be a multiple of group_multiple={self.group_multiple}"
            )
        check_choice("size_from", self.size_from, ["posterior", "last_visit"])
        check_choice("rounding", self.rounding, ["round", "exact"])


def cures_sampling_probabilities(
    accepted: np.ndarray, total: np.ndarray, temperature: float
) -> np.ndarray:
    """The official draw probabilities: ``exp(sqrt(p(1-p)) / (temperature (acc + 1)))``,
    normalised, with ``p = (acc + 1) / (all + 2)``."""
    p = (accepted + 1.0) / (total + 2.0)
    logit = np.sqrt(p * (1.0 - p)) / (temperature * (accepted + 1.0))
    score = np.exp(logit - logit.max())  # the official exp without the shift; same ratios
    return score / score.sum()


def cures_counts(
    share: np.ndarray, budget: int, *, group_multiple: int = 1, rounding: str = "round"
) -> np.ndarray:
    """Rollouts per prompt in proportion to ``sqrt(q (1 - q))`` (eq. 127, equal gradient
    norms), ``budget`` in all before rounding; all zero when every ``sigma`` is 0."""
    sigma = np.sqrt(np.clip(share * (1.0 - share), 0.0, None))
    total = sigma.sum()
    units = budget // group_multiple
    if total <= 0.0:
        return np.zeros(share.size, dtype=np.int64)
    exact = units * (sigma / total)
    if rounding == "round":
        counts = np.round(exact).astype(np.int64)
    else:  # largest remainders: exactly `units`, ties to the lower position
        counts = np.floor(exact).astype(np.int64)
        rest = units - int(counts.sum())
        if rest > 0:
            counts[np.argsort(-(exact - counts), kind="stable")[:rest]] += 1
    return counts * group_multiple


@register_allocator
class CuresAllocator(OneAskStep):
    """Posterior-weighted draws of B prompts; the budget split by sqrt(q(1 - q))."""

    config_class = CuresConfig
    state_arrays = ("accepted", "total", "last_share")
    stats_key = "stats"
    presets = {
        # Qwen2.5-Math-1.5B/7B, NuminaMath: run_epic.sh (num_rollout_max 8, epic temperature
        # 1e-2 -> t = 100 (acc + 1), acceptance 0.5), every sample size times rollout.n = 4 and
        # sized from the 4-rollout pilot's success share, as the published runs executed
        "paper": {
            "n_mean": 8,
            "temperature": 100.0,
            "acceptance_threshold": 0.5,
            "size_from": "last_visit",
            "group_multiple": 4,
        },
    }

    def __init__(self, config: CuresConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.batch_prompts = self.prompts_per_step(config.n_mean, f"n_mean={config.n_mean}")
        num = self.source.num_prompts
        self.accepted = np.zeros(num)
        self.total = np.zeros(num)
        self.last_share = np.full(num, 0.5)  # an unseen prompt: the Beta(1, 1) prior mean
        self._last = {"prompts": 0.0, "max_n": 0.0, "min_n": 0.0, "dropped": 0.0}

    @property
    def max_step_rollouts(self) -> int:
        """The budget, plus at most half a ``group_multiple`` per prompt from numpy's rounding."""
        m = self.config.group_multiple
        if self.config.rounding == "exact":
            return self.rollouts_per_step // m * m
        return m * ((2 * (self.rollouts_per_step // m) + self.batch_prompts) // 2)

    def _step_items(self) -> list[AskItem]:
        cfg = self.config
        probs = cures_sampling_probabilities(self.accepted, self.total, cfg.temperature)
        chosen = np.asarray(
            self.source.sample(self.batch_prompts, self.rng, weights=probs), dtype=np.int64
        )
        if chosen.size == 0:
            return []
        if cfg.size_from == "posterior":
            share = (self.accepted[chosen] + 1.0) / (self.total[chosen] + 2.0)
        else:
            share = self.last_share[chosen]
        counts = cures_counts(share, chosen.size * cfg.n_mean, group_multiple=cfg.group_multiple,
                              rounding=cfg.rounding)  # fmt: skip
        on = counts > 0
        self._last = {
            "prompts": float(on.sum()),
            "max_n": float(counts.max()),
            "min_n": float(counts[on].min()) if on.any() else 0.0,
            "dropped": float((~on).sum()),
        }
        return [AskItem(int(p), int(k)) for p, k in zip(chosen[on], counts[on], strict=True)]

    def _tell(self, outcomes: list[Outcome]) -> None:
        threshold = self.config.acceptance_threshold
        for o in outcomes:
            wins = int(np.count_nonzero(o.rewards > threshold))
            self.accepted[o.prompt_id] += wins
            self.total[o.prompt_id] += o.num_rollouts
            self.last_share[o.prompt_id] = wins / o.num_rollouts
            self._groups.append(Group(o.prompt_id, o.refs, o.rewards))
