"""Read a run folder for analysis: the manifest's plan, the target definition, and every train job's
metrics (with its eval job's rows filling steps the train job did not evaluate).

The files are read directly as docs/CONTRACTS.md §5 lays them out (``manifest.json``,
``jobs/<id>/metrics.jsonl``, ``jobs/<id>/state.json``), so analysis works on any run folder, finished
or still running, without the orchestration code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rollcli.errors import StoreError
from rollcli.store.atomic import read_json
from rollcli.store.damaged import metrics_rows
from rollcli.store.folders import RunFolder
from rollcli.store.layout import load_manifest

__all__ = ["TargetSpec", "JobMetrics", "RunData", "load_run", "AXES", "Unit", "unit_label"]

# What a run repeats: a seed, or (base seed, seed) when the spec lists base_seeds (the base model
# as a random factor, docs/report.md). Every unit of a run has the same form.
Unit = int | tuple[int, int]


def unit_label(unit: Unit) -> str:
    """``3`` for a seed, ``b1/s3`` for seed 3 on base model 1 (table columns, JSON keys)."""
    return str(unit) if isinstance(unit, int) else f"b{unit[0]}/s{unit[1]}"


# x-axes of an accuracy curve: name -> metrics key (wall_s excludes evaluation time)
AXES: dict[str, str] = {"rollouts": "cum_rollouts", "tokens": "cum_tokens", "wall_s": "wall_s"}
_TARGET_AT = ("final", "peak", "value", "rise")


@dataclass(frozen=True)
class TargetSpec:
    """The spec's ``target``: which accuracy every run must reach (docs/report.md explains it)."""

    baseline: str
    metric: str = "accuracy"
    at: str = "final"
    value: float | None = None
    smooth: int = 1

    @classmethod
    def from_mapping(
        cls,
        mapping: Mapping[str, Any] | None,
        allocators: list[str],
        kinds: Mapping[str, str] | None = None,
    ) -> TargetSpec:
        """Validate the spec's target; the baseline defaults to the first ``uniform`` allocator
        (plain GRPO), else the first allocator."""
        mapping = dict(mapping or {})
        unknown = set(mapping) - {"baseline", "metric", "at", "value", "smooth"}
        if unknown:
            raise StoreError(f"target: unknown keys {sorted(unknown)}")
        uniform = [n for n in allocators if (kinds or {}).get(n) == "uniform"]
        baseline = mapping.get("baseline") or (uniform or allocators or [""])[0]
        if allocators and baseline not in allocators:
            raise StoreError(
                f"target.baseline {baseline!r} is not an allocator of this run "
                f"(allocators: {', '.join(allocators)})"
            )
        at = mapping.get("at") or "final"
        if at not in _TARGET_AT:
            raise StoreError(f"target.at must be one of {', '.join(_TARGET_AT)}, got {at!r}")
        value = mapping.get("value")
        if at == "value" and (value is None or not math.isfinite(float(value))):
            raise StoreError("target.at is 'value' but target.value is not a number")
        if at == "rise" and (value is None or not 0 < float(value) <= 1):
            raise StoreError(f"target.at is 'rise' but target.value is not in (0, 1]: {value!r}")
        smooth = int(mapping.get("smooth") or 1)
        if smooth < 1:
            raise StoreError(f"target.smooth must be >= 1, got {smooth}")
        metric = str(mapping.get("metric") or "accuracy").removeprefix("eval/")
        return cls(
            baseline=str(baseline),
            metric=metric,
            at=at,
            value=None if value is None else float(value),
            smooth=smooth,
        )

    def describe(self, num_seeds: int | None = None) -> str:
        """In words: ``grpo's final eval/accuracy (mean over 2 seeds)``."""
        smooth = f", smoothed over {self.smooth} evaluations" if self.smooth > 1 else ""
        if self.at == "value":
            return f"eval/{self.metric} >= {self.value:g}{smooth}"
        over = "mean over seeds"
        if num_seeds == 1:
            over = "1 seed"
        elif num_seeds is not None:
            over = f"mean over {num_seeds} seeds"
        if self.at == "rise":
            return (
                f"{self.value:.0%} of {self.baseline}'s rise from its first to its final "
                f"eval/{self.metric} ({over}){smooth}"
            )
        what = "final" if self.at == "final" else "peak"
        return f"{self.baseline}'s {what} eval/{self.metric} ({over}){smooth}"


