"""HORA: extra rollouts where the posterior chance of at least one correct rollout grows most.

HORA (Hit-Utility Optimal Rollout Allocation, arXiv 2605.07114; no public code). Only the
abstract could be read: *hit utility* is "the posterior probability that at least one rollout in
a proposed additional allocation for a prompt will be correct", HORA "maximizes total posterior
hit utility within each allocation batch" under a uniform (Beta(1, 1)) prior and leaves the
advantage estimator unchanged. rollcli builds that rule as follows (docs/allocators.md says which
parts are its own reading):

1. **First stage.** ``B = rollouts_per_step // n_mean`` prompts in epoch order get ``n_init``
   rollouts each (phase ``first``).
2. **Posterior.** Each prompt's success probability has ``Beta(a, b)``: ``prior_a + s``,
   ``prior_b + f`` with ``s`` / ``f`` the successes / failures (reward > 0.5) of this step's first
   stage (``use_history``: also every earlier visit's).
3. **Hit utility.** ``U(m) = P(at least one success in m more rollouts) = 1 - B(a, b + m) / B(a, b)``
   under the Beta-binomial posterior predictive; its marginal gain ``U(m + 1) - U(m) =
   a / (a + b + m) * prod_{j < m} (b + j) / (a + b + j)`` falls with ``m``, so greedy is optimal.
4. **Extra stage.** The rest of the budget, ``B * (n_mean - n_init)`` rollouts, goes one at a time
   to the largest marginal gain (ties: the earlier prompt), at most ``n_max`` rollouts a prompt
   in all (phase ``extra``).

Every prompt's rollouts of both stages train as one GRPO group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._common import KeptGroups, check_at_least, greedy_counts, merge_outcomes
from rollcli.allocators.api import Ask, AskItem, BaseAllocator, Group, Outcome
from rollcli.allocators.registry import register_allocator
from rollcli.allocators.state import (
    array_from_json,
    array_to_json,
    group_from_json,
    group_to_json,
    outcome_from_json,
    outcome_to_json,
)

__all__ = ["HoraConfig", "HoraAllocator", "hit_utility", "hit_gains", "hora_extras"]


@dataclass(frozen=True)
class HoraConfig:
    """HORA; no published settings could be read, so the defaults are rollcli's (GRPO's n = 8
    split as 4 first-stage rollouts and 4 extra a prompt on average)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["hora"] = "hora"
    n_mean: int = 8
    n_init: int = 4
    n_max: int = 16
    prior_a: float = 1.0
    prior_b: float = 1.0
    use_history: bool = False

    def __post_init__(self) -> None:
        check_at_least(self, 1, "n_init")
        if self.n_mean < self.n_init:
            raise ValueError(f"n_mean must be >= n_init={self.n_init}, got {self.n_mean}")
        if self.n_max < self.n_mean:
            raise ValueError(f"n_max must be >= n_mean={self.n_mean}, got {self.n_max}")
        for knob in ("prior_a", "prior_b"):
            if not getattr(self, knob) > 0.0:
                raise ValueError(f"{knob} must be > 0, got {getattr(self, knob)}")


def hit_utility(a: float, b: float, m: int) -> float:
    """``P(at least one success in m rollouts)`` under ``p ~ Beta(a, b)``: ``1 - B(a, b+m)/B(a, b)``."""
    survive = 1.0
    for j in range(m):
        survive *= (b + j) / (a + b + j)
    return 1.0 - survive


def hit_gains(a: np.ndarray, b: np.ndarray, depth: int) -> np.ndarray:
    """``(prompts, depth)`` matrix of marginal gains ``U(m + 1) - U(m)`` for ``m = 0 .. depth-1``."""
    m = np.arange(depth, dtype=np.float64)[None, :]
    a = np.asarray(a, dtype=np.float64)[:, None]
    b = np.asarray(b, dtype=np.float64)[:, None]
    step = (b + m) / (a + b + m)  # P(no success at draw m+1 | none before)
    survive = np.ones_like(step)
    if depth > 1:
        survive[:, 1:] = np.cumprod(step[:, :-1], axis=1)
    return survive * (a / (a + b + m))


def hora_extras(a: np.ndarray, b: np.ndarray, budget: int, cap: int) -> np.ndarray:
    """Extra rollouts per prompt: ``budget`` single rollouts, each to the largest marginal hit
    gain (ties to the earlier prompt), at most ``cap`` a prompt. Greedy is optimal because each
    prompt's gains fall with ``m``; taking the ``budget`` largest entries of the gain matrix
    (stable, row-major) is that greedy."""
    if len(a) == 0 or cap <= 0 or budget <= 0:
        return np.zeros(len(a), dtype=np.int64)
    return greedy_counts(hit_gains(a, b, cap), budget)


