"""Rollouts-to-target analysis of a run: the target, the crossings, speedups and intervals.

``analyze_run`` turns a :class:`RunData` into a :class:`RunAnalysis`: per allocator and per x-axis
(cumulative rollouts, tokens, wall-clock seconds), where the seed-mean accuracy curve first reaches
the target, the speedup against the baseline with a bootstrap interval over seeds, each seed's own
crossing and the fraction of seeds that got there; and the context a speedup must be read with:
final and peak accuracy, reward variance, the share of zero-variance groups, time per step.
docs/report.md defines every number."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rollcli.analysis.curves import Bounded, first_crossing, smooth
from rollcli.analysis.health import baseline_missed_target, drained_pools
from rollcli.analysis.load import AXES, JobMetrics, RunData, Unit, load_run, unit_label
from rollcli.analysis.stats import (
    DEFAULT_RESAMPLES,
    SeedCurves,
    bootstrap_speedups,
    censored_median,
    crossings,
    is_balanced,
    ratio,
)

__all__ = [
    "AxisResult",
    "AllocatorResult",
    "RunAnalysis",
    "analyze_run",
    "compute_target",
    "seed_curves",
    "MIN_INTERVAL_SEEDS",
    "MIN_INTERVAL_BASE_MODELS",
    "base_models",
    "too_few_for_interval",
]

# Below this many seeds a side the report gives each seed's own speedup instead of an interval:
# measured coverage of a nominal 95 % interval is ~0.52 at 2 seeds, ~0.75 at 3, 0.88-0.93 at 5
# (tests/analysis/test_analysis_stats.py, docs/report.md "Few seeds").
MIN_INTERVAL_SEEDS = 5
# and, when the run varies the base model, below this many base models (the top level of the
# two-level bootstrap: two draws of it say little about the spread between base models)
MIN_INTERVAL_BASE_MODELS = 3


@dataclass
class AxisResult:
    """Cost-to-target on one x-axis (rollouts, tokens or wall_s) for one allocator."""

    axis: str
    mean_curve: Bounded  # where the seed-mean curve crosses the target: the headline number
    per_seed: dict[Unit, Bounded]  # each seed's own crossing
    median: Bounded  # median of per_seed (descriptive)
    speedup: Bounded  # baseline's mean_curve / this allocator's
    ci: tuple[float, float] | None
    reached: float  # fraction of seeds whose own curve reached the target (NaN without seeds)
    # each seed's own speedup (against the baseline's same seed when it ran it: paired), shown
    # instead of an interval when either side has fewer than MIN_INTERVAL_SEEDS seeds
    seed_speedups: dict[Unit, Bounded] = field(default_factory=dict)
    paired: dict[Unit, bool] = field(default_factory=dict)
    few_seeds: bool = False
    # when the run varies the base model: where the mean curve of each base model's seeds
    # crosses the target (the spread between base models, beside the seeds' own)
    per_base_model: dict[int, Bounded] = field(default_factory=dict)


@dataclass
class AllocatorResult:
    name: str
    kind: str
    is_baseline: bool
    seeds: list[Unit]  # seeds, or (base_seed, seed) when the run varies the base model
    axes: dict[str, AxisResult]
    final_per_seed: dict[Unit, float]
    peak_per_seed: dict[Unit, float]
    reward_var: float
    zero_var_frac: float
    step_time_s: float
    step_time_ratio: float
    tokens_per_step: float
    num_steps: int
    # mean over seeds of each job's totals at its last step (NaN: rows without the key)
    generated_rollouts: float = math.nan
    trained_rollouts: float = math.nan
    generated_tokens: float = math.nan

    @property
    def final_accuracy(self) -> float:
        return _mean(self.final_per_seed.values())

    @property
    def peak_accuracy(self) -> float:
        return _mean(self.peak_per_seed.values())


@dataclass
class RunAnalysis:
    run: RunData
    target_value: float | None
    confidence: float
    allocators: list[AllocatorResult]
    warnings: list[str] = field(default_factory=list)

    @property
    def base_models(self) -> list[int]:
        """The base seeds the run varies (empty: one base model, the usual run)."""
        return base_models(u for r in self.allocators for u in r.seeds)

    @property
    def few_seeds(self) -> bool:
        """Whether some allocator shows per-seed speedups instead of an interval."""
        return any(r.axes["rollouts"].few_seeds for r in self.allocators)

    def get(self, name: str) -> AllocatorResult:
        for result in self.allocators:
            if result.name == name:
                return result
        raise KeyError(f"no allocator {name!r} (have: {', '.join(self.run.allocators)})")


def too_few_for_interval(
    base_units: Sequence[Unit], alloc_units: Sequence[Unit], min_seeds: int = MIN_INTERVAL_SEEDS
) -> bool:
    """Whether a speedup of these units (seeds, or (base model, seed)) gets no interval: under
    ``min_seeds`` units a side, or under MIN_INTERVAL_BASE_MODELS base models when it varies
    them (the report, and the benchmarks, give point estimates then: docs/report.md)."""
    num_models = min(len(base_models(base_units)), len(base_models(alloc_units)))
    return (
        min(len(base_units), len(alloc_units)) < min_seeds
        or 1 < num_models < MIN_INTERVAL_BASE_MODELS
    )


def base_models(units) -> list[int]:
    """The base seeds of ``units`` ((base_seed, seed) pairs); empty when the run does not vary
    the base model."""
    return sorted({u[0] for u in units if isinstance(u, tuple)})


def _mean(values) -> float:
    arr = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    return float(arr.mean()) if arr.size else math.nan


def _smoothed_curve(job: JobMetrics, metric: str, axis: str, window: int):
    x, y = job.eval_curve(metric, axis)
    return x, smooth(y, window)


def seed_curves(run: RunData, name: str) -> dict[str, SeedCurves]:
    """An allocator's smoothed evaluation curves, per x-axis, aligned by step across seeds."""
    t = run.target
    out = {}
    for axis in AXES:
        curves = {}
        for job in run.jobs_of(name):
            steps, x, y = job.eval_points(t.metric, axis)
            if steps.size:
                curves[job.unit] = (steps, x, smooth(y, t.smooth))
        out[axis] = SeedCurves.build(curves)
    return out


