"""The generic step loop: ask -> generate -> tell ... -> update, with one metrics row per step.

:class:`TrainLoop` drives any :class:`~rollcli.backends.api.BaseBackend` with any allocator
exactly as ``rollcli/allocators/api.py`` describes, times each phase, and builds the metrics
rows of docs/CONTRACTS.md §4. It knows nothing of files: :mod:`rollcli.train.job` writes the
rows and checkpoints. Everything in a row except ``wall_s`` and ``time/*`` is a function of the
seeds and the loop/allocator/backend state, so a resumed run reproduces it bit-exactly.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rollcli.allocators.api import BaseAllocator, Group
from rollcli.backends.api import BaseBackend

__all__ = ["TrainLoop", "mean_group_variance"]

# allocator.stats() keys that get top-level columns; every other key becomes alloc/<key>.
_TOP_LEVEL_STATS = ("evicted", "deferred", "epoch")
_FLOAT64 = np.dtype(np.float64)


def mean_group_variance(reward_arrays: Sequence[np.ndarray]) -> float:
    """Mean over groups of the population variance of each group's rewards (0 for no groups)."""
    if not reward_arrays:
        return 0.0
    rewards, sizes = _flatten(reward_arrays)
    return _mean_group_variance(rewards, sizes)


def _flatten(reward_arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """All rewards as one float64 array, and each array's size."""
    sizes = np.array([len(r) for r in reward_arrays], dtype=np.int64)
    return np.concatenate(reward_arrays).astype(np.float64, copy=False), sizes


def _mean_group_variance(rewards: np.ndarray, sizes: np.ndarray) -> float:
    gid = np.repeat(np.arange(sizes.size), sizes)
    safe = np.maximum(sizes, 1)
    mean = np.bincount(gid, rewards, sizes.size) / safe
    centred = rewards - mean[gid]
    var = np.bincount(gid, centred * centred, sizes.size) / safe
    return float(var.mean())


def _same_arrays(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> bool:
    """Whether ``a`` and ``b`` hold the very same array objects in the same order."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _reward_sum(reward_arrays: Sequence[np.ndarray], flat: np.ndarray) -> float:
    """``sum(np.sum(r) for r in reward_arrays)`` exactly, from their concatenation when that is safe.

    Integer-valued rewards (binary, or small scores) are summed without rounding in any order,
    so one vectorised sum gives the same float; other rewards keep the per-array order.
    """
    if {r.dtype for r in reward_arrays} == {_FLOAT64}:
        magnitude = float(np.abs(flat).sum())
        if magnitude < 2.0**53 and np.array_equal(flat, np.rint(flat)):
            return float(flat.sum()) + 0.0  # + 0.0: a zero total is +0.0, as sum() from 0 gives
    return float(sum(float(np.sum(r)) for r in reward_arrays))


class TrainLoop:
    """Runs training steps of one job and returns their metrics rows (see module docstring)."""

    def __init__(
        self,
        backend: BaseBackend,
        allocator: BaseAllocator,
        *,
        num_steps: int,
        eval_every: int,
    ) -> None:
        if num_steps < 1:
            raise ValueError(f"budget.steps must be >= 1, got {num_steps}")
        if eval_every < 0:
            raise ValueError(f"eval.every must be >= 0, got {eval_every}")
        self.backend = backend
        self.allocator = allocator
        self.num_steps = num_steps
        self.eval_every = eval_every
        self.step = 0  # steps completed
        self.wall_s = 0.0  # cumulative generate + allocate + update seconds

    # -- state --------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step, "wall_s": self.wall_s}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.step = int(state["step"])
        self.wall_s = float(state["wall_s"])

    @property
    def done(self) -> bool:
        return self.step >= self.num_steps

    # -- rows ---------------------------------------------------------------------------------
    def initial_row(self) -> dict[str, Any]:
        """The ``step: 0`` row: nothing generated yet, the initial evaluation."""
        row: dict[str, Any] = {
            "step": 0,
            "cum_rollouts": 0,
            "cum_tokens": 0,
            "wall_s": 0.0,
            "policy_version": self.backend.policy_version,
        }
        self._evaluate_into(row)
        return row

    def should_evaluate(self, step: int) -> bool:
        if step == self.num_steps:
            return True
        return self.eval_every > 0 and step % self.eval_every == 0

    def run_step(self) -> dict[str, Any]:
        """Run the next training step and return its metrics row."""
        if self.done:
            raise RuntimeError(f"all {self.num_steps} steps are done")
        backend, allocator = self.backend, self.allocator
        step = self.step + 1
        t_start = time.perf_counter()
        t_gen = t_alloc = 0.0

        t0 = time.perf_counter()
        allocator.start_step(step - 1)
        generated: list[np.ndarray] = []
        while True:
            ask = allocator.ask()
            t1 = time.perf_counter()
            t_alloc += t1 - t0
            if ask is None:
                break
            outcomes = backend.generate(ask)
            t0 = time.perf_counter()
            t_gen += t0 - t1
            allocator.tell(outcomes)
            generated += [o.rewards for o in outcomes]
        t0 = time.perf_counter()
        groups = allocator.train_groups()
        t1 = time.perf_counter()
        update_metrics = backend.update(groups)
        t2 = time.perf_counter()
        live = allocator.live_refs()
        t3 = time.perf_counter()
        backend.retain(live)
        t4 = time.perf_counter()
        t_alloc += (t1 - t0) + (t3 - t2)
        t_update = (t2 - t1) + (t4 - t3)

        self.step = step
        self.wall_s += t_gen + t_alloc + t_update
        row = self._step_row(step, generated, groups, update_metrics)
        row["wall_s"] = self.wall_s
        row["time/generate_s"] = t_gen
        row["time/allocate_s"] = t_alloc
        row["time/update_s"] = t_update
        if self.should_evaluate(step):
            self._evaluate_into(row)
        else:
            row["time/eval_s"] = 0.0
        row["time/step_s"] = time.perf_counter() - t_start
        return row

    def _step_row(
        self,
        step: int,
        generated: list[np.ndarray],
        groups: list[Group],
        update_metrics: Mapping[str, Any],
    ) -> dict[str, Any]:
        ledger = self.allocator.ledger
        if generated:
            flat, sizes = _flatten(generated)
            num_generated = int(sizes.sum())
            reward_sum = _reward_sum(generated, flat)
            gen_reward_var = _mean_group_variance(flat, sizes)
        else:
            num_generated, reward_sum, gen_reward_var = 0, 0.0, 0.0
        trained = [g.rewards for g in groups]
        stats = self.allocator.stats()
        row: dict[str, Any] = {
            "step": step,
            "cum_rollouts": int(ledger.num_rollouts),
            "cum_tokens": int(ledger.num_tokens),
            "step_rollouts": int(ledger.step_rollouts),
            "step_tokens": int(ledger.step_tokens),
            "reward_mean": reward_sum / num_generated if num_generated else 0.0,
            "reward_var": gen_reward_var
            if _same_arrays(trained, generated)
            else mean_group_variance(trained),
            "gen_reward_var": gen_reward_var,
            "zero_var_frac": (
                ledger.step_zero_variance_groups / ledger.step_groups if ledger.step_groups else 0.0
            ),
            "prompts_trained": len(groups),
            "rollouts_trained": int(ledger.step_trained_rollouts),
            "cum_rollouts_trained": int(ledger.num_trained_rollouts),
            "evicted": int(stats.get("evicted", 0)),
            "deferred": int(stats.get("deferred", 0)),
            "epoch": int(stats.get("epoch", 0)),
            "policy_version": int(self.backend.policy_version),
        }
        for key, value in stats.items():
            if key not in _TOP_LEVEL_STATS:
                row[f"alloc/{key}"] = _scalar(value)
        for key, value in update_metrics.items():
            row[f"train/{key}"] = _scalar(value)
        return row

    def _evaluate_into(self, row: dict[str, Any]) -> None:
        t0 = time.perf_counter()
        result = self.backend.evaluate()
        if "accuracy" not in result:
            raise ValueError(f"{self.backend.kind} backend's evaluate() returned no 'accuracy'")
        for key, value in result.items():
            row[f"eval/{key}"] = _scalar(value)
        row["time/eval_s"] = time.perf_counter() - t0


def _scalar(value: Any) -> Any:
    """numpy scalars -> Python numbers so rows serialise as plain JSON."""
    if isinstance(value, np.generic):
        return value.item()
    return value
