"""The frame MoPPS and SPO share: a Beta(a, b) per prompt, one ask of B prompts x n per step.

A subclass chooses the step's prompts from its parameters (:meth:`BetaSelector._choose`) and
updates them when told (``_tell``, vectorised over :meth:`BetaSelector._told`, appending one
group per outcome to ``self._groups``); the batch size and the Beta arrays are here, the one
ask, groups, statistics and state in :class:`~rollcli.allocators._one_ask.OneAskStep`.
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np

from rollcli.allocators._one_ask import OneAskStep
from rollcli.allocators.api import AskItem, Outcome

__all__ = ["BetaSelector"]


class BetaSelector(OneAskStep):
    """``B = rollouts_per_step // n`` prompts a step, ``n`` rollouts each, every group trains.

    ``self.alpha`` / ``self.beta`` hold each prompt's Beta parameters (whole-pool float arrays,
    saved bit-exact); ``self._last`` holds the step's statistics for :meth:`stats`.
    """

    state_arrays = ("alpha", "beta")

    def __init__(self, config: Any, *, alpha0: float, beta0: float, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.batch_prompts = self.prompts_per_step(config.n, f"n={config.n}")
        num = self.source.num_prompts
        self.alpha = np.full(num, float(alpha0))
        self.beta = np.full(num, float(beta0))

    @property
    def max_step_rollouts(self) -> int:
        return self.batch_prompts * self.config.n

    @abc.abstractmethod
    def _choose(self) -> list[int]:
        """The step's prompts (distinct, at most ``batch_prompts``); fills ``self._last``."""

    def _step_items(self) -> list[AskItem]:
        return AskItem.many(self._choose(), self.config.n)

    def _told(self, outcomes: list[Outcome]) -> tuple[np.ndarray, np.ndarray]:
        """The told prompt ids and their rewards as a (prompts, n) matrix (every item asked n)."""
        ids = np.fromiter((o.prompt_id for o in outcomes), np.int64, len(outcomes))
        rewards = np.concatenate([o.rewards for o in outcomes]) if outcomes else np.zeros(0)
        return ids, rewards.reshape(len(outcomes), self.config.n)

    def posterior_mean(self, prompt_ids: Any) -> np.ndarray:
        """``a / (a + b)`` of each prompt (MoPPS's posterior mean, SPO's ``p_hat``)."""
        ids = np.asarray(prompt_ids, dtype=np.int64)
        return self.alpha[ids] / (self.alpha[ids] + self.beta[ids])
