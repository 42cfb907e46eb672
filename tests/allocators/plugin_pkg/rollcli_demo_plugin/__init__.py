"""A rollcli allocator from outside rollcli: random prompts, a running-mean baseline.

Each step draws ``B = rollouts_per_step // n`` prompts at random from the whole active pool
(``PromptSource.sample``) and gives each ``n`` rollouts. Each group carries a baseline: the
prompt's success rate over every rollout ever drawn for it, this step's included, so the
backend trains on ``r - baseline`` (``Group.baseline``) rather than GRPO's group-normalised
advantage. The entry point in pyproject.toml registers it; this module does not import the
registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators import Ask, AskItem, BaseAllocator, Group, Outcome
from rollcli.allocators.state import array_from_json, array_to_json, group_from_json, group_to_json

__all__ = ["RandomBaselineAllocator", "RandomBaselineConfig"]


@dataclass(frozen=True)
class RandomBaselineConfig:
    """Random prompts from the whole pool, ``n`` rollouts each, a running-mean baseline."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["demo_random"] = "demo_random"
    n: int = 4

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")


class RandomBaselineAllocator(BaseAllocator):
    """One ask per step: ``B`` random active prompts, ``n`` rollouts each; groups with a baseline."""

    config_class = RandomBaselineConfig
    presets: ClassVar[dict[str, dict[str, Any]]] = {"small": {"n": 2}}

    def __init__(self, config: RandomBaselineConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        if self.rollouts_per_step % config.n:
            raise ValueError(f"n={config.n} must divide rollouts_per_step={self.rollouts_per_step}")
        self.batch_prompts = self.rollouts_per_step // config.n
        self.successes = np.zeros(self.source.num_prompts)
        self.draws = np.zeros(self.source.num_prompts, dtype=np.int64)
        self._asked = False
        self._groups: list[Group] = []

    @property
    def max_step_rollouts(self) -> int:
        return self.batch_prompts * self.config.n

    def _start_step(self) -> None:
        self._asked = False
        self._groups = []

    def _ask(self) -> Ask | None:
        if self._asked:
            return None
        self._asked = True
        prompts = self.source.sample(self.batch_prompts, self.rng)
        return Ask(tuple(AskItem(p, self.config.n, "main") for p in prompts))

    def _tell(self, outcomes: list[Outcome]) -> None:
        for o in outcomes:
            self.successes[o.prompt_id] += float(o.rewards.sum())
            self.draws[o.prompt_id] += o.num_rollouts
            baseline = self.successes[o.prompt_id] / self.draws[o.prompt_id]
            self._groups.append(Group(o.prompt_id, o.refs, o.rewards, baseline=baseline))

    def _train_groups(self) -> list[Group]:
        groups, self._groups = self._groups, []
        return groups

    def _state(self) -> dict[str, Any]:
        return {
            "asked": self._asked,
            "groups": [group_to_json(g) for g in self._groups],
            "successes": array_to_json(self.successes),
            "draws": array_to_json(self.draws),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self._asked = bool(state["asked"])
        self._groups = [group_from_json(g) for g in state["groups"]]
        self.successes = array_from_json(state["successes"])
        self.draws = array_from_json(state["draws"])
