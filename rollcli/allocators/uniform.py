"""GRPO's allocation: every step, the next ``rollouts_per_step / n`` prompts get ``n`` rollouts each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from rollcli.allocators._common import check_at_least
from rollcli.allocators._one_ask import OneAskStep
from rollcli.allocators.api import AskItem, Group, Outcome
from rollcli.allocators.registry import register_allocator

__all__ = ["UniformConfig", "UniformAllocator"]


@dataclass(frozen=True)
class UniformConfig:
    """Uniform (GRPO). The train batch is ``rollouts_per_step // n`` prompts."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["uniform"] = "uniform"
    n: int = 8

    def __post_init__(self) -> None:
        check_at_least(self, 1, "n")


@register_allocator
class UniformAllocator(OneAskStep):
    """One generation pass of ``n`` rollouts for each prompt of the batch; train on all of them."""

    config_class = UniformConfig
    presets = {
        "paper-grpo": {"n": 8},
        "paper-1.5b": {"n": 128},  # Pilot-Commit's GRPO baseline, Qwen2.5-Math-1.5B
        "paper-4b": {"n": 64},  # Pilot-Commit's GRPO baseline, Qwen3-4B
    }

    preset_prompts_per_step = {"paper-1.5b": 128}  # Pilot-Commit's GRPO baseline

    def __init__(self, config: UniformConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.batch_prompts = self.prompts_per_step(config.n, f"n={config.n}")

    @property
    def max_step_rollouts(self) -> int:
        """The most one step can generate (the contract suite checks it)."""
        return self.batch_prompts * self.config.n

    @property
    def min_step_rollouts(self) -> int:
        """The budget, ``B * n`` (``n`` for each prompt of a pool smaller than ``B``)."""
        return min(self.batch_prompts, self.source.num_prompts) * self.config.n

    @property
    def min_step_trained(self) -> int:
        """Everything it generates: every group is trained."""
        return self.min_step_rollouts

    def _step_items(self) -> list[AskItem]:
        return AskItem.many(self.source.take(self.batch_prompts), self.config.n, "main")

    def _tell(self, outcomes: list[Outcome]) -> None:
        self._groups = Group.many(
            [o.prompt_id for o in outcomes],
            [o.refs for o in outcomes],
            [o.rewards for o in outcomes],
        )
