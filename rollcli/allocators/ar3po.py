"""AR3PO's adaptive rollout: sample in rounds, stop a prompt at its first correct answer.

AR3PO (Zhang et al., arXiv 2509.25808; no public code found). What could be read (the abstract
and third-party summaries, not the method section): responses are generated in stages; a prompt
that has at least one correct response stops, the others get another stage, so easy prompts
cost few rollouts and hard ones more; *response reuse* adds a previously verified correct
response to a prompt whose group is all wrong. rollcli builds the adaptive rollout:

1. ``B = rollouts_per_step // (round_size * max_rounds)`` prompts in epoch order, so that a step
   never generates more than the budget.
2. Round 1 gives each ``round_size`` rollouts. After each round, a prompt with a reward above
   ``success_threshold`` stops; the rest get another ``round_size`` (up to ``max_rounds``).
3. Every prompt's rollouts of all its rounds train as one GRPO group.

**Response reuse is not built**: it puts a rollout of an earlier step (trained then) into a later
group, which the allocator protocol forbids (a rollout trains at most once; a stale response
also changes the gradient: it is off-policy and gets a positive advantage it did not earn under
the current policy). docs/allocators.md says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._common import KeptGroups, check_at_least, merge_outcomes
from rollcli.allocators.api import Ask, AskItem, BaseAllocator, Group, Outcome
from rollcli.allocators.registry import register_allocator
from rollcli.allocators.state import (
    group_from_json,
    group_to_json,
    outcomes_from_json,
    outcomes_to_json,
    prompt_dict_from_json,
    prompt_dict_to_json,
)

__all__ = ["Ar3poConfig", "Ar3poAllocator"]


@dataclass(frozen=True)
class Ar3poConfig:
    """AR3PO's adaptive rollout; the round size and count are rollcli's (the paper's could not be
    read): two rounds of 4 spend at most GRPO's n = 8 a prompt."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["ar3po"] = "ar3po"
    round_size: int = 4
    max_rounds: int = 2
    success_threshold: float = 0.5

    def __post_init__(self) -> None:
        check_at_least(self, 1, "round_size", "max_rounds")


@register_allocator
class Ar3poAllocator(KeptGroups, BaseAllocator):
    """Rounds of ``round_size`` rollouts for the prompts without a correct answer yet."""

    config_class = Ar3poConfig

    def __init__(self, config: Ar3poConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        per_prompt = config.round_size * config.max_rounds
        self.batch_prompts = self.prompts_per_step(
            per_prompt, f"round_size * max_rounds={per_prompt}"
        )
        self._round = 0
        self._open: dict[int, list[Outcome]] = {}  # prompt -> its rollouts so far, still sampling
        self._groups: list[Group] = []
        self._last = {"rounds": 0.0, "mean_n": 0.0, "unsolved": 0.0}

    @property
    def max_step_rollouts(self) -> int:
        return self.batch_prompts * self.config.round_size * self.config.max_rounds

    @property
    def min_step_rollouts(self) -> int:
        return min(self.batch_prompts, self.source.num_active) * self.config.round_size

    def _start_step(self) -> None:
        self._round = 0
        self._open = {}
        self._groups = []

    def _ask(self) -> Ask | None:
        size = self.config.round_size
        if self._round == 0:
            prompts = self.source.take(self.batch_prompts)
            self._open = {p: [] for p in prompts}
        elif self._round >= self.config.max_rounds or not self._open:
            self._close()
            return None
        self._round += 1
        return Ask(tuple(AskItem.many(list(self._open), size, f"round{self._round}")))

    def _tell(self, outcomes: list[Outcome]) -> None:
        threshold = self.config.success_threshold
        for o in outcomes:
            self._open[o.prompt_id].append(o)
            if float(o.rewards.max(initial=-np.inf)) > threshold:
                parts = self._open.pop(o.prompt_id)
                self._groups.append(merge_outcomes(o.prompt_id, parts))

    def _close(self) -> None:
        """The prompts still without a correct answer train with every round's rollouts."""
        unsolved = len(self._open)
        for prompt, parts in self._open.items():
            self._groups.append(merge_outcomes(prompt, parts))
        self._open = {}
        sizes = [g.size for g in self._groups]
        self._last = {
            "rounds": float(self._round),
            "mean_n": float(np.mean(sizes)) if sizes else 0.0,
            "unsolved": float(unsolved),
        }

    def stats(self) -> dict[str, float]:
        return {**super().stats(), **self._last}

    def _state(self) -> dict[str, Any]:
        return {
            "round": self._round,
            "open": prompt_dict_to_json(self._open, outcomes_to_json),
            "groups": [group_to_json(g) for g in self._groups],
            "last": dict(self._last),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self._round = int(state["round"])
        self._open = prompt_dict_from_json(state["open"], outcomes_from_json)
        self._groups = [group_from_json(g) for g in state["groups"]]
        self._last = dict(state["last"])
