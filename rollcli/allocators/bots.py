"""BOTS: a Beta posterior per prompt with forgetting, Thompson-sampled toward a target success
rate.

BOTS (arXiv 2510.26374; Trinity-RFT's ``examples/bots``: ``trinity/buffer/selector/
selector.py`` ``DiffBasedSelector`` at commit 3e9eb60 and ``diff_estimator.py``
``BaseBetaPREstimator`` / ``InterpolationBetaPREstimator`` at commit 607f1db, in
modelscope/Trinity-RFT). Every prompt of the pool has ``Beta(a, b)``, starting at
``Beta(1, 1)``. Each step:

1. **Selection.** Draw ``p ~ Beta(a, b)`` for every active prompt (``do_sample``; else the
   posterior mean) and score ``-|target - p|``. ``tau = 0`` keeps the ``B`` best scores
   (``B = rollouts_per_step // n``); ``tau > 0`` draws ``B`` without replacement with
   probabilities ``softmax(score / tau)``.
2. Each selected prompt gets ``n`` rollouts and trains as one GRPO group.
3. **Update, every prompt.** With ``s`` the selected prompts' success counts (``n`` times their
   pass rate; 0 elsewhere) and ``f`` their failures::

       a <- (1 - lamb) a + lamb + s,    b <- (1 - lamb) b + lamb + f

   (the official ``_update`` with ``rho = 0``: explicit evidence only; see docs/allocators.md
   for the implicit evidence that is not built).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._beta import BetaSelector
from rollcli.allocators._common import active_ids, check_at_least, check_fraction
from rollcli.allocators.api import Group, Outcome
from rollcli.allocators.registry import register_allocator

__all__ = ["BotsConfig", "BotsAllocator", "bots_update", "bots_select"]


@dataclass(frozen=True)
class BotsConfig:
    """BOTS; defaults are ``examples/bots/bots.yaml`` (without its implicit evidence)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["bots"] = "bots"
    n: int = 16
    lamb: float = 0.1
    target_reward: float = 0.5
    tau: float = 0.0
    do_sample: bool = True

    def __post_init__(self) -> None:
        check_at_least(self, 1, "n")
        check_fraction(self, "lamb", "target_reward")
        if not self.tau >= 0.0:
            raise ValueError(f"tau must be >= 0 (0: top-k), got {self.tau}")


def bots_update(
    alpha: np.ndarray,
    beta: np.ndarray,
    ids: np.ndarray,
    pass_rates: np.ndarray,
    m: int,
    lamb: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The official ``_update`` with ``rho = 0``: every prompt forgets towards Beta(1, 1) at rate
    ``lamb``; the prompts ``ids`` add ``m`` times their pass rate as successes, the rest as
    failures."""
    s_bar = np.zeros(alpha.size)
    s_bar[ids] = pass_rates * m
    f_bar = np.zeros(alpha.size)
    f_bar[ids] = (1 - pass_rates) * m
    return (1 - lamb) * alpha + lamb + s_bar, (1 - lamb) * beta + lamb + f_bar


def bots_select(
    p: np.ndarray, k: int, *, target: float, tau: float, rng: np.random.Generator
) -> np.ndarray:
    """Positions of the ``k`` prompts the selector keeps from predicted pass rates ``p``."""
    scores = -np.abs(target - p)
    if tau == 0:
        return np.argsort(-scores, kind="stable")[:k]  # torch.topk: largest first
    logits = scores / tau
    logits -= logits.max()
    probs = np.exp(logits)
    return rng.choice(p.size, size=k, replace=False, p=probs / probs.sum())


@register_allocator
class BotsAllocator(BetaSelector):
    """Thompson draws near the target rate pick the batch; every posterior forgets each step."""

    config_class = BotsConfig
    presets = {
        # Qwen2.5-1.5B-Instruct on GURU math: examples/bots/bots.yaml (repeat_times 16, lamb 0.1,
        # target 0.5, tau 0, do_sample); its rho 0.1 of implicit evidence is not reproduced
        "paper": {"n": 16, "lamb": 0.1, "target_reward": 0.5, "tau": 0.0, "do_sample": True},
    }

    def __init__(self, config: BotsConfig, **kwargs: Any) -> None:
        super().__init__(config, alpha0=1.0, beta0=1.0, **kwargs)
        self._last = {"predicted": 0.0, "posterior_mean": 0.0}

    def _choose(self) -> list[int]:
        cfg = self.config
        ids = active_ids(self.source)
        if ids.size == 0:
            return []
        a, b = self.alpha[ids], self.beta[ids]
        p = self.rng.beta(a, b) if cfg.do_sample else a / (a + b)
        picked = bots_select(p, min(self.batch_prompts, ids.size), target=cfg.target_reward,
                             tau=cfg.tau, rng=self.rng)  # fmt: skip
        self._last = {
            "predicted": float(p[picked].mean()),
            "posterior_mean": float((a[picked] / (a[picked] + b[picked])).mean()),
        }
        return ids[picked].tolist()

    def _tell(self, outcomes: list[Outcome]) -> None:
        self._groups += [Group(o.prompt_id, o.refs, o.rewards) for o in outcomes]
        if not outcomes:
            return
        ids = np.fromiter((o.prompt_id for o in outcomes), np.int64, len(outcomes))
        rewards = np.concatenate([o.rewards for o in outcomes]).reshape(len(outcomes), -1)
        rates = np.clip(rewards, 0.0, 1.0).mean(axis=1)
        self.alpha, self.beta = bots_update(
            self.alpha, self.beta, ids, rates, self.config.n, self.config.lamb
        )
