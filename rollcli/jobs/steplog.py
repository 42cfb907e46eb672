"""A train job's log for people: one line per step on stdout, which ``rollcli logs RUN JOB``
prints and ``-f`` follows (``jobs/<id>/logs/stdout.log``; the metrics stay in metrics.jsonl).

    step 12/150  generated 160 (1.9k in all)  trained 64  reward 0.73  0.43 s  eta 1m
    step 20/150  ...  eval/accuracy 0.812  (one eval value: eval/accuracy if there is one)
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from rollcli.store.progress import fmt_eta
from rollcli.text import fmt_count

__all__ = ["StepLog", "step_line"]


def step_line(row: dict[str, Any], total_steps: int | None, eta_s: float | None = None) -> str:
    """One metrics row as a line (the keys of docs/CONTRACTS.md §4 that are there)."""
    step = row.get("step")
    parts = [f"step {step}/{total_steps}" if total_steps else f"step {step}"]
    if step == 0:
        parts.append("before training")
    if "step_rollouts" in row:
        parts.append(
            f"generated {fmt_count(row['step_rollouts'])} ({fmt_count(row.get('cum_rollouts'))} "
            "in all)"
        )
    if "rollouts_trained" in row:
        parts.append(f"trained {fmt_count(row['rollouts_trained'])}")
    if isinstance(row.get("reward_mean"), (int, float)):
        parts.append(f"reward {row['reward_mean']:.2f}")
    if isinstance(row.get("time/step_s"), (int, float)):
        parts.append(f"{row['time/step_s']:.2f} s")
    if eta_s is not None:
        parts.append(f"eta {fmt_eta(eta_s)}")
    evals = sorted(k for k in row if k.startswith("eval/") and isinstance(row[k], (int, float)))
    if evals:  # one: eval/accuracy where there is one (the rest is in metrics.jsonl)
        key = "eval/accuracy" if "eval/accuracy" in evals else evals[0]
        parts.append(f"{key} {row[key]:.3f}")
    return "  ".join(parts)


class StepLog:
    """A metrics-row callback that writes :func:`step_line` for every row, flushed, with an ETA
    from the steps this process has run so far."""

    def __init__(
        self,
        total_steps: int | None,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total_steps = total_steps
        self.stream = stream
        self.clock = clock
        self._first: tuple[int, float] | None = None

    def __call__(self, row: dict[str, Any]) -> None:
        step = row.get("step")
        eta = None
        if isinstance(step, int):
            now = self.clock()
            if self._first is None:
                self._first = (step, now)
            elif self.total_steps and step > self._first[0]:
                per_step = (now - self._first[1]) / (step - self._first[0])
                eta = per_step * max(0, self.total_steps - step)
        stream = self.stream or sys.stdout
        print(step_line(row, self.total_steps, eta), file=stream, flush=True)
