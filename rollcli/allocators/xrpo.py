"""XRPO's allocator: phased rollouts to the prompts whose Student-t interval would shrink most.

XRPO (Bamba et al., arXiv 2510.06672, ICML 2026; code UIUC-MLSys/XRPO, which could not be
fetched). Only the abstract, third-party summaries and the reviews of its ICLR 2026 submission
could be read, not the method section (docs/allocators.md says what each part rests on). What
they state: a *hierarchical rollout planner* spends the step's rollout budget in *three phases*
(the first cannot use the priority; the statistics are re-estimated between phases), each time
on the prompts with the largest priority

    Pi_q = h_q(n_q) - h_q(n_q + 1) + lam * sqrt(log(1 + T) / n_q),
    h_q(n) = t_{1 - alpha/2, n - 1} * s_q / sqrt(n),

the expected shrinkage of the half-width of the Student-t confidence interval of prompt ``q``'s
mean reward from one more rollout, plus an exploration bonus (``s_q``: the sample standard
deviation of ``q``'s ``n_q`` rewards). rollcli builds it as follows (the budget split across
phases, ``T`` and the defaults are rollcli's reading):

1. **Base phase.** ``B = rollouts_per_step // n_mean`` prompts in epoch order get ``n_init >= 2``
   rollouts each (phase ``base``), so every ``s_q`` and ``t_{., n_q - 1}`` is defined.
2. **Allocation phases** ``2 .. num_phases``. Each spends ``ceil(left / phases left)`` of the
   budget ``B * n_mean`` not yet spent, one rollout at a time to the largest ``Pi_q`` (``n_q``
   counting the rollouts planned so far in the phase; ``s_q`` from the rewards told so far;
   ties to the earlier prompt), at most ``n_max`` rollouts a prompt in all (phase ``phase<k>``).
   ``Pi_q`` falls with ``n_q``, so that greedy is the top entries of the priority table.
3. A zero-variance prompt (``s_q = 0``) has no interval to shrink: only the bonus ranks it (the
   paper's in-context seeding of all-wrong prompts is out of scope). ``T`` is the training step
   (1-based; ``bonus_clock="rollouts"``: the step's rollouts so far).

Every prompt's rollouts of all phases train as one GRPO group.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._common import (
    KeptGroups,
    check_at_least,
    check_choice,
    greedy_counts,
    merge_outcomes,
)
from rollcli.allocators._student_t import t_critical
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

__all__ = ["XrpoConfig", "XrpoAllocator", "half_width", "xrpo_priority", "xrpo_extras"]


@dataclass(frozen=True)
class XrpoConfig:
    """XRPO's allocator; no published settings could be read, so the defaults are rollcli's
    (GRPO's n = 8 a prompt on average: 4 base rollouts, the rest over two allocation phases;
    ``alpha = 0.05``, a 95 % interval)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["xrpo"] = "xrpo"
    n_mean: int = 8
    n_init: int = 4
    n_max: int = 16
    num_phases: int = 3
    alpha: float = 0.05
    lam: float = 0.1
    bonus_clock: Literal["step", "rollouts"] = "step"

    def __post_init__(self) -> None:
        check_at_least(self, 2, "n_init", "num_phases")
        if self.n_mean < self.n_init:
            raise ValueError(f"n_mean must be >= n_init={self.n_init}, got {self.n_mean}")
        if self.n_max < self.n_mean:
            raise ValueError(f"n_max must be >= n_mean={self.n_mean}, got {self.n_max}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if not self.lam >= 0.0:
            raise ValueError(f"lam must be >= 0, got {self.lam}")
        check_choice("bonus_clock", self.bonus_clock, ("step", "rollouts"))


@functools.lru_cache(maxsize=64)
def _critical_table(alpha: float, upto: int) -> np.ndarray:
    """``table[n] = t_{1 - alpha/2, n - 1} / sqrt(n)`` for ``n = 2 .. upto`` (0 and 1: NaN)."""
    table = np.full(upto + 1, np.nan)
    for n in range(2, upto + 1):
        table[n] = t_critical(alpha, n - 1) / math.sqrt(n)
    table.flags.writeable = False
    return table


def half_width(s: np.ndarray, n: np.ndarray, alpha: float) -> np.ndarray:
    """``h(n) = t_{1 - alpha/2, n - 1} s / sqrt(n)``, the half-width of the ``1 - alpha``
    Student-t interval of a mean from ``n >= 2`` rewards of sample standard deviation ``s``."""
    n = np.asarray(n, dtype=np.int64)
    if n.size and int(n.min()) < 2:
        raise ValueError("the Student-t half-width needs n >= 2 rewards")
    table = _critical_table(float(alpha), max(int(n.max(initial=2)), 2))
    return np.asarray(s, dtype=np.float64) * table[n]


def xrpo_priority(
    s: np.ndarray, n: np.ndarray, clock: float, alpha: float, lam: float
) -> np.ndarray:
    """``Pi = h(n) - h(n + 1) + lam sqrt(log(1 + clock) / n)`` per prompt (``n >= 2``)."""
    n = np.asarray(n, dtype=np.int64)
    shrink = half_width(s, n, alpha) - half_width(s, n + 1, alpha)
    return shrink + lam * np.sqrt(math.log1p(clock) / n)


def xrpo_extras(
    s: np.ndarray,
    n: np.ndarray,
    quota: int,
    cap: np.ndarray,
    clock: float,
    alpha: float,
    lam: float,
) -> np.ndarray:
    """Extra rollouts per prompt: ``quota`` single rollouts, each to the largest priority
    ``Pi(s_q, n_q + m_q)`` given the ``m_q`` planned so far, at most ``cap_q`` a prompt (ties:
    the earlier prompt). Each row of priorities falls with ``m``, so the greedy is the ``quota``
    largest entries of the ``(prompts, max cap)`` table (stable, row-major)."""
    s = np.asarray(s, dtype=np.float64)
    n = np.asarray(n, dtype=np.int64)
    cap = np.maximum(np.asarray(cap, dtype=np.int64), 0)
    k = len(n)
    depth = int(cap.max(initial=0))
    if k == 0 or depth == 0 or quota <= 0:
        return np.zeros(k, dtype=np.int64)
    m = np.arange(depth, dtype=np.int64)[None, :]
    table = xrpo_priority(np.repeat(s, depth), (n[:, None] + m).ravel(), clock, alpha, lam)
    return greedy_counts(np.where(m < cap[:, None], table.reshape(k, depth), -np.inf), quota)


@register_allocator
class XrpoAllocator(KeptGroups, BaseAllocator):
    """``n_init`` rollouts a prompt, then the rest of the budget in phases by XRPO's priority."""

    config_class = XrpoConfig

    def __init__(self, config: XrpoConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.batch_prompts = self.prompts_per_step(config.n_mean, f"n_mean={config.n_mean}")
        self._phase = 0
        self._budget = 0
        self._parts: dict[int, list[Outcome]] = {}  # prompt -> its outcomes this step
        self._groups: list[Group] = []
        self._last = {"phases": 0.0, "extra": 0.0, "max_n": 0.0, "zero_var_extra": 0.0}

    @property
    def max_step_rollouts(self) -> int:
        """Exactly the budget ``B * n_mean`` (``n_max >= n_mean``, so the caps never bind all)."""
        return self.batch_prompts * self.config.n_mean

    def _start_step(self) -> None:
        self._phase = 0
        self._budget = 0
        self._parts = {}
        self._groups = []
        self._last = {**self._last, "phases": 0.0, "extra": 0.0, "zero_var_extra": 0.0}

    def _ask(self) -> Ask | None:
        cfg = self.config
        if self._phase == 0:
            prompts = self.source.take(self.batch_prompts)
            if not prompts:
                return None
            self._phase = 1
            self._parts = {p: [] for p in prompts}
            self._budget = len(prompts) * cfg.n_mean
            self._last["phases"] = 1.0
            return Ask(tuple(AskItem.many(prompts, cfg.n_init, "base")))
        while self._parts and self._phase < cfg.num_phases:
            self._phase += 1
            items = self._phase_items()
            if items:
                self._last["phases"] = float(self._phase)
                return Ask(tuple(items))
        self._close()
        return None

    def _counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The step's prompts, their rollouts so far and their rewards' sample std (ddof 1)."""
        ids = np.fromiter(self._parts, np.int64, len(self._parts))
        owners, sizes, rewards = [], [], []
        for i, parts in enumerate(self._parts.values()):
            for o in parts:
                owners.append(i)
                sizes.append(o.num_rollouts)
                rewards.append(o.rewards)
        k = len(ids)
        if not rewards:
            return ids, np.zeros(k, np.int64), np.zeros(k)
        r = np.concatenate(rewards).astype(np.float64, copy=False)
        own = np.repeat(np.asarray(owners, np.int64), sizes)
        n = np.bincount(own, minlength=k)
        s1 = np.bincount(own, r, k)
        s2 = np.bincount(own, r * r, k)
        with np.errstate(divide="ignore", invalid="ignore"):
            var = (n * s2 - s1 * s1) / (n * (n - 1.0))
        return ids, n, np.sqrt(np.where(n >= 2, np.maximum(var, 0.0), 0.0))

    def _phase_items(self) -> list[AskItem]:
        cfg = self.config
        ids, n, s = self._counts()
        if ids.size == 0:
            return []
        left = self._budget - int(n.sum())
        # a prompt with fewer than 2 rewards told has no interval: it gets no extras
        cap = np.where(n >= 2, cfg.n_max - n, 0)
        phases_left = cfg.num_phases - self._phase + 1
        quota = -(-left // phases_left)
        clock = float(self.step + 1) if cfg.bonus_clock == "step" else float(n.sum())
        extras = xrpo_extras(s, np.maximum(n, 2), quota, cap, clock, cfg.alpha, cfg.lam)
        self._last["extra"] += float(extras.sum())
        self._last["zero_var_extra"] += float(extras[s == 0.0].sum())
        on = extras > 0
        return AskItem.many(ids[on].tolist(), extras[on].tolist(), f"phase{self._phase}")

    def _tell(self, outcomes: list[Outcome]) -> None:
        for o in outcomes:
            self._parts[o.prompt_id].append(o)

    def _close(self) -> None:
        """Every prompt's rollouts of all phases train as one group."""
        if not self._parts:
            return
        sizes = [sum(o.num_rollouts for o in parts) for parts in self._parts.values()]
        self._groups += [merge_outcomes(p, parts) for p, parts in self._parts.items() if parts]
        self._last["max_n"] = float(max(sizes))
        self._parts = {}

    def _train_groups(self) -> list[Group]:
        self._close()
        return super()._train_groups()

    def stats(self) -> dict[str, float]:
        return {**super().stats(), **self._last}

    def _state(self) -> dict[str, Any]:
        return {
            "phase": self._phase,
            "budget": self._budget,
            "parts": prompt_dict_to_json(self._parts, outcomes_to_json),
            "groups": [group_to_json(g) for g in self._groups],
            "last": dict(self._last),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self._phase = int(state["phase"])
        self._budget = int(state["budget"])
        self._parts = prompt_dict_from_json(state["parts"], outcomes_from_json)
        self._groups = [group_from_json(g) for g in state["groups"]]
        self._last = dict(state["last"])
