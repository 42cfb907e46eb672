"""Sweep planning: every point's spec compiled into jobs, merged into one deduplicated plan.

Each point is the base spec with the common overrides and the point's axis values applied and
validated like any spec. Its train jobs are planned as usual; jobs are identified by the content
hash of their resolved config, so a job that several points share (the baseline allocator when
only another allocator's knobs are swept, or two points that resolve to the same config) is run
once. The sweep's manifest records, per point, which job ids hold each allocator's seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rollcli.analysis.scenario import SCENARIO_KEY
from rollcli.errors import SpecError
from rollcli.sweep.axes import to_overrides
from rollcli.sweep.file import Scenario, SweepFile

__all__ = ["MAX_SWEEP_JOBS", "SweepPoint", "SweepPlan", "plan_sweep"]

MAX_SWEEP_JOBS = 10_000


@dataclass(frozen=True)
class SweepPoint:
    """One point: its axis values, its validated spec, and its train job ids per allocator."""

    index: int
    values: tuple[tuple[str, Any], ...]
    spec: Any
    jobs: dict[str, tuple[str, ...]]
    scenario: Scenario | None = None  # a suite's point: the scenario it runs in

    @property
    def overrides(self) -> tuple[str, ...]:
        head = self.scenario.overrides if self.scenario else ()
        return (*head, *to_overrides(self.values))

    @property
    def labels(self) -> dict[str, Any]:
        """The point's axis values by key, its scenario's name under ``scenario`` first."""
        head = {SCENARIO_KEY: self.scenario.name} if self.scenario else {}
        return {**head, **dict(self.values)}

    def to_manifest(self) -> dict[str, Any]:
        target = self.spec.to_dict()["target"]
        extra = {}
        if self.scenario is not None:
            extra = {"scenario": self.scenario.name, "holdout": self.scenario.holdout}
        return {
            "index": self.index,
            "values": self.labels,
            **extra,
            "overrides": list(self.overrides),
            "target": target,
            "jobs": {name: list(ids) for name, ids in self.jobs.items()},
        }


@dataclass(frozen=True)
class SweepPlan:
    sweep: SweepFile
    points: tuple[SweepPoint, ...]
    plan: Any  # rollcli.plan.Plan: the union of the points' jobs

    @property
    def spec(self) -> Any:
        """The first point's spec: its launch, tracking and name stand for the sweep's."""
        return self.points[0].spec

    @property
    def num_point_jobs(self) -> int:
        """Jobs before deduplication (what running every point separately would cost)."""
        return sum(len(ids) for p in self.points for ids in p.jobs.values())

    def focus(self) -> list[str]:
        """Allocators the ablation reports on: the file's ``focus``, else the non-baseline
        allocators whose jobs change between points (all non-baseline ones if none do)."""
        if self.sweep.focus:
            return list(self.sweep.focus)
        baseline = self.spec.to_dict()["target"]["baseline"]
        others = [name for name in self.points[0].jobs if name != baseline]
        swept = [n for n in others if len({p.jobs.get(n) for p in self.points}) > 1]
        return swept or others

    def to_manifest(self) -> dict[str, Any]:
        return {
            "name": self.sweep.name,
            "file": str(self.sweep.path),
            "base": str(self.sweep.base),
            "common_overrides": list(self.sweep.common_overrides()),
            "axes": self.sweep.swept_keys,
            "grid_axes": [axis.key for axis in self.sweep.axes.grid],
            "focus": self.focus(),
            "scenarios": [s.name for s in self.sweep.scenarios],
            "holdout": [s.name for s in self.sweep.scenarios if s.holdout],
            "points": [p.to_manifest() for p in self.points],
            "num_jobs": len(self.plan),
            "num_point_jobs": self.num_point_jobs,
        }


class _PointLoader:
    """Loads point specs fast: the base file is composed and takes the common overrides once;
    each point resolves a copy with its own overrides (``load_spec``'s own steps)."""

    def __init__(self, base: Any, common: tuple[str, ...]) -> None:
        from rollcli.spec.extends import compose_file
        from rollcli.spec.overrides import apply_overrides

        data, marks = compose_file(base)
        self.data = apply_overrides(data, marks, list(common))
        self.marks = marks

    def load(self, overrides: tuple[str, ...]) -> Any:
        import copy

        from rollcli.spec.load import resolve_spec_data
        from rollcli.spec.validate import validate_spec
        from rollcli.spec.yamlio import Marks

        marks = Marks()
        marks.update(self.marks)
        data, marks = resolve_spec_data(copy.deepcopy(self.data), marks, overrides)
        return validate_spec(data, marks)


def _check_job_count(sweep: SweepFile, base: Any, num_points: int) -> None:
    """Refuse, before any point is loaded, a sweep whose points x allocators x seeds (of the
    base with the common overrides) is over ``MAX_SWEEP_JOBS``, naming the product."""
    allocators = base.get("allocators") if isinstance(base, dict) else None
    seeds = base.get("seeds") if isinstance(base, dict) else None
    num_allocators = len(allocators) if isinstance(allocators, dict) else 1
    num_seeds = len(seeds) if isinstance(seeds, list) else 1
    total = num_points * max(1, num_allocators) * max(1, num_seeds)
    if total > MAX_SWEEP_JOBS:
        raise SpecError(
            f"{sweep.path}: the sweep has {num_points:,} points x {num_allocators} allocators x "
            f"{num_seeds} seeds = {total:,} train jobs, more than {MAX_SWEEP_JOBS:,}; split it "
            "into smaller sweeps"
        )


def plan_sweep(sweep: SweepFile) -> SweepPlan:
    """Validate every point and merge their train (and eval) jobs into one plan."""
    from rollcli.plan import Plan, build_plan

    common = (*sweep.common_overrides(), f"name={sweep.name}")
    try:
        loader = _PointLoader(sweep.base, common)
    except SpecError as error:
        raise SpecError(f"{sweep.path}: base spec with the common overrides: {error}") from None
    points: list[SweepPoint] = []
    jobs: dict[str, Any] = {}
    scenarios: tuple[Scenario | None, ...] = sweep.scenarios or (None,)
    all_points = sweep.points()  # at most MAX_SWEEP_POINTS (checked before expanding)
    _check_job_count(sweep, loader.data, len(scenarios) * len(all_points))
    cells = [(sc, values) for sc in scenarios for values in all_points]
    for index, (scenario, values) in enumerate(cells):
        point = SweepPoint(index, values, None, {}, scenario)
        try:
            spec = loader.load(point.overrides)
        except SpecError as error:
            where = ", ".join(point.overrides) or "(no axis values)"
            named = f" (scenario {scenario.name})" if scenario else ""
            raise SpecError(f"{sweep.path}: point {index}{named} [{where}]: {error}") from None
        by_allocator: dict[str, list[str]] = {}
        for job in build_plan(spec):
            if job.type == "report":
                continue
            jobs.setdefault(job.id, job)
            if len(jobs) > MAX_SWEEP_JOBS:
                raise SpecError(
                    f"{sweep.path}: the sweep plans more than {MAX_SWEEP_JOBS:,} jobs (at "
                    f"point {index} of {len(cells)}); split it into smaller sweeps"
                )
            if job.type == "train":
                by_allocator.setdefault(job.allocator, []).append(job.id)
        points.append(
            SweepPoint(
                index, values, spec, {k: tuple(v) for k, v in by_allocator.items()}, scenario
            )
        )
    if not points:
        raise SpecError(f"{sweep.path}: the sweep has no points")
    focus = sweep.focus or ()
    names = set(points[0].jobs)
    for name in focus:
        if name not in names:
            raise SpecError(
                f"{sweep.path}: focus: '{name}' is not an allocator of the base spec ({', '.join(sorted(names))})"
            )
    return SweepPlan(sweep, tuple(points), Plan(sweep.name, tuple(jobs.values())))
