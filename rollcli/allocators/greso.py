"""GRESO: skip prompts whose recent groups were all solved or all failed; refill until B are informative.

GRESO (Infini-AI-Lab/GRESO; ``verl/trainer/ttis/presampling_selector.py`` and
``verl/trainer/ppo/ray_trainer.py``) keeps, per prompt, the trace of the mean reward of every
group it was *rolled out* with (a skipped prompt adds nothing). Before a prompt is rolled out:

* ``c_e`` = the number of consecutive most-recent trace entries with mean >= ``easy_mean``
  (0.98); the prompt is skipped as easy with probability ``1 - max(p_easy ** c_e, min_keep)``;
* otherwise, only if the last entry is <= ``hard_mean`` (0.11), ``c_h`` = the consecutive
  most-recent entries <= ``hard_mean``; skipped as hard with probability
  ``1 - max(p_hard ** c_h, min_keep)``. A prompt never rolled out is never skipped.

The two runs are all of the trace the rule reads, so they are kept as two counters per prompt
(``c_e`` resets on an entry below ``easy_mean``, ``c_h`` on one above ``hard_mean``).
Survivors get ``n`` rollouts each; groups whose rewards are all equal are dropped; rounds repeat
until ``B = rollouts_per_step // n`` informative groups exist. The first round of a step rolls
out ``ceil(sampling_factor * B)`` prompts; each later round
``min(max_round, max(min_round, int(remaining / (1 - z) / n * margin)))``, with ``remaining``
the missing rollouts and ``z`` the last round's zero-variance share; when that estimate is
``<= max_round`` the round is the last (the step trains on what exists). Surplus informative
groups are dropped. Once per step, after the first epoch, ``p_easy`` / ``p_hard`` move by
``p_step`` towards the targets ``target_zero_variance / 3`` (easy share: all-correct groups) and
``target_zero_variance * 2 / 3`` (hard share: all-wrong groups) of the step's rolled-out groups,
clamped to ``[p_min, p_max]``. Every generated rollout is counted, so one step may cost up to
``max_rounds`` rounds of ``max_round`` prompts: the stated bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._common import check_at_least, check_choice, check_fraction
from rollcli.allocators.api import AllocatorError, Ask, AskItem, BaseAllocator, Group, Outcome
from rollcli.allocators.registry import register_allocator
from rollcli.allocators.state import array_from_json, array_to_json, group_from_json, group_to_json

__all__ = [
    "GresoConfig",
    "GresoAllocator",
    "adapt_probability",
    "next_round_size",
    "share32",
    "skip_probabilities",
]


@dataclass(frozen=True)
class GresoConfig:
    """GRESO; defaults are the published Qwen2.5-Math settings (train 256, sampling 384, n 8).

    Train batch ``B = rollouts_per_step // n`` informative groups. Round sizes are fractions of
    ``B`` (the official code's 384 and 64 prompts at ``B = 256``).
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    # added after specs were written: left out of dumped specs at its default (job ids)
    LATE_KNOBS: ClassVar[tuple[str, ...]] = ("trace_rewards",)

    kind: Literal["greso"] = "greso"
    n: int = 8
    sampling_factor: float = 1.5
    min_sampling_factor: float = 0.25
    margin: float = 1.25
    p_easy: float = 0.5
    p_hard: float = 0.5
    adapt: bool = True
    target_zero_variance: float = 0.25
    p_step: float = 0.01
    p_min: float = 0.05
    p_max: float = 0.95
    min_keep: float = 0.01
    easy_mean: float = 0.98
    hard_mean: float = 0.11
    loader_batch: int = 0
    max_rounds: int = 10
    on_max_rounds: Literal["error", "stop"] = "error"
    trace_rewards: Literal["raw", "official"] = "raw"

    def __post_init__(self) -> None:
        if self.n < 2:
            raise ValueError(
                f"n must be >= 2 (a group of one rollout never has spread), got {self.n}"
            )
        if not 0.0 < self.min_sampling_factor <= self.sampling_factor:
            raise ValueError(
                "need 0 < min_sampling_factor <= sampling_factor, got "
                f"min_sampling_factor={self.min_sampling_factor}, sampling_factor={self.sampling_factor}"
            )
        if not self.margin > 0.0:
            raise ValueError(f"margin must be > 0, got {self.margin}")
        if not 0.0 <= self.p_min <= self.p_max <= 1.0:
            raise ValueError(
                f"need 0 <= p_min <= p_max <= 1, got p_min={self.p_min}, p_max={self.p_max}"
            )
        check_fraction(self, "p_easy", "p_hard", "target_zero_variance", "p_step")
        if not 0.0 < self.min_keep <= 1.0:
            raise ValueError(f"min_keep must be in (0, 1], got {self.min_keep}")
        if not 0.0 <= self.hard_mean < self.easy_mean <= 1.0:
            raise ValueError(
                "need 0 <= hard_mean < easy_mean <= 1, got "
                f"hard_mean={self.hard_mean}, easy_mean={self.easy_mean}"
            )
        if self.loader_batch < 0:
            raise ValueError(
                f"loader_batch must be >= 0 (0: exact round sizes), got {self.loader_batch}"
            )
        check_at_least(self, 1, "max_rounds")
        check_choice("on_max_rounds", self.on_max_rounds, ["error", "stop"])
        check_choice("trace_rewards", self.trace_rewards, ["raw", "official"])


# -- the official rules, as pure functions (tests/allocators/test_greso_official.py holds
# -- them against a transcription of the official code) ---------------------------------------


def share32(count: int, total: int) -> float:
    """``count / total`` as the official metrics compute it: a float32 tensor quotient.

    The zero-variance share and the easy/hard shares come from ``int_tensor.sum() / n`` in
    torch (float32) and go on as Python floats; the round-size and adaptation rules then compare
    and truncate them, so the float32 rounding is kept to decide the same way at the edges.
    """
    return float(np.float32(count) / np.float32(total))


def skip_probabilities(
    easy_run: np.ndarray, hard_run: np.ndarray, p_easy: float, p_hard: float, min_keep: float
) -> np.ndarray:
    """The probability of skipping each prompt before rollout, from its two trace runs.

    ``1 - max(p_easy ** c_e, min_keep)`` where ``c_e > 0``, ``1 - max(p_hard ** c_h, min_keep)``
    where ``c_h > 0``, 0 elsewhere (never rolled out, or neither run). The runs exclude each
    other (the last entry cannot be both >= easy_mean and <= hard_mean). Powers are taken per
    distinct run length with Python floats, as the official code does, so the values are the same.
    """
    out = np.zeros(len(easy_run), dtype=float)
    for runs, p in ((easy_run, p_easy), (hard_run, p_hard)):
        mask = runs > 0
        if mask.any():
            lengths, where = np.unique(runs[mask], return_inverse=True)
            table = np.array([1.0 - max(p ** int(c), min_keep) for c in lengths.tolist()])
            out[mask] = table[where]
    return out


def next_round_size(
    remaining_rollouts: int,
    zero_variance_share: float,
    *,
    n: int,
    max_round: int,
    min_round: int,
    margin: float,
) -> tuple[int, bool]:
    """The next round's prompt count and whether it is the step's last round.

    The official ``int(remaining / (1 - z) / n * 1.25)``, clamped to ``[min_round, max_round]``;
    an estimate ``<= max_round`` makes it the last round. A round whose groups all had zero
    variance (``z = 1``, where the official code divides by zero) asks ``max_round`` again.
    """
    if zero_variance_share >= 1.0:
        return max_round, False
    estimate = int(remaining_rollouts / (1 - zero_variance_share) / n * margin)
    return max(min(estimate, max_round), min_round), estimate <= max_round


def adapt_probability(
    p: float, share: float, target: float, *, step: float, p_min: float, p_max: float
) -> float:
    """One adaptation of ``p_easy`` or ``p_hard``: a share at or above its target skips more."""
    if share >= target:
        return max(p - step, p_min)
    return min(p + step, p_max)


_COUNTERS = (
    "rounds",
    "drawn",
    "skipped_easy",
    "skipped_hard",
    "rolled_out",
    "informative",
    "surplus",
)


@register_allocator
class GresoAllocator(BaseAllocator):
    """Probabilistic pre-rollout skipping plus refill rounds (see the module docstring)."""

    config_class = GresoConfig
    presets = {
        # Qwen2.5-Math-1.5B and -7B on DAPO-Math + MATH: train 256, sampling 384, floor 64, n 8
        # (train-scripts/math_qwen_{1_5b,7b}_dm_greso.sh)
        "paper-qwen-math": {"n": 8, "sampling_factor": 1.5, "min_sampling_factor": 0.25},
        # DeepSeek-R1-Distill-Qwen-1.5B: train 128, sampling 192, the same floor of 64 prompts
        # (train-scripts/deepseek_qwen_1_5b_dm_greso.sh)
        "paper-r1-distill-1.5b": {"n": 8, "sampling_factor": 1.5, "min_sampling_factor": 0.5},
        # the official round assembly as well: skip-filtered loader batches of 32 prompts
        # (data.train_batch_size=32) gathered until the round size is reached
        "official-qwen-math": {
            "n": 8,
            "sampling_factor": 1.5,
            "min_sampling_factor": 0.25,
            "loader_batch": 32,
        },
    }

    # the launch scripts named above: train batch 256 (Qwen-Math), 128 (R1-Distill)
    preset_prompts_per_step = {
        "paper-qwen-math": 256,
        "paper-r1-distill-1.5b": 128,
        "official-qwen-math": 256,
    }

    def __init__(self, config: GresoConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.batch_prompts = self.prompts_per_step(config.n, f"n={config.n}")
        self.max_round = _prompts(config.sampling_factor, self.batch_prompts)
        self.min_round = _prompts(config.min_sampling_factor, self.batch_prompts)
        num = self.source.num_prompts
        self._easy_run = np.zeros(num, dtype=np.int64)
        self._hard_run = np.zeros(num, dtype=np.int64)
        self.p_easy = float(config.p_easy)
        self.p_hard = float(config.p_hard)
        self._totals = dict.fromkeys(_COUNTERS, 0)
        self._adapted = 0
        self._reset_step()

    @property
    def max_step_rollouts(self) -> int:
        """``max_rounds`` rounds of ``max_round`` prompts (plus the loader-batch overshoot)."""
        overshoot = max(self.config.loader_batch - 1, 0)
        return self.config.max_rounds * (self.max_round + overshoot) * self.config.n

    def _reset_step(self) -> None:
        self._kept: list[Group] = []
        self._next_size = self.max_round
        self._last = False
        self._done = False
        self._counts = dict.fromkeys(_COUNTERS, 0)
        # the official shares: sum over rounds of share32(k, m) * rollouts, over all rollouts
        self._easy_num = self._hard_num = 0.0
        self._total_num = 0
        self._zero_share = 0.0

    def _start_step(self) -> None:
        self._reset_step()

    # -- one step -------------------------------------------------------------------------
    def _ask(self) -> Ask | None:
        if self._done:
            return None
        if self._counts["rounds"] >= self.config.max_rounds:
            if self.config.on_max_rounds == "stop":
                self._done = True
                return None
            raise AllocatorError(
                f"greso: only {len(self._kept)} of {self.batch_prompts} informative groups after "
                f"{self._counts['rounds']} rounds ({self.ledger.step_rollouts} rollouts) in step "
                f"{self.step}; the prompts are too easy or too hard for n={self.config.n}. Raise "
                "max_rounds or set on_max_rounds=stop."
            )
        prompts = self._draw_round(self._next_size)
        if not prompts:
            self._done = True
            return None
        self._counts["rounds"] += 1
        n = self.config.n
        return Ask(tuple([AskItem(p, n, "main") for p in prompts]))

    def _draw_round(self, size: int) -> list[int]:
        """Up to ``size`` prompts that survive the skip rule, drawn in epoch order.

        At most one pass over the active pool per round: when skipping leaves fewer survivors
        (a small or mostly skipped pool), the round rolls out the ones it found.
        """
        cfg = self.config
        chosen: list[int] = []
        seen: set[int] = set()
        limit = self.source.num_active
        drawn = 0
        while len(chosen) < size and drawn < limit:
            want = cfg.loader_batch or size - len(chosen)
            taken = self.source.take(min(want, limit - drawn))
            if not taken:
                break
            drawn += len(taken)
            # a prompt handed out again after an epoch boundary inside this round is already in it
            fresh = [p for p in taken if p not in seen]
            ids = np.asarray(fresh, dtype=np.int64)
            skip = skip_probabilities(
                self._easy_run[ids], self._hard_run[ids], self.p_easy, self.p_hard, cfg.min_keep
            )
            skipped = self.rng.random(len(ids)) < skip
            self._counts["skipped_easy"] += int(
                np.count_nonzero(skipped & (self._easy_run[ids] > 0))
            )
            self._counts["skipped_hard"] += int(
                np.count_nonzero(skipped & (self._hard_run[ids] > 0))
            )
            # the ledger's "skipped": the generation uniform GRPO would have spent on them
            self.ledger.record_skipped(int(np.count_nonzero(skipped)) * cfg.n)
            kept = ids[~skipped].tolist()
            chosen += kept
            seen.update(fresh)
        self._counts["drawn"] += drawn
        return chosen

    def _tell(self, outcomes: list[Outcome]) -> None:
        cfg, n = self.config, self.config.n
        ids = np.fromiter((o.prompt_id for o in outcomes), np.int64, len(outcomes))
        rewards = np.concatenate([o.rewards for o in outcomes]).reshape(len(outcomes), n)
        # the trace entry: the group's mean reward, a float32 mean as in the official trainer;
        # "official" reads a reward below 1 as the official 0.1 of a formatted wrong answer
        scored = rewards.astype(np.float32)
        if cfg.trace_rewards == "official":
            scored = np.where(rewards >= 1.0, np.float32(1.0), np.float32(0.1))
        means = scored.mean(axis=1, dtype=np.float32).astype(float)
        self._easy_run[ids] = np.where(means >= cfg.easy_mean, self._easy_run[ids] + 1, 0)
        self._hard_run[ids] = np.where(means <= cfg.hard_mean, self._hard_run[ids] + 1, 0)
        hi, lo = rewards.max(axis=1), rewards.min(axis=1)
        informative = hi > lo
        for o, keep in zip(outcomes, informative.tolist(), strict=True):
            if keep:
                self._kept.append(Group(o.prompt_id, o.refs, o.rewards))
        m = len(outcomes)
        easy = int(np.count_nonzero(lo >= 1.0))
        hard = int(np.count_nonzero(hi <= 0.0))
        self._zero_share = share32(m - int(np.count_nonzero(informative)), m)
        self._easy_num += share32(easy, m) * (m * n)
        self._hard_num += share32(hard, m) * (m * n)
        self._total_num += m * n
        self._counts["rolled_out"] += m
        self._counts["informative"] += int(np.count_nonzero(informative))
        if len(self._kept) >= self.batch_prompts or self._last:
            self._done = True
            return
        self._next_size, self._last = next_round_size(
            (self.batch_prompts - len(self._kept)) * n,
            self._zero_share,
            n=n,
            max_round=self.max_round,
            min_round=self.min_round,
            margin=cfg.margin,
        )

    def _train_groups(self) -> list[Group]:
        groups, surplus = self._kept[: self.batch_prompts], self._kept[self.batch_prompts :]
        self._counts["surplus"] = len(surplus)
        self._kept = []
        cfg = self.config
        if cfg.adapt and self.source.epoch > 0 and self._total_num:
            step = {"step": cfg.p_step, "p_min": cfg.p_min, "p_max": cfg.p_max}
            target = cfg.target_zero_variance
            self.p_hard = adapt_probability(self.p_hard, self._hard_share(), target * 2 / 3, **step)
            self.p_easy = adapt_probability(self.p_easy, self._easy_share(), target / 3, **step)
            self._adapted += 1
        for key in _COUNTERS:
            self._totals[key] += self._counts[key]
        return groups

    def _easy_share(self) -> float:
        return self._easy_num / self._total_num if self._total_num else 0.0

    def _hard_share(self) -> float:
        return self._hard_num / self._total_num if self._total_num else 0.0

    # -- reporting and state ----------------------------------------------------------------
    def skip_probabilities(self, prompt_ids: Any) -> np.ndarray:
        """The skip probability each prompt would get if drawn now (for inspection and tests)."""
        ids = np.asarray(prompt_ids, dtype=np.int64)
        return skip_probabilities(
            self._easy_run[ids], self._hard_run[ids], self.p_easy, self.p_hard, self.config.min_keep
        )

    def stats(self) -> dict[str, float]:
        return {
            **super().stats(),
            **self._counts,
            "easy_share": self._easy_share(),
            "hard_share": self._hard_share(),
            "zero_var_share_last_round": self._zero_share,
            "p_easy": self.p_easy,
            "p_hard": self.p_hard,
            "adaptations": self._adapted,
            **{f"total_{k}": v for k, v in self._totals.items()},
        }

    def _state(self) -> dict[str, Any]:
        return {
            "easy_run": array_to_json(self._easy_run),
            "hard_run": array_to_json(self._hard_run),
            "p_easy": self.p_easy,
            "p_hard": self.p_hard,
            "adapted": self._adapted,
            "totals": dict(self._totals),
            "kept": [group_to_json(g) for g in self._kept],
            "next_size": self._next_size,
            "last": self._last,
            "done": self._done,
            "counts": dict(self._counts),
            "easy_num": self._easy_num,
            "hard_num": self._hard_num,
            "total_num": self._total_num,
            "zero_share": self._zero_share,
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self._easy_run = array_from_json(state["easy_run"])
        self._hard_run = array_from_json(state["hard_run"])
        self.p_easy = float(state["p_easy"])
        self.p_hard = float(state["p_hard"])
        self._adapted = int(state["adapted"])
        self._totals = {k: int(state["totals"][k]) for k in _COUNTERS}
        self._kept = [group_from_json(g) for g in state["kept"]]
        self._next_size = int(state["next_size"])
        self._last = bool(state["last"])
        self._done = bool(state["done"])
        self._counts = {k: int(state["counts"][k]) for k in _COUNTERS}
        self._easy_num = float(state["easy_num"])
        self._hard_num = float(state["hard_num"])
        self._total_num = int(state["total_num"])
        self._zero_share = float(state["zero_share"])


def _prompts(factor: float, batch_prompts: int) -> int:
    """``ceil(factor * B)``, at least 1 (1.5 x 256 = 384, 0.25 x 256 = 64 exactly)."""
    return max(1, math.ceil(factor * batch_prompts - 1e-9))