def _utilities(a: np.ndarray, b: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``hit_utility(a_i, b_i, m_i)`` of every prompt, vectorised."""
    depth = int(m.max()) if m.size else 0
    if depth == 0:
        return np.zeros(len(m))
    gains = hit_gains(a, b, depth)
    return np.where(np.arange(depth)[None, :] < m[:, None], gains, 0.0).sum(axis=1)


@register_allocator
class HoraAllocator(KeptGroups, BaseAllocator):
    """``n_init`` rollouts a prompt, then the rest of the budget by marginal hit utility."""

    config_class = HoraConfig

    def __init__(self, config: HoraConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.batch_prompts = self.prompts_per_step(config.n_mean, f"n_mean={config.n_mean}")
        num = self.source.num_prompts
        self.successes = np.zeros(num)
        self.failures = np.zeros(num)
        self._stage = 0
        self._first: list[Outcome] = []
        self._groups: list[Group] = []
        self._last = {"extra": 0.0, "max_n": 0.0, "hit_utility": 0.0}

    @property
    def max_step_rollouts(self) -> int:
        """Exactly the budget ``B * n_mean`` (caps may leave part of the extras unspent)."""
        return self.batch_prompts * self.config.n_mean

    def _start_step(self) -> None:
        self._stage = 0
        self._first = []
        self._groups = []

    def _ask(self) -> Ask | None:
        cfg = self.config
        if self._stage == 0:
            self._stage = 1
            prompts = self.source.take(self.batch_prompts)
            return Ask(tuple(AskItem.many(prompts, cfg.n_init, "first"))) if prompts else None
        if self._stage == 1:
            self._stage = 2
            return self._extra_ask()
        return None

    def _extra_ask(self) -> Ask | None:
        cfg, first = self.config, self._first
        if not first:
            return None
        ids = np.fromiter((o.prompt_id for o in first), np.int64, len(first))
        rewards = np.concatenate([o.rewards for o in first]).reshape(len(first), cfg.n_init)
        wins = np.count_nonzero(rewards > 0.5, axis=1).astype(np.float64)
        a = cfg.prior_a + wins
        b = cfg.prior_b + (cfg.n_init - wins)
        if cfg.use_history:  # the counts already hold this step's first stage: add the rest
            a = cfg.prior_a + self.successes[ids]
            b = cfg.prior_b + self.failures[ids]
        budget = len(first) * (cfg.n_mean - cfg.n_init)
        extras = hora_extras(a, b, budget, cfg.n_max - cfg.n_init)
        self._last = {
            "extra": float(extras.sum()),
            "max_n": float(cfg.n_init + extras.max()),
            "hit_utility": float(_utilities(a, b, extras).sum()),
        }
        on = extras > 0
        return Ask(tuple(AskItem.many(ids[on].tolist(), extras[on].tolist(), "extra")))

    def _tell(self, outcomes: list[Outcome]) -> None:
        if outcomes:
            ids = np.fromiter((o.prompt_id for o in outcomes), np.int64, len(outcomes))
            sizes = np.fromiter((o.num_rollouts for o in outcomes), np.int64, len(outcomes))
            hits = np.concatenate([o.rewards for o in outcomes]) > 0.5
            starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
            wins = np.add.reduceat(hits.astype(np.float64), starts)
            np.add.at(self.successes, ids, wins)
            np.add.at(self.failures, ids, sizes - wins)
        if self._stage == 1:
            self._first = list(outcomes)
            return
        extra = {o.prompt_id: o for o in outcomes}
        first, self._first = self._first, []
        both = [(o, extra.get(o.prompt_id)) for o in first]
        self._groups += Group.many(
            [o.prompt_id for o in first],
            [o.refs if m is None else o.refs + m.refs for o, m in both],
            [o.rewards if m is None else np.concatenate((o.rewards, m.rewards)) for o, m in both],
        )

    def _train_groups(self) -> list[Group]:
        if self._first:  # the extra stage asked nothing: the first stage trains alone
            self._groups += [merge_outcomes(o.prompt_id, [o]) for o in self._first]
            self._first = []
        return super()._train_groups()

    def stats(self) -> dict[str, float]:
        return {**super().stats(), **self._last}

    def _state(self) -> dict[str, Any]:
        return {
            "successes": array_to_json(self.successes),
            "failures": array_to_json(self.failures),
            "stage": self._stage,
            "first": [outcome_to_json(o) for o in self._first],
            "groups": [group_to_json(g) for g in self._groups],
            "last": dict(self._last),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self.successes = array_from_json(state["successes"])
        self.failures = array_from_json(state["failures"])
        self._stage = int(state["stage"])
        self._first = [outcome_from_json(o) for o in state["first"]]
        self._groups = [group_from_json(g) for g in state["groups"]]
        self._last = dict(state["last"])
