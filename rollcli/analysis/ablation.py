"""The ablation report of a sweep: speedup (with intervals) per point and against each axis.

Each point is analysed exactly like a single experiment (``rollcli.analysis.analyze_run`` on the
point's own jobs: its baseline, its target), so a sweep's numbers mean what `rollcli report`'s
mean (``rollcli.jobs.report.write_sweep_report`` runs it). Outputs under ``<run>/report/``: ``ablation.{md,csv,json}``, a speedup-vs-axis plot per
swept axis (PNG and SVG), and a heatmap when the sweep has two grid axes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcli.store.atomic import atomic_write_json, atomic_write_text, read_json
from rollcli.store.folders import RunFolder

__all__ = ["PointResult", "Ablation", "analyze_sweep", "write_ablation", "ablation_table"]


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


def analyze_sweep(run_dir: str | Path, *, num_resamples: int = 500) -> Ablation:
    """Analyse every point of a sweep run folder."""
    from rollcli.analysis.analyze import analyze_run
    from rollcli.analysis.load import RunData, TargetSpec, load_run

    sweep = load_sweep_manifest(run_dir)
    full = load_run(run_dir)
    by_id = {job.job_id: job for job in full.jobs}
    results: list[PointResult] = []
    warnings: dict[str, list[int]] = {}
    for point in sweep["points"]:
        names = list(point["jobs"])
        jobs = [by_id[i] for ids in point["jobs"].values() for i in ids if i in by_id]
        target = TargetSpec.from_mapping(point["target"], names, full.kinds)
        names = [target.baseline] + [n for n in names if n != target.baseline]
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
                )
            )
    grid_axes = list(sweep.get("grid_axes", []))
    every = len(sweep["points"])
    notes = [
        f"{'every point' if len(where) == every else 'points ' + ', '.join(map(str, where))}: {text}"
        for text, where in warnings.items()
    ]
    return Ablation(
        sweep["name"], list(sweep["axes"]), grid_axes, list(sweep["focus"]), results, notes
    )


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _ci(result: PointResult) -> str:
    return "" if result.ci is None else f"[{result.ci[0]:.2f}, {result.ci[1]:.2f}]"


def _rows(
    ablation: Ablation, results: list[PointResult], *, short: bool = False
) -> tuple[list[str], list[list[str]]]:
    axes = [a.rsplit(".", 1)[-1] for a in ablation.axes] if short else ablation.axes
    headers = [
        "point",
        *axes,
        "allocator",
        "speedup",
        "95% CI",
        "token speedup",
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
                f"{r.final_accuracy:.3f}",
                f"{r.baseline_final_accuracy:.3f}",
                f"{r.reached:.0%}" if math.isfinite(r.reached) else "n/a",
            ]
        )
    return headers, rows


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
    cells = [max((len(row[i]) for row in rows), default=1) for i in range(len(headers))]
    natural = sum(max(len(h), c) + 3 for h, c in zip(headers, cells, strict=True)) + 1
    narrow = max_width is not None and natural > max_width
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


def _csv(ablation: Ablation) -> str:
    import csv
    import io

    headers, rows = _rows(ablation, ablation.results)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(headers)
    writer.writerows(rows)
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


def write_ablation(ablation: Ablation, out_dir: str | Path, *, plots: bool = True) -> list[Path]:
    """Write ablation.{md,csv,json} and the plots; returns the paths written."""
    out_dir = Path(out_dir)
    files = [out_dir / "ablation.md", out_dir / "ablation.csv", out_dir / "ablation.json"]
    atomic_write_text(files[0], _markdown(ablation))
    atomic_write_text(files[1], _csv(ablation))
    atomic_write_json(files[2], _json(ablation))
    if plots and ablation.results:
        from rollcli.analysis.ablation_plots import write_ablation_plots

        files += write_ablation_plots(ablation, out_dir)
    return files
