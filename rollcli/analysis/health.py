"""Warnings where a comparison is void or a run misbehaved (docs/report.md, "Warnings").

Each function looks at loaded run data or a finished analysis and returns one plain sentence per
problem; :func:`rollcli.analysis.analyze.analyze_run` adds them to ``RunAnalysis.warnings``, so
they reach the terminal, the table's files and ``report.json``'s ``warnings``.

- :func:`drained_pools`: a train job with steps that generated nothing: its prompt pool was
  emptied by eviction (always solved) or deferral (too hard), so from that step on it no longer
  learns, while its rollout count stands still and its curve looks cheap;
- :func:`baseline_missed_target`: the baseline's own seed-mean curve never reached the target
  (with ``at: value``, or a smoothed target), so every speedup is a bound or meaningless.
"""

from __future__ import annotations

from dataclasses import dataclass

from rollcli.analysis.load import JobMetrics, RunData

__all__ = ["DrainedPool", "find_drained_pool", "drained_pools", "baseline_missed_target"]


@dataclass(frozen=True)
class DrainedPool:
    """Steps of one train job that generated no rollout."""

    allocator: str
    seed: int
    first_step: int  # the first step that generated nothing
    empty_steps: int  # how many steps generated nothing
    last_step: int  # the job's last step
    base_seed: int | None = None  # the base model, when the run varies it (three pc/seed 0 jobs)

    def describe(self) -> str:
        span = (
            f"at step {self.first_step}"
            if self.empty_steps == 1
            else f"at {self.empty_steps} steps from step {self.first_step}"
        )
        on = "" if self.base_seed is None else f" on base model {self.base_seed}"
        return (
            f"{self.allocator}/seed {self.seed}{on} generated nothing {span} "
            f"(of {self.last_step}): "
            "its prompt pool was drained by eviction or deferral, so it stopped learning while "
            "its rollout count stood still; read its speedup and final accuracy with that in mind"
        )


def find_drained_pool(job: JobMetrics) -> DrainedPool | None:
    """The steps (>= 1) whose ``step_rollouts`` is 0, or None when every step generated."""
    steps, generated = job.series("step_rollouts")
    empty = steps[generated <= 0]
    if not empty.size:
        return None
    return DrainedPool(
        job.allocator, job.seed, int(empty[0]), int(empty.size), job.num_steps, job.base_seed
    )


def drained_pools(run: RunData) -> list[DrainedPool]:
    """Every train job of ``run`` with steps that generated nothing, in allocator/seed order."""
    out = []
    for name in run.allocators:
        for job in run.jobs_of(name):
            if (found := find_drained_pool(job)) is not None:
                out.append(found)
    return out


def baseline_missed_target(
    baseline: str, reached: bool, target_value: float | None, at: str
) -> str | None:
    """A sentence when the baseline's own seed-mean curve never reached the target."""
    if reached or target_value is None:
        return None
    why = "above its seed-mean curve" if at == "value" else "not reached on its seed-mean curve"
    return (
        f"the baseline {baseline} never reached the target {target_value:.4f} ({why}): every "
        "speedup is against a bound, not a measurement; lower the target (--target) or run "
        "the baseline longer"
    )
