"""The ablation report of a sweep: speedup (with intervals) per point and against each axis.

Each point is analysed exactly like a single experiment (``rollcli.analysis.analyze_run`` on the
point's own jobs: its baseline, its target), so a sweep's numbers mean what `rollcli report`'s
mean (``rollcli.jobs.report.write_sweep_report`` runs it). Outputs under ``<run>/report/``: ``ablation.{md,csv,json}``, a speedup-vs-axis plot per
swept axis (PDF and PNG), a heatmap when the sweep has two grid axes, and for a suite (a sweep with
``scenarios``) ``robustness.md`` and ``report.json`` (:mod:`rollcli.analysis.robustness`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcli.store.atomic import atomic_write_json, atomic_write_text, read_json
from rollcli.store.folders import RunFolder

__all__ = [
    "PointResult",
    "Ablation",
    "analyze_sweep",
    "write_ablation",
    "write_robustness",
    "suite_report_json",
    "ablation_table",
]


@dataclass
class PointResult:
    """One point × one focus allocator: its rollouts-to-target speedup against its baseline."""

    index: int
    values: dict[str, Any]
    allocator: str
    speedup: Any  # rollcli.analysis.Bounded
    ci: tuple[float, float] | None
    token_speedup: Any
    final_accuracy: float
    baseline_final_accuracy: float
    reached: float
    num_seeds: int
    # each seed's own speedup (shown instead of an interval under 5 seeds, as `rollcli report`)
    seed_speedups: dict[int, Any] = field(default_factory=dict)
    wall_speedup: Any = None

    def sort_key(self) -> float:
        value = self.speedup.value
        return value if math.isfinite(value) else -math.inf


@dataclass
class Ablation:
    name: str
    axes: list[str]
    grid_axes: list[str]
    focus: list[str]
    results: list[PointResult]
    warnings: list[str] = field(default_factory=list)
    baseline: str = ""  # the first point's baseline allocator
    scenarios: list[str] = field(default_factory=list)  # a suite's scenarios (docs/suite.md)
    holdout: list[str] = field(default_factory=list)  # those of them held out

    @property
    def is_suite(self) -> bool:
        return bool(self.scenarios)

    def best(self, top: int = 5) -> list[PointResult]:
        exact_first = sorted(self.results, key=lambda r: (r.speedup.kind != "exact", -r.sort_key()))
        return exact_first[:top]


def load_sweep_manifest(run_dir: str | Path) -> dict[str, Any]:
    path = RunFolder(run_dir).sweep
    if not path.exists():
        from rollcli.errors import StoreError

        raise StoreError(
            f"{run_dir} is not a sweep run folder (no {path.name}); run: rollcli sweep FILE"
        )
    return read_json(path)


def _with_target(
    spec_target: Mapping[str, Any], override: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A point's ``target`` with ``override``'s keys on top (a new ``at`` drops the old value)."""
    merged = dict(spec_target or {})
    if override and "at" in override:
        merged.pop("value", None)
    return {**merged, **(override or {})}


def analyze_sweep(
    run_dir: str | Path,
    *,
    num_resamples: int = 500,
    target_override: Mapping[str, Any] | None = None,
) -> Ablation:
    """Analyse every point of a sweep run folder; ``target_override`` (keys of the spec's ``target``, as
    :func:`rollcli.analysis.compare.parse_target` gives them) overrides each point's."""
    from rollcli.analysis.analyze import analyze_run
    from rollcli.analysis.load import RunData, TargetSpec, load_run

    sweep = load_sweep_manifest(run_dir)
    full = load_run(run_dir)
    by_id = {job.job_id: job for job in full.jobs}
    results: list[PointResult] = []
    warnings: dict[str, list[int]] = {}
    baselines: list[str] = []
    for point in sweep["points"]:
        names = list(point["jobs"])
        jobs = [by_id[i] for ids in point["jobs"].values() for i in ids if i in by_id]
        target = TargetSpec.from_mapping(
            _with_target(point["target"], target_override), names, full.kinds
        )
        names = [target.baseline] + [n for n in names if n != target.baseline]
        baselines.append(target.baseline)
        run = RunData(
            run_dir=full.run_dir,
            experiment=full.experiment,
            allocators=names,
            kinds=full.kinds,
            target=target,
            jobs=jobs,
            spec=full.spec,
            budget_steps=full.budget_steps,
        )
        analysis = analyze_run(run, num_resamples=num_resamples)
        for warning in analysis.warnings:
            warnings.setdefault(warning, []).append(int(point["index"]))
        baseline = analysis.get(target.baseline)
        for name in sweep["focus"]:
            if name not in names:
                continue
            result = analysis.get(name)
            rollouts = result.axes["rollouts"]
            tokens = result.axes.get("tokens")
            wall = result.axes.get("wall_s")
            results.append(
                PointResult(
                    index=int(point["index"]),
                    values=dict(point["values"]),
                    allocator=name,
                    speedup=rollouts.speedup,
                    ci=rollouts.ci,
                    token_speedup=tokens.speedup if tokens else None,
                    final_accuracy=result.final_accuracy,
                    baseline_final_accuracy=baseline.final_accuracy,
                    reached=rollouts.reached,
                    num_seeds=len(result.seeds),
                    seed_speedups=dict(rollouts.seed_speedups) if rollouts.few_seeds else {},
                    wall_speedup=wall.speedup if wall else None,
                )
            )
    grid_axes = list(sweep.get("grid_axes", []))
    every = len(sweep["points"])
    notes = [
        f"{'every point' if len(where) == every else 'points ' + ', '.join(map(str, where))}: {text}"
        for text, where in warnings.items()
    ]
    return Ablation(
        sweep["name"],
        list(sweep["axes"]),
        grid_axes,
        list(sweep["focus"]),
        results,
        notes,
        baseline=baselines[0] if baselines else "",
        scenarios=list(sweep.get("scenarios", [])),
        holdout=list(sweep.get("holdout", [])),
    )


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _ci(result: PointResult) -> str:
    """``[low, high]`` (an interval), ``(a, b, c)`` (each seed's own speedup), or empty."""
    if result.ci is not None:
        return f"[{result.ci[0]:.2f}, {result.ci[1]:.2f}]"
    if result.seed_speedups and result.speedup.exact:
        return "(" + ", ".join(b.display() for _, b in sorted(result.seed_speedups.items())) + ")"
    return ""


