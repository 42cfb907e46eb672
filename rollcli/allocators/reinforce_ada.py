"""Reinforce-Ada (RLHFlow/Reinforce-Ada): adaptive rounds per prompt, a balanced kept set, and
an advantage against the success rate of every sample drawn for the prompt.

One step, as ``RayPPOTrainer._generate_multi_round_adaptive_downsampling`` does it
(``verl/trainer/ppo/ray_trainer.py``): the batch's ``B`` prompts are *active*; each round asks
``round_repeat`` rollouts of every active prompt, for at most ``max_rounds`` rounds. A rollout
is *positive* when its reward is ``> positive_threshold``. Every rollout of a round is cached
and counted, in generation order, even when the prompt's target is met within the round. After
each round a prompt *finishes*:

* ``choice="balanced"``: once it has ``>= num_keep // 2`` positives and ``>= num_keep -
  num_keep // 2`` negatives; it keeps the first ``num_keep // 2`` positives and the first
  ``num_keep - num_keep // 2`` negatives;
* ``choice="positive_focused"``: once it has one positive; it keeps up to ``num_keep // 2``
  positives, fills up with negatives, then with more positives (the official
  ``downsample_cache``).

A prompt still active after the last round keeps up to ``num_keep`` cached samples by the
official fallback (:func:`kept_counts`): positives first, then negatives, as the official code
concatenates them. Each prompt trains one group of its kept samples. With ``global_stats``
(``algorithm.global_stat_est``) the group carries ``baseline = positives / samples drawn`` over
every sample drawn for it this step (0 when at most one sample was drawn, as the official
``_compute_with_global_stats``), so every backend trains on ``r - baseline`` with no std
division (``norm_adv_by_std_in_grpo=False`` in the published script); without it the group
gets GRPO's advantage over the kept samples.

The batch is ``B = rollouts_per_step // num_keep`` prompts: the budget is what trains (the
published 512 prompts x 4 kept = 2048, GRPO n=4's batch); a step may generate up to
``B * max_rounds * round_repeat`` rollouts, all counted by the ledger.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._common import check_at_least, check_choice
from rollcli.allocators.api import Ask, AskItem, BaseAllocator, Group, Outcome
from rollcli.allocators.registry import register_allocator
from rollcli.allocators.state import outcome_from_json, outcome_to_json

__all__ = ["ReinforceAdaConfig", "ReinforceAdaAllocator", "kept_counts", "global_baseline"]

CHOICES = ["balanced", "positive_focused"]


@dataclass(frozen=True)
class ReinforceAdaConfig:
    """Reinforce-Ada; defaults are the published script's (``scripts/run_reinforce_ada.sh`` and
    ``AlgoConfig``): 4 rounds of 8, positive = reward > 0.7, balanced 2 + 2, global statistics.
    Train batch ``B = rollouts_per_step // num_keep`` prompts (512 in the paper)."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    kind: Literal["reinforce_ada"] = "reinforce_ada"
    num_keep: int = 4  # actor_rollout_ref.rollout.n: samples kept per prompt
    round_repeat: int = 8
    max_rounds: int = 4
    positive_threshold: float = 0.7
    choice: Literal["balanced", "positive_focused"] = "balanced"
    global_stats: bool = True

    def __post_init__(self) -> None:
        check_at_least(self, 1, "num_keep", "round_repeat", "max_rounds")
        if not math.isfinite(self.positive_threshold):
            raise ValueError(f"positive_threshold must be finite, got {self.positive_threshold}")
        check_choice("choice", self.choice, CHOICES)


