"""The frame MoPPS and SPO share: a Beta(a, b) per prompt, one ask of B prompts x n per step.

A subclass chooses the step's prompts from its parameters (:meth:`BetaSelector._choose`) and
updates them when told (``_tell``, vectorised over :meth:`BetaSelector._told`, appending one
group per outcome to ``self._groups``);
everything else (batch size, the one ask, groups, statistics, state) is here.
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np

from rollcli.allocators._common import KeptGroups
from rollcli.allocators.api import Ask, AskItem, BaseAllocator, Group, Outcome
from rollcli.allocators.state import array_from_json, array_to_json, group_from_json, group_to_json

__all__ = ["BetaSelector"]


class BetaSelector(KeptGroups, BaseAllocator):
    """``B = rollouts_per_step // n`` prompts a step, ``n`` rollouts each, every group trains.

    ``self.alpha`` / ``self.beta`` hold each prompt's Beta parameters (whole-pool float arrays,
    saved bit-exact); ``self._last`` holds the step's statistics for :meth:`stats`.
    """

    def __init__(self, config: Any, *, alpha0: float, beta0: float, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.batch_prompts = self.prompts_per_step(config.n, f"n={config.n}")
        num = self.source.num_prompts
        self.alpha = np.full(num, float(alpha0))
        self.beta = np.full(num, float(beta0))
        self._asked = False
        self._groups: list[Group] = []
        self._last: dict[str, float] = {}

    @property
    def max_step_rollouts(self) -> int:
        return self.batch_prompts * self.config.n

    @abc.abstractmethod
    def _choose(self) -> list[int]:
        """The step's prompts (distinct, at most ``batch_prompts``); fills ``self._last``."""

    def _start_step(self) -> None:
        self._asked = False
        self._groups = []

    def _ask(self) -> Ask | None:
        if self._asked:
            return None
        self._asked = True
        chosen = self._choose()
        n = self.config.n
        return Ask(tuple([AskItem(p, n, "main") for p in chosen])) if chosen else None

    def _told(self, outcomes: list[Outcome]) -> tuple[np.ndarray, np.ndarray]:
        """The told prompt ids and their rewards as a (prompts, n) matrix (every item asked n)."""
        ids = np.fromiter((o.prompt_id for o in outcomes), np.int64, len(outcomes))
        rewards = np.concatenate([o.rewards for o in outcomes]) if outcomes else np.zeros(0)
        return ids, rewards.reshape(len(outcomes), self.config.n)

    def posterior_mean(self, prompt_ids: Any) -> np.ndarray:
        """``a / (a + b)`` of each prompt (MoPPS's posterior mean, SPO's ``p_hat``)."""
        ids = np.asarray(prompt_ids, dtype=np.int64)
        return self.alpha[ids] / (self.alpha[ids] + self.beta[ids])

    def stats(self) -> dict[str, float]:
        return {**super().stats(), **self._last}

    def _state(self) -> dict[str, Any]:
        return {
            "alpha": array_to_json(self.alpha),
            "beta": array_to_json(self.beta),
            "asked": self._asked,
            "groups": [group_to_json(g) for g in self._groups],
            "last": dict(self._last),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self.alpha = array_from_json(state["alpha"])
        self.beta = array_from_json(state["beta"])
        self._asked = bool(state["asked"])
        self._groups = [group_from_json(g) for g in state["groups"]]
        self._last = {k: float(v) for k, v in state["last"].items()}