# the columns that stay in a terminal too narrow for every one (80 columns)
_NARROW = ("point", "allocator", "speedup", "CI / per seed", "final acc", "reached")


def _rows(
    ablation: Ablation, results: list[PointResult], *, short: bool = False
) -> tuple[list[str], list[list[str]]]:
    axes = [a.rsplit(".", 1)[-1] for a in ablation.axes] if short else ablation.axes
    headers = [
        "point",
        *axes,
        "allocator",
        "speedup",
        "CI / per seed",
        "token speedup",
        "wall speedup",
        "final acc",
        "baseline acc",
        "reached",
    ]
    rows = []
    for r in results:
        rows.append(
            [
                str(r.index),
                *(_fmt(r.values.get(axis, "")) for axis in ablation.axes),
                r.allocator,
                r.speedup.display(),
                _ci(r),
                r.token_speedup.display() if r.token_speedup is not None else "n/a",
                r.wall_speedup.display() if r.wall_speedup is not None else "n/a",
                f"{r.final_accuracy:.3f}",
                f"{r.baseline_final_accuracy:.3f}",
                f"{r.reached:.0%}" if math.isfinite(r.reached) else "n/a",
            ]
        )
    return headers, rows


def _natural(headers: list[str], rows: list[list[str]]) -> int:
    """The width of a rich table whose columns take their widest cell or header."""
    cells = [max((len(row[i]) for row in rows), default=1) for i in range(len(headers))]
    return sum(max(len(h), c) + 3 for h, c in zip(headers, cells, strict=True)) + 1


def ablation_table(
    ablation: Ablation, *, best_only: bool = False, max_width: int | None = None
) -> Any:
    """A rich table of every point (or of the best ones). When it is wider than ``max_width`` (the
    terminal), each column gets exactly its cells' width and the headers fold: rich would
    otherwise wrap or cut the numbers themselves."""
    from rich.table import Table

    results = ablation.best() if best_only else ablation.results
    title = f"{ablation.name}: " + ("best configurations" if best_only else "speedup per point")
    table = Table(title=title)
    headers, rows = _rows(ablation, results, short=True)
    if max_width is not None and _natural(headers, rows) > max_width:
        # narrow terminal: the axes, the allocator, the speedup and its spread, the accuracy
        axes = [a.rsplit(".", 1)[-1] for a in ablation.axes]
        keep = [i for i, h in enumerate(headers) if h in _NARROW or (h in axes and i > 0)]
        if len({r.allocator for r in results}) == 1:  # one focus allocator: named in the title
            keep.remove(headers.index("allocator"))
            table.title = f"{title} ({results[0].allocator})"
        headers = [headers[i] for i in keep]
        rows = [[row[i] for i in keep] for row in rows]
    cells = [max((len(row[i]) for row in rows), default=1) for i in range(len(headers))]
    narrow = max_width is not None and _natural(headers, rows) > max_width
    for header, width in zip(headers, cells, strict=True):
        table.add_column(
            header,
            justify="left" if header in ("allocator",) else "right",
            overflow="fold",
            width=max(width, 3) if narrow else None,
        )
    for row in rows:
        table.add_row(*row)
    return table


