"""The selection-only oracle ``oracle_select`` (sim only): the best prompts at a fixed ``n``.

Each step it scores candidate prompts by their *true* p under the current policy (the backend's
``success_probabilities``, passed in as ``oracle``) and gives ``n`` rollouts to the ``B =
rollouts_per_step // n`` best: ``score="variance"`` ranks by p(1-p) (the expected gradient scale
without std normalisation), ``score="informative"`` by P(group informative) = 1 - p^n - (1-p)^n.
Candidates are the whole active pool (``candidate_factor=0``) or the next ``candidate_factor * B``
prompts in epoch order. Ties are broken by a seeded random key. It never evicts or defers: it is
the limit a pilot-based allocator approaches with a free, exact pilot at a fixed group size.
The budget-aware ``oracle`` (:mod:`rollcli.allocators.oracle_budget`) also chooses ``n``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._common import KeptGroups, check_at_least, check_choice
from rollcli.allocators.api import AllocatorError, Ask, AskItem, BaseAllocator, Group, Outcome
from rollcli.allocators.registry import register_allocator
from rollcli.allocators.state import group_from_json, group_to_json

__all__ = ["OracleSelectConfig", "OracleSelectAllocator", "oracle_scores"]


@dataclass(frozen=True)
class OracleSelectConfig:
    """Selection-only oracle; batch ``B = rollouts_per_step // n``; ``candidate_factor=0``: whole pool."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["oracle_select"] = "oracle_select"
    n: int = 8
    score: Literal["variance", "informative"] = "variance"
    candidate_factor: int = 0

    def __post_init__(self) -> None:
        check_at_least(self, 1, "n")
        check_choice("score", self.score, ["variance", "informative"])
        if self.candidate_factor < 0:
            raise ValueError(
                f"candidate_factor must be >= 0 (0: whole pool), got {self.candidate_factor}"
            )


def oracle_scores(p: np.ndarray, n: int, score: str) -> np.ndarray:
    """p(1-p), or 1 - p^n - (1-p)^n, elementwise."""
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    if score == "variance":
        return p * (1.0 - p)
    return 1.0 - p**n - (1.0 - p) ** n


@register_allocator
class OracleSelectAllocator(KeptGroups, BaseAllocator):
    """One ask per step: the top-B candidates by true informativeness, ``n`` rollouts each."""

    config_class = OracleSelectConfig
    presets = {
        "variance": {"n": 8, "score": "variance"},
        "informative": {"n": 8, "score": "informative"},
    }
    requires_oracle = True

    def __init__(self, config: OracleSelectConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.batch_prompts = self.prompts_per_step(config.n, f"n={config.n}")
        self._asked = False
        self._groups: list[Group] = []
        self._mean_score = 0.0

    @property
    def max_step_rollouts(self) -> int:
        return self.rollouts_per_step

    def _start_step(self) -> None:
        self._asked = False
        self._groups = []

    def _candidates(self) -> np.ndarray:
        if self.config.candidate_factor > 0:
            return np.asarray(
                self.source.take(self.config.candidate_factor * self.batch_prompts), int
            )
        ids = np.arange(self.source.num_prompts)
        if self.source.num_evicted:
            ids = ids[[not self.source.is_evicted(int(i)) for i in ids]]
        return ids

    def _ask(self) -> Ask | None:
        if self._asked:
            return None
        self._asked = True
        ids = self._candidates()
        if len(ids) == 0:
            return None
        p = np.asarray(self.oracle(ids), dtype=float)
        if p.shape != ids.shape:
            raise AllocatorError(f"oracle returned {p.shape} probabilities for {ids.shape} prompts")
        scores = oracle_scores(p, self.config.n, self.config.score)
        ties = self.rng.random(len(ids))
        order = np.lexsort((ties, -scores))[: self.batch_prompts]
        self._mean_score = float(scores[order].mean())
        return Ask(tuple(AskItem(int(ids[i]), self.config.n, "main") for i in order))

    def _tell(self, outcomes: list[Outcome]) -> None:
        self._groups = [Group(o.prompt_id, o.refs, o.rewards) for o in outcomes]

    def stats(self) -> dict[str, float]:
        return {**super().stats(), "mean_score": self._mean_score}

    def _state(self) -> dict[str, Any]:
        return {
            "asked": self._asked,
            "groups": [group_to_json(g) for g in self._groups],
            "mean_score": self._mean_score,
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self._asked = bool(state["asked"])
        self._groups = [group_from_json(g) for g in state["groups"]]
        self._mean_score = float(state["mean_score"])