@dataclass
class JobMetrics:
    """One train job: its identity, state and metrics rows (sorted by step, one row per step)."""

    job_id: str
    allocator: str
    seed: int
    status: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    run_dir: Path | None = None  # the run folder it came from (several in a comparison)
    base_seed: int | None = None  # the base model it started from, when the spec varies it

    @property
    def unit(self) -> Unit:
        """The seed, or (base seed, seed) when the run varies the base model."""
        return self.seed if self.base_seed is None else (self.base_seed, self.seed)

    def eval_points(
        self, metric: str, axis: str = "rollouts"
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(steps, x, y): ``eval/<metric>`` at each evaluation, with its step and its cumulative
        rollouts, tokens or wall_s (a missing x, as wall_s at step 0, counts as 0)."""
        key = f"eval/{metric}"
        x_key = AXES[axis]
        steps, xs, ys = [], [], []
        for row in self.rows:
            value = row.get(key)
            if value is None or not math.isfinite(float(value)):
                continue
            steps.append(int(row.get("step", 0)))
            xs.append(float(row.get(x_key) or 0.0))
            ys.append(float(value))
        return np.asarray(steps, dtype=int), np.asarray(xs), np.asarray(ys)

    def eval_curve(self, metric: str, axis: str = "rollouts") -> tuple[np.ndarray, np.ndarray]:
        """(x, y): ``eval/<metric>`` at each evaluation against cumulative rollouts/tokens/wall_s."""
        _, x, y = self.eval_points(metric, axis)
        return x, y

    def series(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of a per-step key over the rows that have it (step 0 usually has none)."""
        steps, values = [], []
        for row in self.rows:
            value = row.get(key)
            if value is None or row.get("step", 0) < 1:
                continue
            steps.append(int(row["step"]))
            values.append(float(value))
        return np.asarray(steps, dtype=int), np.asarray(values, dtype=float)

    @property
    def num_steps(self) -> int:
        return max((int(r.get("step", 0)) for r in self.rows), default=0)


@dataclass
class RunData:
    """A run folder as analysis sees it."""

    run_dir: Path
    experiment: str
    allocators: list[str]  # the baseline, then the others in plan order
    kinds: dict[str, str]  # allocator name -> kind
    target: TargetSpec
    jobs: list[JobMetrics]
    spec: dict[str, Any]
    budget_steps: int | None = None
    sources: list[Path] = field(default_factory=list)  # the run folders compared (one or more)
    # problems found while loading (a forced comparison of mismatched runs): report warnings
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.sources:
            self.sources = [self.run_dir]

    def jobs_of(self, allocator: str) -> list[JobMetrics]:
        return sorted((j for j in self.jobs if j.allocator == allocator), key=lambda j: j.unit)

    @property
    def wandb(self) -> dict[str, Any]:
        return dict((self.spec.get("tracking") or {}).get("wandb") or {})

    @property
    def wandb_group(self) -> str:
        return str(self.wandb.get("group") or self.experiment)


def _read_rows(path: Path) -> list[dict[str, Any]]:
    by_step: dict[int, dict[str, Any]] = {}
    for row in metrics_rows(path):  # damaged lines and values: skipped, with a warning
        by_step[int(row["step"])] = row  # a resumed job may repeat steps: the last one wins
    return [by_step[s] for s in sorted(by_step)]


def _merge_eval_rows(
    rows: list[dict[str, Any]], eval_rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Fill the train job's curve with its eval job's rows (docs/eval.md "Eval jobs"): at a step
    whose train row has no ``eval/*`` key the eval row's ``eval/*`` keys are added (or the eval
    row itself, with its cum_rollouts/cum_tokens, when the train job has no row there)."""
    if not eval_rows:
        return rows
    by_step = {int(r["step"]): r for r in rows}
    for row in eval_rows:
        step = int(row["step"])
        train_row = by_step.get(step)
        if train_row is None:
            by_step[step] = dict(row)
        elif not any(key.startswith("eval/") for key in train_row):
            extra = {k: v for k, v in row.items() if k.startswith("eval/")}
            by_step[step] = {**train_row, **extra}
    return [by_step[s] for s in sorted(by_step)]


def load_run(run_dir: str | Path, *, target: Mapping[str, Any] | None = None) -> RunData:
    """Read ``manifest.json`` and the metrics of every train job of a run folder; ``target``
    (keys of the spec's ``target``) overrides what the spec says (``rollcli report --target``)."""
    run_dir = Path(run_dir)
    run = RunFolder(run_dir)
    manifest_path = run.manifest
    if not manifest_path.is_file():
        raise StoreError(
            f"{run_dir} is not a run folder (no manifest.json); "
            "pass the folder `rollcli run` created, e.g. runs/<experiment>"
        )
    manifest = load_manifest(run_dir)  # a torn one is rebuilt from the job folders, with a warning
    spec = dict(manifest.get("spec") or {})
    plan_jobs = list((manifest.get("plan") or {}).get("jobs") or [])
    train = [j for j in plan_jobs if j.get("type", "train") == "train"]
    if not train:
        raise StoreError(f"{manifest_path}: the plan has no train jobs")
    spec_allocators = spec.get("allocators") or {}
    # plan order (a JSON list keeps it; the spec mapping may come back with sorted keys)
    names: list[str] = []
    for job in train:
        if str(job["allocator"]) not in names:
            names.append(str(job["allocator"]))
    kinds = {
        n: str((spec_allocators.get(n) or {}).get("kind", n))
        if isinstance(spec_allocators, Mapping)
        else n
        for n in names
    }
    # eval jobs (verl `eval.jobs: true`) evaluate the checkpoints of the train job they depend on
    eval_of: dict[str, list[str]] = {}
    for job in plan_jobs:
        if job.get("type") == "eval":
            for dep in job.get("depends_on") or []:
                eval_of.setdefault(str(dep), []).append(str(job["id"]))
    jobs = []
    for job in train:
        folder = run.job(str(job["id"]))
        rows = _read_rows(folder.metrics)
        for eval_id in eval_of.get(str(job["id"]), []):
            rows = _merge_eval_rows(rows, _read_rows(run.job(eval_id).metrics))
        state_path = folder.state
        status = "pending"
        if state_path.is_file():
            try:
                status = str(read_json(state_path).get("status", "pending"))
            except ValueError:
                status = "unknown"
        jobs.append(
            JobMetrics(
                job_id=str(job["id"]),
                allocator=str(job["allocator"]),
                seed=int(job.get("seed", 0)),
                status=status,
                rows=rows,
                run_dir=run_dir,
                base_seed=None if job.get("base_seed") is None else int(job["base_seed"]),
            )
        )
    steps = (spec.get("budget") or {}).get("steps")
    target_map = {**(spec.get("target") or {}), **(target or {})}
    target = TargetSpec.from_mapping(target_map, names, kinds)
    names.remove(target.baseline)
    return RunData(
        run_dir=run_dir,
        experiment=str(manifest.get("experiment") or spec.get("name") or run_dir.name),
        allocators=[target.baseline, *names],  # the baseline first, then plan order
        kinds=kinds,
        target=target,
        jobs=jobs,
        spec=spec,
        budget_steps=int(steps) if steps is not None else None,
    )
