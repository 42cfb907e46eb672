"""How a Slurm train job survives its time limit and pre-emption, sized from its step time.

Slurm warns a job with ``USR2`` ``signal_lead_s`` seconds before its time limit (submitit's
``--signal=USR2@90`` by default); the task's runner then asks the job to stop, and the train
loop stops only between steps, checkpoints, and is requeued. On GPUs a step takes minutes, so
with a 90 s warning the step in flight never finishes in time and the job is killed: everything
since the last checkpoint (up to ``checkpoint.every`` steps) is lost at every time limit.

:func:`signal_lead_s` sizes the warning from the step time measured in the run's own
``metrics.jsonl`` rows (the 90th percentile of generate + allocate + update seconds, so a slow
step is covered) plus an allowance for writing the checkpoint: the step in flight finishes and
is saved inside the warning. ``launch.signal_lead_s`` sets it by hand. submitit requeues a
timed-out job at most ``launch.max_requeues`` times (its own default 3 ends a long run).
:func:`preemption_summary` is what ``rollcli plan`` prints: the lead, the expected loss per
interruption, and whether the requeues cover the run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_LEAD_S",
    "PreemptionPlan",
    "measured_step_seconds",
    "plan_preemption",
    "preemption_summary",
    "signal_lead_s",
]

DEFAULT_LEAD_S = 90  # submitit's default, and Slurm's USR2 warning when nothing is measured
SAVE_ALLOWANCE_S = 120  # writing a verl checkpoint (model, optimizer, rollcli rows), generous
REQUEUE_MARGIN_S = 30  # the runner's hand-over to submitit and the requeue itself
MAX_LEAD_S = 65535  # Slurm's limit on --signal's time
LOSS_TARGET_S = 1800  # a pre-emption should cost at most half an hour of compute
_STEP_KEYS = ("time/generate_s", "time/allocate_s", "time/update_s")


def _step_seconds(rows: Iterable[Mapping[str, Any]]) -> list[float]:
    out = []
    for row in rows:
        if int(row.get("step", 0)) <= 0 or not all(k in row for k in _STEP_KEYS):
            continue
        out.append(float(sum(float(row[k]) for k in _STEP_KEYS)))
    return out


def measured_step_seconds(run_dir: Path | None) -> tuple[float | None, int]:
    """The 90th-percentile step time over every train job's rows in ``run_dir`` (None when no
    step has run yet) and how many steps it is measured on."""
    from rollcli.store.atomic import read_jsonl

    if run_dir is None or not (Path(run_dir) / "jobs").is_dir():
        return None, 0
    seconds: list[float] = []
    for metrics in sorted((Path(run_dir) / "jobs").glob("*/metrics.jsonl")):
        try:
            seconds += _step_seconds(read_jsonl(metrics))
        except (OSError, ValueError):
            continue
    if not seconds:
        return None, 0
    seconds.sort()
    return seconds[min(len(seconds) - 1, math.ceil(0.9 * len(seconds)) - 1)], len(seconds)


def signal_lead_s(launch: Mapping[str, Any], step_s: float | None, time_limit_s: int) -> int:
    """Seconds of warning before the time limit: ``launch.signal_lead_s`` when set, else one
    measured step + the checkpoint allowance + the requeue margin (at least 90 s, at most half
    the time limit)."""
    chosen = launch.get("signal_lead_s")
    if chosen is not None:
        return int(chosen)
    if step_s is None:
        return DEFAULT_LEAD_S
    lead = math.ceil(step_s + SAVE_ALLOWANCE_S + REQUEUE_MARGIN_S)
    return int(max(DEFAULT_LEAD_S, min(lead, time_limit_s // 2, MAX_LEAD_S)))


def checkpoint_wait_s(lead_s: int) -> float:
    """How long the runner waits for the job's checkpoint after ``USR2`` (the rest of the lead
    goes to the requeue)."""
    return float(max(lead_s - 15, lead_s * 0.8))


@dataclass(frozen=True)
class PreemptionPlan:
    """The numbers ``rollcli plan`` shows for a Slurm train job."""

    step_s: float | None
    measured_steps: int
    lead_s: int
    checkpoint_every: int
    max_requeues: int
    time_limit_s: int
    steps: int

    @property
    def covers_a_step(self) -> bool:
        """Whether the warning is long enough to finish and save the step in flight."""
        return self.step_s is not None and self.lead_s >= self.step_s + SAVE_ALLOWANCE_S

    @property
    def loss_per_preemption_s(self) -> float | None:
        """Worst-case compute lost when killed without a usable warning: the steps since the
        last checkpoint and the step in flight."""
        return None if self.step_s is None else self.checkpoint_every * self.step_s

    @property
    def run_s(self) -> float | None:
        return None if self.step_s is None else self.steps * self.step_s


def plan_preemption(
    launch: Mapping[str, Any], checkpoint_every: int, steps: int, run_dir: Path | None
) -> PreemptionPlan:
    """The pre-emption numbers of a spec's train jobs (step time measured in ``run_dir``)."""
    from rollcli.launch.sbatch import parse_time_minutes

    time_limit_s = parse_time_minutes(launch.get("time")) * 60
    step_s, measured = measured_step_seconds(run_dir)
    return PreemptionPlan(
        step_s=step_s,
        measured_steps=measured,
        lead_s=signal_lead_s(launch, step_s, time_limit_s),
        checkpoint_every=int(checkpoint_every),
        max_requeues=int(launch.get("max_requeues", 3)),
        time_limit_s=time_limit_s,
        steps=int(steps),
    )


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def preemption_summary(plan: PreemptionPlan) -> list[str]:
    """Plain lines for ``rollcli plan``: lead, loss per interruption, requeue coverage."""
    lines = [f"USR2 warning {plan.lead_s} s before the time limit; up to {plan.max_requeues} "
             "time-limit requeues (launch.max_requeues)"]  # fmt: skip
    if plan.step_s is None:
        lines.append(
            "step time not measured yet (no steps in the run folder): a time limit loses the "
            f"step in flight and up to checkpoint.every={plan.checkpoint_every} step(s); after "
            "a first job has run, `rollcli plan`/`run` size the warning from its steps "
            "(or set launch.signal_lead_s)"
        )
        return lines
    lines.append(f"step time {plan.step_s:.0f} s (90th percentile of {plan.measured_steps} steps)")
    if plan.covers_a_step:
        lines.append("time limit: the step in flight finishes and is saved (no loss)")
    else:
        lines.append(
            f"time limit: the warning is shorter than a step + save: up to "
            f"{plan.checkpoint_every} step(s) lost (~{_minutes(plan.loss_per_preemption_s or 0)}); "
            "raise launch.signal_lead_s"
        )
    lines.append(
        f"pre-emption without warning: up to {plan.checkpoint_every} step(s) lost "
        f"(~{_minutes(plan.loss_per_preemption_s or 0)}, checkpoint.every x step time)"
    )
    if (plan.loss_per_preemption_s or 0) > LOSS_TARGET_S and plan.checkpoint_every > 1:
        every = max(1, int(LOSS_TARGET_S // plan.step_s))
        lines.append(
            f"checkpoint.every: {every} keeps that under {_minutes(LOSS_TARGET_S)} (each "
            "checkpoint costs about one save)"
        )
    useful = max(plan.time_limit_s - plan.lead_s, 1)
    needed = math.ceil((plan.run_s or 0) / useful)
    if needed - 1 > plan.max_requeues:
        lines.append(
            f"the run needs ~{needed} allocations of {_minutes(plan.time_limit_s)} but "
            f"launch.max_requeues={plan.max_requeues} allows {plan.max_requeues + 1}: "
            f"set launch.max_requeues >= {needed - 1}"
        )
    return lines