def kept_counts(
    num_pos: Any, num_neg: Any, num_keep: int, choice: str, finished: Any
) -> tuple[np.ndarray, np.ndarray]:
    """How many cached positives and negatives each prompt keeps (the official rules).

    Elementwise over arrays of counts. ``finished``: the prompt met its target
    (``downsample_cache(target_total=num_keep)``); otherwise the fallback after the last round.
    Both take positives first, then negatives, each in generation order, and fill a shortfall
    with more positives, else more negatives.
    """
    num_pos = np.asarray(num_pos, dtype=np.int64)
    num_neg = np.asarray(num_neg, dtype=np.int64)
    finished = np.asarray(finished, dtype=bool)
    half = num_keep // 2
    drawn = num_pos + num_neg
    # the fallback's size and targets; positive-focused only falls back on prompts with no
    # positive drawn (one positive finishes it), where its ratio rule gives 1 and take - 1
    take = np.minimum(num_keep, drawn)
    if choice == "positive_focused":
        ratio = np.divide(num_pos, drawn, out=np.zeros(drawn.shape), where=drawn > 0)
        target_pos = np.maximum(np.minimum(np.ceil(ratio * num_keep), take - 1), 1).astype(np.int64)
        target_neg = take - target_pos
    else:  # balanced: the loop's targets, still bound when the official fallback runs
        target_pos = np.full(drawn.shape, half, dtype=np.int64)
        target_neg = np.full(drawn.shape, num_keep - half, dtype=np.int64)
    pos = np.minimum(num_pos, target_pos)
    neg = np.minimum(num_neg, target_neg)
    # downsample_cache for finished prompts: up to half positives, the rest negatives
    done_pos = np.minimum(half, num_pos)
    pos = np.where(finished, done_pos, pos)
    neg = np.where(finished, np.minimum(num_keep - done_pos, num_neg), neg)
    total = np.where(finished, num_keep, take)
    short = pos + neg < total
    more_pos = short & (num_pos > pos)
    more_neg = short & ~more_pos & (num_neg > neg)
    gap = total - pos - neg
    pos = pos + np.where(more_pos, np.minimum(num_pos - pos, gap), 0)
    neg = neg + np.where(more_neg, np.minimum(num_neg - neg, gap), 0)
    return pos, neg


def global_baseline(num_pos: Any, num_neg: Any) -> Any:
    """The success rate over every sample drawn; 0 for at most one sample (the official
    ``_compute_with_global_stats``). Elementwise over arrays; a float for two numbers."""
    pos = np.asarray(num_pos, dtype=float)
    drawn = pos + np.asarray(num_neg, dtype=float)
    rate = np.divide(pos, drawn, out=np.zeros(drawn.shape), where=drawn > 1)
    return float(rate) if rate.ndim == 0 else rate


