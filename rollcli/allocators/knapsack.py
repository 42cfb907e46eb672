"""Knapsack RL: each step, split the batch's rollouts across its prompts by an exact knapsack.

Each step takes ``B = rollouts_per_step // n`` prompts in epoch order and one generation call
gives them ``len(batch) * n`` rollouts in all, split by :func:`~rollcli.allocators.knapsack_dp.
knapsack_budget` (liziniu/KnapsackRL, ``exploration_utils.py``): a prompt with fewer than
``min_buffer_length`` rewards seen gets ``n``; the others get ``min_n`` (or ``negative_n`` /
``positive_n`` at p = 0 / 1) and the DP spends the rest on prompts with 0 < p < 1 (at most
``max_n`` each). Every prompt's rollouts train as one GRPO group, whatever their number.

A prompt's ``p`` is its state in the official ``rl_dataset.py``: after each visit, the success
rate of that visit, or, when the visit had fewer than ``reward_buffer_length`` rewards, the
mean of the prompt's last ``reward_buffer_length`` rewards (``estimate`` picks the other
official modes). Rewards count as successes clipped to [0, 1] (the official asserts rewards
in {-1, 0, 1} and maps -1 to 0, which this equals).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._common import check_at_least, check_choice
from rollcli.allocators._one_ask import OneAskStep
from rollcli.allocators.api import AskItem, Group, Outcome
from rollcli.allocators.knapsack_dp import knapsack_budget
from rollcli.allocators.registry import register_allocator
from rollcli.allocators.state import PromptHistory, prompt_dict_from_json, prompt_dict_to_json

__all__ = ["KnapsackConfig", "KnapsackAllocator"]


@dataclass(frozen=True)
class KnapsackConfig:
    """Knapsack RL; defaults are the published 7B setting (``run_knapsack_grpo_7b.sh``) except
    ``arithmetic``: ``numpy``, the value every knapsack result before issue 29 used (the
    published runs executed the numba kernel: preset ``paper-7b``)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["knapsack"] = "knapsack"
    n: int = 8
    min_n: int = 2
    max_n: int = 128
    negative_n: int = 2
    positive_n: int = 2
    alpha: float = 0.9
    cost_estimation: Literal["probability", "expectation"] = "probability"
    min_buffer_length: int = 8
    reward_buffer_length: int = 16
    estimate: Literal["robust_visit", "visit", "window"] = "robust_visit"
    allow_fallback: bool = True
    excess_to_unready: bool = True
    arithmetic: Literal["numpy", "numba"] = "numpy"

    def __post_init__(self) -> None:
        check_at_least(self, 1, "n")
        if not 1 <= self.min_n <= self.n:
            raise ValueError(f"min_n must be in [1, n={self.n}], got {self.min_n}")
        if self.max_n <= self.min_n:
            raise ValueError(f"max_n must be > min_n={self.min_n}, got {self.max_n}")
        for knob in ("negative_n", "positive_n"):
            value = getattr(self, knob)
            if not 0 <= value <= self.n:
                raise ValueError(f"{knob} must be in [0, n={self.n}], got {value}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        check_at_least(self, 0, "min_buffer_length")
        check_at_least(self, 1, "reward_buffer_length")
        check_choice("cost_estimation", self.cost_estimation, ["probability", "expectation"])
        check_choice("estimate", self.estimate, ["robust_visit", "visit", "window"])
        check_choice("arithmetic", self.arithmetic, ["numpy", "numba"])


_PAPER = {
    "n": 8,
    "min_n": 2,
    "max_n": 128,
    "negative_n": 2,
    "positive_n": 2,
    "alpha": 0.9,
    "min_buffer_length": 8,
    "reward_buffer_length": 16,
    "estimate": "robust_visit",
}


def _mean(values: list[float], whole: bool) -> float:
    """``np.mean`` of ``values``: for whole numbers every summation order is exact, so the
    Python sum (much faster on a few values) gives the same float."""
    return sum(values) / len(values) if whole else float(np.mean(values))


_STAT_KEYS = ("effective", "dp_budget", "fallback", "excess", "max_budget", "min_budget", "ready")


@register_allocator
class KnapsackAllocator(OneAskStep):
    """One ask per step with knapsack-chosen rollout counts; every group trains."""

    config_class = KnapsackConfig
    stats_key = "stats"
    presets = {
        # Qwen2.5-Math-7B, DAPO-17K: examples/knapsack_trainer/run_knapsack_grpo_7b.sh, as it
        # executed: its vLLM environment imports numba (vLLM's requirements/cuda.txt), and at
        # 256 prompts x 8 the official size switch picks the numba kernel (issue 29, mend b)
        "paper-7b": {**_PAPER, "arithmetic": "numba"},
        # the same name as before issue 29 for specs that asked for the kernel explicitly
        "paper-7b-numba": {**_PAPER, "arithmetic": "numba"},
        # the official numpy loop (an environment without numba); paper-7b before issue 29
        "paper-7b-numpy": {**_PAPER, "arithmetic": "numpy"},
    }

    preset_prompts_per_step = {"paper-7b": 256, "paper-7b-numba": 256}  # REFERENCE.md §1

    def __init__(self, config: KnapsackConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.batch_prompts = self.prompts_per_step(config.n, f"n={config.n}")
        self._history = PromptHistory(config.reward_buffer_length)
        self._p: dict[int, float] = {}  # prompt -> its success-rate estimate (the official ema)
        self._last = dict.fromkeys(_STAT_KEYS, 0)

    @property
    def max_step_rollouts(self) -> int:
        """Exactly the budget: the knapsack splits ``B * n`` rollouts, never more."""
        return self.batch_prompts * self.config.n

    def _step_items(self) -> list[AskItem]:
        c = self.config
        prompts = self.source.take(self.batch_prompts)
        if not prompts:
            return []
        get_p, count = self._p.get, self._history.count
        p = np.fromiter((get_p(q, 0.0) for q in prompts), dtype=np.float64, count=len(prompts))
        seen = np.fromiter((count(q) for q in prompts), dtype=np.int64, count=len(prompts))
        ready = seen >= c.min_buffer_length
        result = knapsack_budget(
            p,
            ready,
            n=c.n,
            min_n=c.min_n,
            max_n=c.max_n,
            negative_n=c.negative_n,
            positive_n=c.positive_n,
            alpha=c.alpha,
            cost_estimation=c.cost_estimation,
            allow_fallback=c.allow_fallback,
            excess_to_unready=c.excess_to_unready,
            arithmetic=c.arithmetic,
        )
        budget = result.budget
        self._last = {
            "effective": result.effective,
            "dp_budget": result.dp_budget,
            "fallback": int(result.fallback),
            "excess": result.excess,
            "max_budget": int(budget.max()),
            "min_budget": int(budget.min()),
            "ready": int(ready.sum()),
        }
        return [
            AskItem(q, int(k), "main")
            for q, k in zip(prompts, budget.tolist(), strict=False)
            if k > 0
        ]

    def _tell(self, outcomes: list[Outcome]) -> None:
        self._groups.extend(Group(o.prompt_id, o.refs, o.rewards) for o in outcomes)
        if not outcomes:
            return
        # the official update_sample_state, once per prompt with this visit's rewards
        flat = np.clip(np.concatenate([o.rewards for o in outcomes]).astype(float), 0.0, 1.0)
        whole = bool(np.array_equal(flat, np.rint(flat)))
        values = flat.tolist()
        mode, length = self.config.estimate, self.config.reward_buffer_length
        start = 0
        for o in outcomes:
            visit = values[start : start + o.num_rollouts]
            start += o.num_rollouts
            self._history.extend(o.prompt_id, visit)
            if mode == "window" or (mode == "robust_visit" and len(visit) < length):
                visit = list(self._history.get(o.prompt_id))  # the last `length` rewards
            self._p[o.prompt_id] = _mean(visit, whole)

    def _state(self) -> dict[str, Any]:
        return {
            **super()._state(),
            "history": self._history.state_dict(),
            "p": prompt_dict_to_json(self._p),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        super()._load_state(state)
        self._history.load_state_dict(state["history"])
        self._p = prompt_dict_from_json(state["p"], float)
        self._last = {k: int(self._last[k]) for k in _STAT_KEYS}
