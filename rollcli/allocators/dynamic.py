"""DAPO dynamic sampling: over-generate, drop groups whose accuracy has zero spread, refill.

Each generation batch asks ``gen_batch_factor * B`` new prompts for ``n`` rollouts each, where
``B = rollouts_per_step // n`` is the train batch. Groups whose rewards all agree (accuracy std 0:
all right or all wrong) are dropped; the others are kept in generation order. Batches repeat
until ``B`` informative groups are kept; the first ``B`` train and any excess informative groups
are discarded (DAPO aligns the batch to ``B * n`` rollouts). Every generated rollout is counted by
the ledger, so one step may cost up to ``max_gen_batches * gen_batch_factor`` times the budget:
that overspend is the algorithm. After ``max_gen_batches`` batches without a full train batch
the allocator raises (DAPO's behaviour) or, with ``on_max_gen_batches="train"``, trains on the
informative groups it has.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from rollcli.allocators._common import check_at_least, check_choice
from rollcli.allocators.api import AllocatorError, Ask, AskItem, BaseAllocator, Group, Outcome
from rollcli.allocators.registry import register_allocator
from rollcli.allocators.state import group_from_json, group_to_json

__all__ = ["DynamicConfig", "DynamicAllocator"]


@dataclass(frozen=True)
class DynamicConfig:
    """DAPO dynamic sampling. Train batch ``B = rollouts_per_step // n`` prompts; each generation
    batch is ``gen_batch_factor * B`` prompts; ``max_gen_batches <= 0`` means no limit."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["dynamic"] = "dynamic"
    n: int = 16
    gen_batch_factor: int = 3
    max_gen_batches: int = 10
    on_max_gen_batches: Literal["error", "train"] = "error"

    def __post_init__(self) -> None:
        if self.n < 2:
            raise ValueError(
                f"n must be >= 2 (a group of one rollout never has spread), got {self.n}"
            )
        check_at_least(self, 1, "gen_batch_factor")
        check_choice("on_max_gen_batches", self.on_max_gen_batches, ["error", "train"])


@register_allocator
class DynamicAllocator(BaseAllocator):
    """Refill generation batches until the train batch holds ``B`` informative groups."""

    config_class = DynamicConfig
    presets = {"paper-dapo": {"n": 16, "gen_batch_factor": 3, "max_gen_batches": 10}}

    preset_prompts_per_step = {"paper-dapo": 512}  # REFERENCE.md §1: DAPO 512 prompts

    def __init__(self, config: DynamicConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.batch_prompts = self.prompts_per_step(config.n, f"n={config.n}")
        self.gen_batch_prompts = config.gen_batch_factor * self.batch_prompts
        self._num_batches = 0
        self._kept: list[Group] = []
        self._dropped = 0
        self._informative = 0
        self._total_dropped = 0
        self._total_batches = 0

    @property
    def max_step_rollouts(self) -> int:
        """Every generation batch of ``max_gen_batches``; ``sys.maxsize`` when the knob asks for
        no limit (``<= 0``: refill until ``B`` informative groups, however long that takes)."""
        if self.config.max_gen_batches <= 0:
            return sys.maxsize
        return self.config.max_gen_batches * self.gen_batch_prompts * self.config.n

    @property
    def min_step_rollouts(self) -> int:
        """One generation batch (of a pool smaller than it: the pool): every step has one."""
        return min(self.gen_batch_prompts, self.source.num_active) * self.config.n

    @property
    def min_step_trained(self) -> int:
        """``B`` groups of ``n``, or an error; none with ``on_max_gen_batches=train`` (it trains
        what it found)."""
        if self.config.on_max_gen_batches == "train":
            return 0
        return min(self.batch_prompts, self.source.num_active) * self.config.n

    def _start_step(self) -> None:
        self._num_batches = 0
        self._kept = []
        self._dropped = 0
        self._informative = 0

    def _ask(self) -> Ask | None:
        if len(self._kept) >= self.batch_prompts:
            return None
        limit = self.config.max_gen_batches
        if limit > 0 and self._num_batches >= limit:
            if self.config.on_max_gen_batches == "train":
                return None
            raise AllocatorError(
                f"dynamic: only {len(self._kept)} of {self.batch_prompts} informative groups after "
                f"{self._num_batches} generation batches ({self.ledger.step_rollouts} rollouts) in "
                f"step {self.step}; the prompts are too easy or too hard for n={self.config.n}. "
                "Raise max_gen_batches (<= 0: no limit) or set on_max_gen_batches=train."
            )
        prompts = self.source.take(self.gen_batch_prompts)
        if not prompts:
            return None
        self._num_batches += 1
        self._total_batches += 1
        return Ask(tuple(AskItem(p, self.config.n, "main") for p in prompts))

    def _tell(self, outcomes: list[Outcome]) -> None:
        for o in outcomes:
            # accuracy std 0 <=> every reward equal (binary or not, a constant group teaches nothing)
            if o.num_rollouts > 1 and float(o.rewards.max()) > float(o.rewards.min()):
                self._kept.append(Group(o.prompt_id, o.refs, o.rewards))
                self._informative += 1
            else:
                self._dropped += 1
                self._total_dropped += 1

    def _train_groups(self) -> list[Group]:
        groups, self._kept = self._kept[: self.batch_prompts], []
        return groups

    def stats(self) -> dict[str, float]:
        return {
            **super().stats(),
            "gen_batches": self._num_batches,
            "informative": self._informative,
            "dropped": self._dropped,
            "total_gen_batches": self._total_batches,
            "total_dropped": self._total_dropped,
        }

    def _state(self) -> dict[str, Any]:
        return {
            "num_batches": self._num_batches,
            "kept": [group_to_json(g) for g in self._kept],
            "dropped": self._dropped,
            "informative": self._informative,
            "total_dropped": self._total_dropped,
            "total_batches": self._total_batches,
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self._num_batches = int(state["num_batches"])
        self._kept = [group_from_json(g) for g in state["kept"]]
        self._dropped = int(state["dropped"])
        self._informative = int(state["informative"])
        self._total_dropped = int(state["total_dropped"])
        self._total_batches = int(state["total_batches"])
