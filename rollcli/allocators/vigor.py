"""VIGOR: variance-guided rounds inside one step; groups of unequal size.

A step takes a batch of ``N`` prompts and runs ``rounds`` (T) generation rounds, the initial one
included. Round 0 gives every prompt ``m0`` rollouts. Before each later round ``t`` every still
active prompt is scored by the population variance of ALL its accumulated rewards, the top
``ceil(alpha * active)`` stay active, and each gets ``m_t = m0 * gamma**t`` (rounded half up) rollouts. The
step ends when the rounds or the per-step budget (``rollouts_per_step``) run out; each prompt's
accumulated rollouts train as one group (only the final active prompts' unless ``train_dropped``).

The batch size follows from the budget: with ``a_0 = N`` and ``a_t = ceil(alpha * a_{t-1})`` a
step costs ``cost(N) = sum_t a_t * m_t`` when every round runs, and ``N`` is the largest batch with
``cost(N) <= rollouts_per_step``. With ``alpha * gamma = 1`` and no rounding
``cost(N) = T * m0 * N``, so ``N = rollouts_per_step / (T * m0)``. Early stops only spend less.

Choices the paper leaves open (each a knob, see docs/allocators.md): ``train_dropped`` (default
true: dropped prompts' rollouts were paid for and train as their own groups), ``tie_break``
(default random: equal variances are ordered by a seeded random key; ``first`` keeps batch
order), ``all_zero`` (default ``continue``: when every active variance is 0 the round schedule
runs on; ``stop`` ends the step early and saves the rest of the budget).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._common import check_at_least, check_choice, merge_outcomes, reward_variance
from rollcli.allocators.api import Ask, AskItem, BaseAllocator, Group, Outcome
from rollcli.allocators.registry import register_allocator
from rollcli.allocators.state import outcome_from_json, outcome_to_json

__all__ = ["VigorConfig", "VigorAllocator", "vigor_round_sizes", "vigor_step_cost"]


@dataclass(frozen=True)
class VigorConfig:
    """VIGOR; defaults are the third-party setting (m0=2, T=4, alpha=0.5, gamma=2).

    The batch is the largest ``N`` whose full-round cost fits ``rollouts_per_step`` (module doc).
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["vigor"] = "vigor"
    m0: int = 2
    alpha: float = 0.5
    gamma: float = 2.0
    rounds: int = 4
    train_dropped: bool = True
    tie_break: Literal["random", "first"] = "random"
    all_zero: Literal["continue", "stop"] = "continue"

    def __post_init__(self) -> None:
        check_at_least(self, 1, "m0")
        if not 0.0 < self.alpha <= 1.0:
            raise ValueError(f"alpha must lie in (0, 1], got {self.alpha}")
        if self.gamma <= 0:
            raise ValueError(f"gamma must be positive, got {self.gamma}")
        if self.rounds < 1:
            raise ValueError(f"rounds must be >= 1 (the initial round counts), got {self.rounds}")
        for t in range(self.rounds):
            if math.floor(self.m0 * self.gamma**t + 0.5) < 1:
                raise ValueError(
                    f"m0 * gamma**{t} = {self.m0 * self.gamma**t:g} rounds to 0 rollouts; raise m0 or gamma"
                )
        check_choice("tie_break", self.tie_break, ["random", "first"])
        check_choice("all_zero", self.all_zero, ["continue", "stop"])

    def rollouts_per_round(self) -> list[int]:
        """``m_t`` for every round t = 0 .. rounds-1."""
        return [int(math.floor(self.m0 * self.gamma**t + 0.5)) for t in range(self.rounds)]


def vigor_round_sizes(config: VigorConfig, num_prompts: int) -> list[int]:
    """Active prompts per round when every round runs: ``a_0 = N``, ``a_t = ceil(alpha a_{t-1})``."""
    sizes = [num_prompts]
    for _ in range(1, config.rounds):
        sizes.append(math.ceil(config.alpha * sizes[-1] - 1e-9))
    return sizes


def vigor_step_cost(config: VigorConfig, num_prompts: int) -> int:
    """Rollouts one step of ``num_prompts`` prompts costs when every round runs."""
    sizes = vigor_round_sizes(config, num_prompts)
    return sum(a * m for a, m in zip(sizes, config.rollouts_per_round(), strict=True))


_HALVING = {"alpha": 0.5, "gamma": 2.0, "rounds": 4}