def _markdown(ablation: Ablation) -> str:
    from rollcli.analysis.report import markdown_table

    def table(results: list[PointResult]) -> str:
        return markdown_table(*_rows(ablation, results))

    parts = [
        f"# Ablation: {ablation.name}",
        "",
        "Speedup = baseline's cumulative rollouts to the target / the allocator's (per point, "
        "against that point's baseline; `>=`/`<=` are bounds where a curve never reached it).",
        "",
        "## Best configurations",
        "",
        table(ablation.best()),
        "",
        "## Every point",
        "",
        table(ablation.results),
        "",
    ]
    if ablation.warnings:
        parts += ["## Warnings", "", *(f"- {w}" for w in ablation.warnings), ""]
    return "\n".join(parts)


def _bound_columns(value: Any) -> tuple[float | None, str]:
    """A Bounded as (number, bound): the value or its bound, and ``""``/``lower``/``upper``."""
    if value is None or value.kind == "unknown" or not math.isfinite(value.value):
        return None, ""
    return float(value.value), "" if value.exact else value.kind


def _csv(ablation: Ablation) -> str:
    """One row per point and focus allocator; numeric columns hold numbers only (a bound is its
    value with ``*_bound`` saying which side), ``reached`` is a fraction, and ``seed_speedups``
    lists each seed's own speedup (``;``-separated) where there is no interval (under 5 seeds)."""
    import csv
    import io

    header = ["point", *ablation.axes, "allocator", "num_seeds", "speedup", "speedup_bound"]
    header += ["ci_low", "ci_high", "seed_speedups", "token_speedup", "token_speedup_bound"]
    header += ["wall_speedup", "wall_speedup_bound", "final_accuracy"]
    header += ["baseline_final_accuracy", "reached"]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)

    def number(value: Any) -> str:
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return ""
        return f"{value:.6g}" if isinstance(value, float) else str(value)

    for r in ablation.results:
        seeds = ";".join(number(b.value) for _, b in sorted(r.seed_speedups.items()))
        row = [r.index, *(r.values.get(axis, "") for axis in ablation.axes), r.allocator]
        row += [r.num_seeds, *_bound_columns(r.speedup)]
        row += [None if r.ci is None else r.ci[0], None if r.ci is None else r.ci[1], seeds]
        row += [*_bound_columns(r.token_speedup), *_bound_columns(r.wall_speedup)]
        row += [r.final_accuracy, r.baseline_final_accuracy, r.reached]
        writer.writerow([number(v) if not isinstance(v, str) else v for v in row])
    return buffer.getvalue()


def _json(ablation: Ablation) -> dict[str, Any]:
    return {
        "name": ablation.name,
        "axes": ablation.axes,
        "focus": ablation.focus,
        "points": [
            {
                "index": r.index,
                "values": r.values,
                "allocator": r.allocator,
                "speedup": r.speedup.to_json(),
                "ci_low": None if r.ci is None else r.ci[0],
                "ci_high": None if r.ci is None else r.ci[1],
                "token_speedup": None if r.token_speedup is None else r.token_speedup.to_json(),
                "wall_speedup": None if r.wall_speedup is None else r.wall_speedup.to_json(),
                "seed_speedups": {str(k): b.to_json() for k, b in sorted(r.seed_speedups.items())},
                "final_accuracy": r.final_accuracy,
                "baseline_final_accuracy": r.baseline_final_accuracy,
                "reached": r.reached if math.isfinite(r.reached) else None,
                "num_seeds": r.num_seeds,
            }
            for r in ablation.results
        ],
        "best": [r.index for r in ablation.best()],
        "warnings": ablation.warnings,
    }


def suite_report_json(ablation: Ablation) -> dict[str, Any]:
    """A suite's ``report.json``: the robustness table and the per-point ablation."""
    from rollcli.analysis.robustness import robustness, robustness_json

    return {
        "kind": "suite",
        "name": ablation.name,
        "robustness": robustness_json(robustness(ablation)),
        "ablation": _json(ablation),
    }


def write_robustness(ablation: Ablation, out_dir: str | Path) -> list[Path]:
    """A suite's robustness table: ``robustness.md`` and ``report.json`` under ``out_dir``."""
    from rollcli.analysis.robustness import robustness, robustness_markdown

    out_dir = Path(out_dir)
    files = [out_dir / "robustness.md", out_dir / "report.json"]
    atomic_write_text(files[0], robustness_markdown(robustness(ablation)))
    atomic_write_json(files[1], suite_report_json(ablation))
    return files


def write_ablation(ablation: Ablation, out_dir: str | Path, *, plots: bool = True) -> list[Path]:
    """Write ablation.{md,csv,json}, a suite's robustness.md and report.json, and the plots;
    returns the paths written."""
    out_dir = Path(out_dir)
    files = [out_dir / "ablation.md", out_dir / "ablation.csv", out_dir / "ablation.json"]
    atomic_write_text(files[0], _markdown(ablation))
    atomic_write_text(files[1], _csv(ablation))
    atomic_write_json(files[2], _json(ablation))
    if ablation.is_suite:
        files += write_robustness(ablation, out_dir)
    if plots and ablation.results:
        from rollcli.analysis.ablation_plots import write_ablation_plots

        files += write_ablation_plots(ablation, out_dir)
    return files