def _targets(run: RunData, base: SeedCurves, idx: np.ndarray) -> np.ndarray:
    """The target for each row of seed draws ``idx`` of the baseline (rollouts axis)."""
    t = run.target
    if t.at == "value":
        return np.full(idx.shape[0], float(t.value))  # type: ignore[arg-type]
    if t.at == "final":  # the baseline's final accuracy, averaged over its seeds
        return base.finals[idx].mean(axis=1)
    if t.at == "rise":  # a fraction of the way from its first to its final accuracy
        first = base.y[idx, 0].mean(axis=1)
        return first + float(t.value) * (base.finals[idx].mean(axis=1) - first)  # type: ignore[arg-type]
    return base.mean_curves(idx)[1].max(axis=1)  # the peak of the baseline's seed-mean curve


def compute_target(run: RunData) -> float | None:
    """The accuracy every run must reach, per the spec's target (None if it cannot be computed)."""
    if run.target.at == "value":
        return float(run.target.value)  # type: ignore[arg-type]
    base = seed_curves(run, run.target.baseline)["rollouts"]
    if base.num_seeds == 0:
        return None
    return float(_targets(run, base, base.all_seeds())[0])


def _mean_crossing(
    curves: SeedCurves, target: float | None, idx: np.ndarray | None = None
) -> Bounded:
    """Where the mean curve of the units ``idx`` (default: all) first reaches the target."""
    if target is None or curves.num_seeds == 0 or curves.steps.size == 0:
        return Bounded.unknown()
    idx = curves.all_seeds() if idx is None else idx
    at, reached = crossings(*curves.mean_curves(idx), np.array([target]))
    return Bounded(float(at[0]), "exact" if reached[0] else "lower")


def _per_base_model(curves: SeedCurves, target: float | None) -> dict[int, Bounded]:
    """Each base model's own mean-curve crossing (empty when the run has one base model)."""
    return {
        model: _mean_crossing(
            curves,
            target,
            np.array([[i for i, u in enumerate(curves.seeds) if u[0] == model]]),  # type: ignore[index]
        )
        for model in base_models(curves.seeds)
    }


