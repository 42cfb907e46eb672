"""The one step routine: ask -> generate -> tell ... -> update, timed, with one metrics row per step.

:class:`TrainLoop` drives any backend with any allocator exactly as
``rollcli/allocators/api.py`` describes, times each phase, and builds the metrics rows of
docs/CONTRACTS.md §4 with :mod:`rollcli.train.rows`. The generic train job (sim, tiny) runs it
through :func:`rollcli.train.job.run_loop_job`; verl's trainer runs the same loop over an adapter
of its worker calls (``rollcli.backends.verl.steps``). It knows nothing of files.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from rollcli.train.rows import eval_columns, initial_row, step_row

if TYPE_CHECKING:  # the loop drives any object with the backend protocol's calls
    from rollcli.allocators.api import BaseAllocator
    from rollcli.backends.api import BaseBackend

__all__ = ["TrainLoop"]


class TrainLoop:
    """Runs training steps of one job and returns their metrics rows (see module docstring).

    ``eval_every``: steps between evaluations, which also run at the last step (0: only at the
    last step; None: never). ``evaluate_initial``: whether the ``step: 0`` row evaluates.
    """

    def __init__(
        self,
        backend: BaseBackend,
        allocator: BaseAllocator,
        *,
        num_steps: int,
        eval_every: int | None,
        evaluate_initial: bool = True,
    ) -> None:
        if num_steps < 1:
            raise ValueError(f"budget.steps must be >= 1, got {num_steps}")
        if eval_every is not None and eval_every < 0:
            raise ValueError(f"eval.every must be >= 0, got {eval_every}")
        self.backend = backend
        self.allocator = allocator
        self.num_steps = num_steps
        self.eval_every = eval_every
        self.evaluate_initial = evaluate_initial
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
        row = initial_row(self.backend.policy_version)
        if self.evaluate_initial:
            self._evaluate_into(row)
        return row

    def should_evaluate(self, step: int) -> bool:
        if self.eval_every is None:
            return False
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

        backend.start_step(step)
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
        row = step_row(
            step,
            ledger=allocator.ledger,
            stats=allocator.stats(),
            generated=generated,
            groups=groups,
            update_metrics=update_metrics,
            policy_version=backend.policy_version,
        )
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

    def _evaluate_into(self, row: dict[str, Any]) -> None:
        t0 = time.perf_counter()
        row.update(eval_columns(self.backend.evaluate(), self.backend.kind))
        row["time/eval_s"] = time.perf_counter() - t0
