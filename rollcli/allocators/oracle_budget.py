"""The budget-aware oracle (sim only): the prompts AND the rollouts of each, from the true p.

Each step it reads the true success probability of every candidate under the current policy
(the backend's ``success_probabilities``, passed in as ``oracle``) and splits the step's budget
(``rollouts_per_step``, spent in full) into groups of ``n_min..n_max`` rollouts that maximise
the expected quality of the GRPO update: the signal-to-noise ratio ``sum_i S_i / sqrt(sum_i
V_i)`` of the batch gradient (``objective="snr"``, what an Adam step follows) or its expected
signal ``sum_i S_i`` (``objective="signal"``, what an SGD step follows), where ``S`` and ``V``
are a group's expected ``sum_j A_j r_j`` and ``sum_j A_j^2`` (:mod:`rollcli.allocators.oracle_signal`
gives the formulas, the search and its tie rules). Candidates are the whole active pool
(``num_candidates=0``) or the next ``num_candidates`` prompts in epoch order. One generation
pass; every rollout trains. It never evicts or defers.

It is the limit for *per-step* allocation with a free, exact pilot: it does not plan across
steps (e.g. saving prompts for later) and it trusts the sim's model of the update (one shared
gradient direction per skill, independent per-rollout noise). ``oracle_select`` is the older
selection-only oracle (the best prompts at a fixed ``n``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._common import KeptGroups, active_ids, check_choice, check_group_sizes
from rollcli.allocators.api import AllocatorError, Ask, AskItem, BaseAllocator, Group, Outcome
from rollcli.allocators.oracle_signal import (
    SignalTable,
    allocate_rollouts,
    objective_value,
    size_menu,
)
from rollcli.allocators.registry import register_allocator
from rollcli.allocators.state import group_from_json, group_to_json

__all__ = ["BudgetOracleConfig", "BudgetOracleAllocator"]


@dataclass(frozen=True)
class BudgetOracleConfig:
    """Budget-aware oracle: group sizes ``0`` or ``n_min..n_max`` summing to the step's budget.

    ``n_min = 2`` is the smallest group that can be informative and ``n_max = 128`` the largest
    per-prompt count of the published budget allocator (Knapsack RL's ``max_n``).
    ``std_normalize`` must match the backend's advantage (GRPO: true; Dr.GRPO: false).
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["oracle"] = "oracle"
    n_min: int = 2
    n_max: int = 128
    objective: Literal["snr", "signal"] = "snr"
    std_normalize: bool = True
    num_candidates: int = 0

    def __post_init__(self) -> None:
        check_group_sizes(self.n_min, self.n_max)
        check_choice("objective", self.objective, ["snr", "signal"])
        if self.num_candidates < 0:
            raise ValueError(
                f"num_candidates must be >= 0 (0: the whole pool), got {self.num_candidates}"
            )


@register_allocator
class BudgetOracleAllocator(KeptGroups, BaseAllocator):
    """One ask per step: the budget split over the candidates by their true p (module docstring)."""

    config_class = BudgetOracleConfig
    presets = {
        "snr": {"objective": "snr"},  # what an Adam step follows (the default)
        "signal": {"objective": "signal"},  # what an SGD step follows
        "dr-grpo": {"std_normalize": False},  # advantages without std division
    }
    requires_oracle = True

    def __init__(self, config: BudgetOracleConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        if self.rollouts_per_step < config.n_min:
            raise ValueError(
                f"oracle: rollouts_per_step={self.rollouts_per_step} is below n_min={config.n_min}"
            )
        self._table = SignalTable(size_menu(config.n_min, config.n_max), config.std_normalize)
        self._asked = False
        self._groups: list[Group] = []
        self._stats = {"objective": 0.0, "groups": 0.0, "mean_group_size": 0.0, "mean_p": 0.0}

    @property
    def max_step_rollouts(self) -> int:
        return self.rollouts_per_step

    def _start_step(self) -> None:
        self._asked = False
        self._groups = []

    def _candidates(self) -> np.ndarray:
        if self.config.num_candidates > 0:
            return np.asarray(self.source.take(self.config.num_candidates), dtype=np.int64)
        return active_ids(self.source)

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
        cfg = self.config
        counts = allocate_rollouts(
            p,
            self.rollouts_per_step,
            n_min=cfg.n_min,
            n_max=cfg.n_max,
            objective=cfg.objective,
            std_normalize=cfg.std_normalize,
            tie_key=self.rng.random(len(ids)),
            table=self._table,
        )
        chosen = np.flatnonzero(counts)
        value = objective_value(p, counts, cfg.objective, std_normalize=cfg.std_normalize)[0]
        self._stats = {
            "objective": value,
            "groups": float(chosen.size),
            "mean_group_size": float(counts[chosen].mean()) if chosen.size else 0.0,
            "mean_p": float(p[chosen].mean()) if chosen.size else 0.0,
        }
        return Ask(tuple(AskItem(int(ids[i]), int(counts[i]), "main") for i in chosen))

    def _tell(self, outcomes: list[Outcome]) -> None:
        self._groups = [Group(o.prompt_id, o.refs, o.rewards) for o in outcomes]

    def stats(self) -> dict[str, float]:
        return {**super().stats(), **self._stats}

    def _state(self) -> dict[str, Any]:
        return {
            "asked": self._asked,
            "groups": [group_to_json(g) for g in self._groups],
            "stats": dict(self._stats),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self._asked = bool(state["asked"])
        self._groups = [group_from_json(g) for g in state["groups"]]
        self._stats = {k: float(v) for k, v in state["stats"].items()}