@register_allocator
class ReinforceAdaAllocator(BaseAllocator):
    """Rounds for still-active prompts until each has its kept set (see the module docstring)."""

    config_class = ReinforceAdaConfig
    presets = {
        # scripts/run_reinforce_ada.sh: Qwen2.5-Math-1.5B, 512 prompts (rollouts_per_step 2048)
        "paper": {"choice": "balanced"},
        "paper-positive-focused": {"choice": "positive_focused"},
    }

    preset_prompts_per_step = {"paper": 512, "paper-positive-focused": 512}

    def __init__(self, config: ReinforceAdaConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        if self.rollouts_per_step % config.num_keep:
            raise ValueError(
                f"reinforce_ada: rollouts_per_step={self.rollouts_per_step} is not divisible "
                f"by num_keep={config.num_keep}"
            )
        self.batch_prompts = self.rollouts_per_step // config.num_keep
        if config.choice == "balanced":
            self._need = (config.num_keep // 2, config.num_keep - config.num_keep // 2)
        else:
            self._need = (1, 0)
        self._start_step()
        self._totals = {"prompts": 0, "finished": 0, "fallback": 0, "rounds": 0}

    @property
    def max_step_rollouts(self) -> int:
        """Every prompt active in every round: ``B * max_rounds * round_repeat``."""
        return self.batch_prompts * self.config.max_rounds * self.config.round_repeat

    def _start_step(self) -> None:
        self._batch: list[int] = []
        # every round of the step: the batch positions asked and their outcomes, in ask order
        self._rounds: list[tuple[list[int], list[Outcome]]] = []
        self._matrices: list[np.ndarray] = []  # each round's rewards (a cache of _rounds)
        self._num_pos = np.zeros(0, dtype=np.int64)
        self._num_neg = np.zeros(0, dtype=np.int64)
        self._finished = np.zeros(0, dtype=bool)
        self._round = 0
        self._active: list[int] = []  # batch positions asked in the pending round

    def _ask(self) -> Ask | None:
        if self._round == 0 and not self._batch:
            self._batch = self.source.take(self.batch_prompts)
            size = len(self._batch)
            self._num_pos = np.zeros(size, dtype=np.int64)
            self._num_neg = np.zeros(size, dtype=np.int64)
            self._finished = np.zeros(size, dtype=bool)
        if self._round >= self.config.max_rounds:
            return None
        self._active = np.flatnonzero(~self._finished).tolist()
        if not self._active:
            return None
        phase = f"round{self._round}"
        self._round += 1
        self._totals["rounds"] += 1
        n, batch = self.config.round_repeat, self._batch
        return Ask(tuple([AskItem(batch[i], n, phase) for i in self._active]))

    def _tell(self, outcomes: list[Outcome]) -> None:
        active = np.asarray(self._active, dtype=np.int64)
        self._rounds.append((self._active, outcomes))
        rewards = self._round_rewards(len(self._rounds) - 1)
        pos = (rewards > self.config.positive_threshold).sum(axis=1)
        self._num_pos[active] += pos
        self._num_neg[active] += rewards.shape[1] - pos
        need_pos, need_neg = self._need
        done = (self._num_pos[active] >= need_pos) & (self._num_neg[active] >= need_neg)
        self._finished[active] |= done

    def _train_groups(self) -> list[Group]:
        """One group per prompt: its kept positives, then its kept negatives, each in generation
        order. Vectorised over every row (prompt x round) of the step, since a step can hold a
        thousand prompts: a rollout's rank among its prompt's positives (negatives) is what the
        prompt's earlier rows drew plus its rank inside its own row."""
        cfg = self.config
        size = len(self._batch)
        if not self._rounds:
            self._count_step(size)
            return []
        num_pos, num_neg = self._num_pos, self._num_neg
        keep_pos, keep_neg = kept_counts(num_pos, num_neg, cfg.num_keep, cfg.choice, self._finished)
        rewards = np.concatenate([self._round_rewards(r) for r in range(len(self._rounds))])
        where = np.concatenate([np.asarray(a, dtype=np.int64) for a, _ in self._rounds])
        positive = rewards > cfg.positive_threshold
        row_pos = positive.sum(axis=1)
        row_neg = rewards.shape[1] - row_pos
        before_pos = _drawn_before(where, row_pos, num_pos)
        before_neg = _drawn_before(where, row_neg, num_neg)
        rank = np.where(
            positive,
            before_pos[:, None] + np.cumsum(positive, axis=1) - 1,
            before_neg[:, None] + np.cumsum(~positive, axis=1) - 1,
        )
        limit = np.where(positive, keep_pos[where, None], keep_neg[where, None])
        flat = np.flatnonzero(rank < limit)
        row, col = np.divmod(flat, rewards.shape[1])
        refs = list(chain.from_iterable(o.refs for _, outs in self._rounds for o in outs))
        where, negative, rank, rewards = (
            where[row],
            ~positive[row, col],
            rank[row, col],
            rewards[row, col],
        )
        order = np.lexsort((rank, negative, where))  # by prompt: positives, then negatives
        flat = flat[order]
        kept_refs = tuple([refs[k] for k in flat.tolist()])
        kept_rewards = rewards[order]
        counts = keep_pos + keep_neg
        baselines: list[Any] = (
            global_baseline(self._num_pos, self._num_neg).tolist()
            if cfg.global_stats
            else [None] * size
        )
        if counts.min() == counts.max() > 0:  # the usual case: every prompt keeps num_keep
            k = int(counts[0])
            groups = list(
                map(
                    Group,
                    self._batch,
                    zip(*[iter(kept_refs)] * k, strict=True),
                    kept_rewards.reshape(size, k),
                    baselines,
                )
            )
        else:
            groups, start = [], 0
            for b, end in enumerate(np.cumsum(counts).tolist()):
                if end > start:
                    groups.append(
                        Group(
                            self._batch[b],
                            kept_refs[start:end],
                            kept_rewards[start:end],
                            baselines[b],
                        )
                    )
                start = end
        self._count_step(size)
        return groups

    def _round_rewards(self, r: int) -> np.ndarray:
        """Round ``r``'s rewards as (prompts asked x round_repeat), computed once per round."""
        while len(self._matrices) <= r:
            outcomes = self._rounds[len(self._matrices)][1]
            rewards = np.concatenate([o.rewards for o in outcomes]).astype(float, copy=False)
            self._matrices.append(rewards.reshape(len(outcomes), -1))
        return self._matrices[r]

    def _count_step(self, size: int) -> None:
        finished = int(self._finished.sum())
        self._totals["prompts"] += size
        self._totals["finished"] += finished
        self._totals["fallback"] += size - finished

    def stats(self) -> dict[str, float]:
        """Per step: ``rounds``, ``finished`` (met the target), ``fallback`` (did not),
        ``no_positive`` (not one positive drawn), ``draws_per_prompt``, ``success_rate`` (the
        mean baseline); and ``total_*`` counters."""
        size = len(self._batch)
        drawn = self._num_pos + self._num_neg
        rates = global_baseline(self._num_pos, self._num_neg)
        return {
            **super().stats(),
            "batch_prompts": size,
            "rounds": self._round,
            "finished": int(self._finished.sum()),
            "fallback": size - int(self._finished.sum()),
            "no_positive": int((self._num_pos == 0).sum()),
            "draws_per_prompt": float(drawn.mean()) if size else 0.0,
            "success_rate": float(rates.mean()) if size else 0.0,
            **{f"total_{k}": v for k, v in self._totals.items()},
        }

    def _state(self) -> dict[str, Any]:
        return {
            "batch": list(self._batch),
            "rounds": [
                [list(active), [outcome_to_json(o) for o in outs]] for active, outs in self._rounds
            ],
            "num_pos": self._num_pos.tolist(),
            "num_neg": self._num_neg.tolist(),
            "finished": self._finished.tolist(),
            "round": self._round,
            "active": list(self._active),
            "totals": dict(self._totals),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self._batch = [int(p) for p in state["batch"]]
        self._rounds = [
            ([int(i) for i in active], [outcome_from_json(o) for o in outs])
            for active, outs in state["rounds"]
        ]
        self._matrices = []
        self._num_pos = np.asarray(state["num_pos"], dtype=np.int64)
        self._num_neg = np.asarray(state["num_neg"], dtype=np.int64)
        self._finished = np.asarray(state["finished"], dtype=bool)
        self._round = int(state["round"])
        self._active = [int(i) for i in state["active"]]
        self._totals = {k: int(v) for k, v in state["totals"].items()}


def _drawn_before(where: np.ndarray, per_row: np.ndarray, per_prompt: np.ndarray) -> np.ndarray:
    """For rows in round order (``where[i]``: the row's prompt, ``per_row[i]``: what it drew),
    how much the same prompt drew in its earlier rows; ``per_prompt`` is each prompt's total."""
    by_prompt = np.argsort(where, kind="stable")  # a prompt's rows keep their round order
    counts = per_row[by_prompt]
    out = np.empty_like(per_row)
    out[by_prompt] = (
        np.cumsum(counts) - counts - (np.cumsum(per_prompt) - per_prompt)[where[by_prompt]]
    )
    return out