def _seed_speedups(
    run: RunData,
    base: dict[str, SeedCurves],
    alloc: dict[str, SeedCurves],
    target_value: float,
) -> tuple[dict[str, dict[Unit, Bounded]], dict[Unit, bool]]:
    """Each allocator seed's own speedup on every axis, and whether it is paired.

    A seed the baseline also ran is compared with that baseline seed alone, its target
    recomputed from it (with ``at: final`` the baseline seed's own final value): one draw of
    the paired bootstrap. A seed the baseline did not run is compared with the baseline's
    seed-mean curve and target (unpaired)."""
    out: dict[str, dict[Unit, Bounded]] = {axis: {} for axis in AXES}
    paired: dict[Unit, bool] = {}
    ref = base["rollouts"]
    for pos, seed in enumerate(alloc["rollouts"].seeds):
        paired[seed] = seed in ref.seeds
        idx_b = np.array([[ref.seeds.index(seed)]]) if paired[seed] else ref.all_seeds()
        goal = _targets(run, ref, idx_b) if paired[seed] else np.array([target_value])
        for axis in AXES:
            b, a = base[axis], alloc[axis]
            if b.seeds != ref.seeds or a.seeds != alloc["rollouts"].seeds or not b.steps.size:
                continue
            xb, rb = crossings(*b.mean_curves(idx_b), goal)
            xa, ra = crossings(*a.mean_curves(np.array([[pos]])), goal)
            out[axis][seed] = ratio(
                Bounded(float(xb[0]), "exact" if rb[0] else "lower"),
                Bounded(float(xa[0]), "exact" if ra[0] else "lower"),
            )
    return out, paired


def _mean_last(jobs: list[JobMetrics], key: str) -> float:
    """Mean over seeds of each seed's last value of a cumulative key."""
    return _mean(float(v[-1]) for _, v in (j.series(key) for j in jobs) if v.size)


def _mean_series(jobs: list[JobMetrics], key: str) -> float:
    """Mean over seeds of each seed's mean over steps."""
    return _mean(float(v.mean()) for _, v in (j.series(key) for j in jobs) if v.size)


