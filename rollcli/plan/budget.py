"""What a plan spends, per allocator: trained and generated rollouts, and tokens.

Two budgets, named for what they are. ``budget.rollouts_per_step`` is the **trained** budget: every
allocator puts at most that many rollouts into its training groups each step, so it is equal across
allocators; one that may train fewer (its pool drained by eviction or deferral, rounds stopped
early: ``min_step_trained`` below the budget) shows it as a bound, ``<= x``. The **generated** rollouts are not: DAPO refills until it has enough informative
groups, Pilot-Commit spends pilots it never trains on, PODS generates more than it trains. How
many depends on the rewards, which a plan cannot know; each allocator states the range a step can
take (``min_step_rollouts``, ``max_step_rollouts`` of :class:`rollcli.allocators.BaseAllocator`,
held to by the allocator contract suite), and the plan multiplies it by the steps: an exact
number where the allocator fixes it (GRPO, VIGOR), else ``[low, high]`` — every run lies inside.
Tokens are the rollouts times the backend's mean generated tokens per rollout, where its config
gives one (sim); otherwise unknown.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["AllocatorBudget", "allocator_budgets", "tokens_per_rollout"]


@dataclass(frozen=True)
class AllocatorBudget:
    """One allocator's spend per train job (one seed), from its declared per-step range."""

    allocator: str
    kind: str
    steps: int
    trained_per_step: int
    generated_min_per_step: int
    generated_max_per_step: int | None  # None: no bound (DAPO with max_gen_batches <= 0)
    tokens_per_rollout: float | None
    # the fewest a step trains: the budget where the allocator guarantees it, else less (0)
    trained_min_per_step: int | None = None

    @property
    def trained_exact(self) -> bool:
        """Whether every step trains the whole budget (else it is only an upper bound)."""
        floor = (
            self.trained_per_step
            if self.trained_min_per_step is None
            else self.trained_min_per_step
        )
        return floor >= self.trained_per_step

    @property
    def exact(self) -> bool:
        """Whether the allocator fixes its generated rollouts (the range is one number)."""
        return self.generated_max_per_step == self.generated_min_per_step

    @property
    def generated(self) -> tuple[int, int | None]:
        """``(low, high)`` generated rollouts of one train job (``high`` None: unbounded)."""
        high = self.generated_max_per_step
        return self.steps * self.generated_min_per_step, None if high is None else self.steps * high

    @property
    def tokens(self) -> tuple[int, int | None] | None:
        """``(low, high)`` generated tokens of one train job, None when the backend gives no
        tokens-per-rollout estimate."""
        if self.tokens_per_rollout is None:
            return None
        low, high = self.generated
        per = self.tokens_per_rollout
        return round(low * per), None if high is None else round(high * per)

    def to_json(self) -> dict[str, Any]:
        """The ``budget`` entry of ``rollcli plan --json`` (per train job)."""
        low, high = self.generated
        tokens = self.tokens
        return {
            "allocator": self.allocator,
            "kind": self.kind,
            "steps": self.steps,
            "trained_per_step": self.trained_per_step,
            "trained": self.steps * self.trained_per_step,
            "trained_exact": self.trained_exact,
            "generated_per_step": {
                "min": self.generated_min_per_step,
                "max": self.generated_max_per_step,
            },
            "generated": {"min": low, "max": high, "exact": self.exact},
            "tokens_per_rollout": self.tokens_per_rollout,
            "tokens": None if tokens is None else {"min": tokens[0], "max": tokens[1]},
        }


def tokens_per_rollout(backend: Any) -> float | None:
    """A backend's hint of mean generated tokens per rollout, if its config gives one."""
    hint = getattr(backend, "expected_tokens_per_rollout", None)
    if callable(hint):
        hint = hint()
    if hint is None:
        hint = getattr(backend, "mean_tokens", None)
    return float(hint) if isinstance(hint, (int, float)) else None


def _stand_in_oracle(prompt_ids: Any) -> Any:
    """The sim backend's true probabilities are not known before a run; a budget needs none."""
    import numpy as np

    return np.full(len(prompt_ids), 0.5)


def allocator_budgets(spec: Any) -> list[AllocatorBudget]:
    """Per allocator of a validated spec, what one train job trains and generates."""
    from rollcli.allocators.registry import ALLOCATORS, create_allocator

    rps = spec.budget.rollouts_per_step
    steps = spec.budget.steps
    # the same pool size validation uses: the bounds do not depend on it
    num_prompts = getattr(spec.backend, "num_train_prompts", None) or 100_000
    per_rollout = tokens_per_rollout(spec.backend)
    out = []
    for name, config in spec.allocators.items():
        cls = ALLOCATORS[config.kind][1]
        oracle = _stand_in_oracle if getattr(cls, "requires_oracle", False) else None
        allocator = create_allocator(
            config, num_prompts=num_prompts, rollouts_per_step=rps, seed=0, oracle=oracle
        )
        high = int(allocator.max_step_rollouts)
        low = int(getattr(allocator, "min_step_rollouts", 0))
        out.append(
            AllocatorBudget(
                allocator=name,
                kind=config.kind,
                steps=steps,
                trained_per_step=rps,
                generated_min_per_step=min(low, high),
                generated_max_per_step=None if high >= sys.maxsize else high,
                tokens_per_rollout=per_rollout,
                trained_min_per_step=int(getattr(allocator, "min_step_trained", 0)),
            )
        )
    return out