@register_allocator
class VigorAllocator(BaseAllocator):
    """Round-based variance-guided allocation; see the module docstring."""

    config_class = VigorConfig
    presets = {
        # the paper's rule m0 = G / T with alpha * gamma = 1, for GRPO's G = 8
        "paper": {"m0": 2, **_HALVING},
        # the same rule for G = 128 (Pilot-Commit's 1.5B comparison)
        "paper-g128": {"m0": 32, **_HALVING},
        # the third-party implementation: m0=2, T=4, alpha=0.5, gamma=2, population variance
        "thirdparty": {"m0": 2, **_HALVING},
    }

    def __init__(self, config: VigorConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        budget = self.rollouts_per_step
        if vigor_step_cost(config, 1) > budget:
            raise ValueError(
                f"vigor: one prompt already costs {vigor_step_cost(config, 1)} rollouts over "
                f"{config.rounds} rounds (m0={config.m0}, gamma={config.gamma}), more than "
                f"rollouts_per_step={budget}"
            )
        lo, hi = (
            1,
            budget // config.m0,
        )  # cost is non-decreasing in N: binary search the largest fit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if vigor_step_cost(config, mid) <= budget:
                lo = mid
            else:
                hi = mid - 1
        self.batch_prompts = lo
        self.round_rollouts = config.rollouts_per_round()
        self._batch: list[int] = []
        self._outcomes: dict[int, list[Outcome]] = {}
        self._active: list[int] = []
        self._round = 0
        self._stopped_all_zero = False
        self._totals = {"rounds": 0, "kept": 0, "dropped": 0, "all_zero_stops": 0}

    @property
    def max_step_rollouts(self) -> int:
        return self.rollouts_per_step

    @property
    def min_step_rollouts(self) -> int:
        """The first round (``m0`` each for the step's prompts, fewer when the pool is smaller);
        later rounds may stop early."""
        return min(self.batch_prompts, self.source.num_prompts) * self.round_rollouts[0]

    def _start_step(self) -> None:
        self._batch = []
        self._outcomes = {}
        self._active = []
        self._round = 0
        self._stopped_all_zero = False

    def _ask(self) -> Ask | None:
        if self._round == 0:
            self._batch = self.source.take(self.batch_prompts)
            self._active = list(self._batch)
            return self._round_ask()
        if self._round >= self.config.rounds or not self._active:
            return None
        scores = np.array([self._variance(p) for p in self._active])
        if self.config.all_zero == "stop" and not np.any(scores > 0):
            if not self._stopped_all_zero:
                self._stopped_all_zero = True
                self._totals["all_zero_stops"] += 1
            return None
        keep = math.ceil(self.config.alpha * len(self._active) - 1e-9)
        remaining = self.rollouts_per_step - self.ledger.step_rollouts
        keep = min(keep, remaining // self.round_rollouts[self._round])
        if keep <= 0:
            return None
        if self.config.tie_break == "random":
            ties = self.rng.random(len(self._active))
        else:
            ties = np.arange(len(self._active), dtype=float)
        order = np.lexsort((ties, -scores))  # last key is primary: variance desc, then tie key
        self._active = [self._active[i] for i in order[:keep]]
        return self._round_ask()

    def _round_ask(self) -> Ask | None:
        if not self._active:
            return None
        m = self.round_rollouts[self._round]
        phase = f"round{self._round}"
        self._round += 1
        self._totals["rounds"] += 1
        return Ask(tuple(AskItem(p, m, phase) for p in self._active))

    def _variance(self, prompt: int) -> float:
        # exact for integer rewards: equal variances tie and the tie rule decides, not rounding
        return reward_variance(np.concatenate([o.rewards for o in self._outcomes[prompt]]))

    def _tell(self, outcomes: list[Outcome]) -> None:
        for o in outcomes:
            self._outcomes.setdefault(o.prompt_id, []).append(o)

    def _train_groups(self) -> list[Group]:
        kept = set(self._active)
        self._totals["kept"] += len(kept)
        self._totals["dropped"] += len(self._batch) - len(kept)
        return [
            merge_outcomes(p, self._outcomes[p])
            for p in self._batch
            if p in self._outcomes and (self.config.train_dropped or p in kept)
        ]

    def stats(self) -> dict[str, float]:
        return {
            **super().stats(),
            "batch_prompts": len(self._batch),
            "rounds": self._round,
            "kept": len(self._active),
            "dropped": len(self._batch) - len(self._active),
            "all_zero_stop": int(self._stopped_all_zero),
            **{f"total_{k}": v for k, v in self._totals.items()},
        }

    def _state(self) -> dict[str, Any]:
        return {
            "batch": list(self._batch),
            "outcomes": [
                outcome_to_json(o) for p in self._batch for o in self._outcomes.get(p, [])
            ],
            "active": list(self._active),
            "round": self._round,
            "stopped_all_zero": self._stopped_all_zero,
            "totals": dict(self._totals),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self._batch = [int(p) for p in state["batch"]]
        self._outcomes = {}
        for o in map(outcome_from_json, state["outcomes"]):
            self._outcomes.setdefault(o.prompt_id, []).append(o)
        self._active = [int(p) for p in state["active"]]
        self._round = int(state["round"])
        self._stopped_all_zero = bool(state["stopped_all_zero"])
        self._totals = {k: int(v) for k, v in state["totals"].items()}