def analyze_run(
    run: RunData | str | Path,
    *,
    confidence: float = 0.95,
    num_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    min_interval_seeds: int = MIN_INTERVAL_SEEDS,
) -> RunAnalysis:
    """Analyse a run folder (or an already loaded :class:`RunData`). With fewer than
    ``min_interval_seeds`` seeds a side an allocator gets per-seed speedups, no interval."""
    if not isinstance(run, RunData):
        run = load_run(run)
    warnings: list[str] = list(run.warnings)
    unfinished = [
        f"{j.allocator}/seed {unit_label(j.unit)}: {j.status}"
        for j in run.jobs
        if j.status != "done"
    ]
    if unfinished:
        warnings.append(
            f"{len(unfinished)} of {len(run.jobs)} train jobs are not done ({'; '.join(unfinished)}): "
            "their numbers are partial"
        )
    no_eval = [
        f"{j.allocator}/seed {unit_label(j.unit)}"
        for j in run.jobs
        if not j.eval_curve(run.target.metric)[0].size
    ]
    if no_eval:
        warnings.append(f"no eval/{run.target.metric} rows yet for: {', '.join(no_eval)}")
    target_value = compute_target(run)
    if target_value is None:
        warnings.append(
            f"the target cannot be computed: baseline {run.target.baseline!r} has no "
            f"eval/{run.target.metric} rows"
        )

    base_curves = seed_curves(run, run.target.baseline)
    if base_models(base_curves["rollouts"].seeds) and not is_balanced(
        base_curves["rollouts"].seeds
    ):
        warnings.append(
            f"{run.target.baseline}'s base models do not all have the same seeds evaluated: "
            "no two-level bootstrap interval until they do"
        )
    base_cross = {axis: _mean_crossing(base_curves[axis], target_value) for axis in AXES}
    base_jobs = run.jobs_of(run.target.baseline)
    missed = baseline_missed_target(
        run.target.baseline, base_cross["rollouts"].exact, target_value, run.target.at
    )
    if missed and base_curves["rollouts"].num_seeds:
        warnings.append(missed)
    warnings += [found.describe() for found in drained_pools(run)]
    base_step_time = _mean_series(base_jobs, "time/step_s")

    results = []
    for name in run.allocators:
        jobs = run.jobs_of(name)
        is_baseline = name == run.target.baseline
        curves = base_curves if is_baseline else seed_curves(run, name)
        cross = {axis: _mean_crossing(curves[axis], target_value) for axis in AXES}
        seed_speedups: dict[str, dict[Unit, Bounded]] = {axis: {} for axis in AXES}
        paired: dict[Unit, bool] = {}
        num_seeds = min(base_curves["rollouts"].num_seeds, curves["rollouts"].num_seeds)
        few = too_few_for_interval(
            base_curves["rollouts"].seeds, curves["rollouts"].seeds, min_interval_seeds
        )
        if is_baseline:
            # the baseline against itself: 1 by definition
            speedups = dict.fromkeys(AXES, Bounded(1.0))
            intervals: dict[str, tuple[float, float] | None] = dict.fromkeys(AXES)
        else:
            speedups = {axis: ratio(base_cross[axis], cross[axis]) for axis in AXES}
            intervals = dict.fromkeys(AXES)
            if target_value is not None and num_seeds:
                seed_speedups, paired = _seed_speedups(run, base_curves, curves, target_value)
            if target_value is not None and not few and any(b.exact for b in speedups.values()):
                intervals = bootstrap_speedups(
                    base_curves,
                    curves,
                    lambda idx: _targets(run, base_curves["rollouts"], idx),
                    confidence=confidence,
                    num_resamples=num_resamples,
                    seed=seed,
                )
        axes = {}
        for axis in AXES:
            per_seed = {}
            if target_value is not None:
                for job in jobs:
                    x, y = _smoothed_curve(job, run.target.metric, axis, run.target.smooth)
                    if x.size:
                        per_seed[job.unit] = first_crossing(x, y, target_value)
            reached = (
                sum(b.exact for b in per_seed.values()) / len(per_seed) if per_seed else math.nan
            )
            # an interval around a bound would read as a measurement: only for exact speedups
            ci = intervals[axis] if speedups[axis].exact and not is_baseline else None
            axes[axis] = AxisResult(
                axis=axis,
                mean_curve=cross[axis],
                per_seed=per_seed,
                median=censored_median(list(per_seed.values())),
                speedup=speedups[axis],
                ci=ci,
                reached=reached,
                seed_speedups=seed_speedups[axis],
                paired=paired,
                few_seeds=few and not is_baseline,
                per_base_model=_per_base_model(curves[axis], target_value),
            )
        finals, peaks = {}, {}
        for job in jobs:
            _, y = job.eval_curve(run.target.metric)
            if y.size:
                finals[job.unit], peaks[job.unit] = float(y[-1]), float(y.max())
        step_time = _mean_series(jobs, "time/step_s")
        results.append(
            AllocatorResult(
                name=name,
                kind=run.kinds.get(name, name),
                is_baseline=is_baseline,
                seeds=[j.unit for j in jobs],
                axes=axes,
                final_per_seed=finals,
                peak_per_seed=peaks,
                reward_var=_mean_series(jobs, "reward_var"),
                zero_var_frac=_mean_series(jobs, "zero_var_frac"),
                step_time_s=step_time,
                step_time_ratio=step_time / base_step_time
                if base_step_time and math.isfinite(base_step_time)
                else math.nan,
                tokens_per_step=_mean_series(jobs, "step_tokens"),
                num_steps=max((j.num_steps for j in jobs), default=0),
                generated_rollouts=_mean_last(jobs, "cum_rollouts"),
                trained_rollouts=_mean_last(jobs, "cum_rollouts_trained"),
                generated_tokens=_mean_last(jobs, "cum_tokens"),
            )
        )
    return RunAnalysis(run, target_value, confidence, results, warnings)
