"""The results of a run on W&B: the ``report`` run of the experiment's group.

The train and eval jobs log their metrics rows (:mod:`rollcli.analysis.tracking`); the report
job adds what a reader of the group needs without the run folder: one run named ``report`` (job
type ``report``, a deterministic id per experiment, so a rebuilt report continues it) holding

- ``results/speedups``: the speedup table (``wandb.Table``, the columns of ``report.csv``:
  rollout-, token- and wall-clock-matched speedups with their bootstrap intervals, final
  accuracy, generated and trained rollouts);
- ``results/accuracy_curves``: the seed-mean curve of the target metric per allocator over
  cumulative rollouts and its bootstrap band (5 seeds or more) — the numbers ``accuracy.pdf``
  draws, so the W&B report shows the same band as the local figure;
- ``figures/<name>``: every PNG figure of the report;
- the summary ``speedup/<allocator>`` (rollout-matched) and ``speedup_tokens/<allocator>``;
- the artifact ``report-<experiment>`` (type ``report``): ``report.json`` and every other file
  the report wrote.

A sweep's report run holds ``results/ablation`` (the rows of ``ablation.csv``), its figures and
files instead. The mode follows the spec's ``tracking.wandb`` (``auto``: only with a login and a
reachable host).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcli.analysis.analyze import RunAnalysis
from rollcli.analysis.tracking import WandbTracker, init_run

__all__ = ["ReportRun", "report_run_id", "curve_table", "log_report_run", "log_sweep_report_run"]

REPORT_RUN_NAME = "report"


@dataclass(frozen=True)
class ReportRun:
    """What :func:`log_report_run` logged: the run id, its mode and the W&B folder."""

    run_id: str
    mode: str
    wandb_dir: Path


def report_run_id(experiment: str) -> str:
    """The W&B id of an experiment's report run: stable across rebuilds of the report."""
    return hashlib.sha256(f"rollcli-report:{experiment}".encode()).hexdigest()[:16]


def curve_table(analysis: RunAnalysis) -> tuple[list[str], list[list[Any]]]:
    """(columns, rows) of the accuracy figure's curves: per allocator and point the seed-mean
    value of the target metric at that many cumulative rollouts, and the bootstrap band's low
    and high there (``None`` under 5 seeds, where the figure draws each seed instead)."""
    import numpy as np

    from rollcli.analysis.plots import accuracy_data, curve_band

    data = accuracy_data(analysis)
    columns = ["allocator", "rollouts", "mean", "band_low", "band_high"]
    rows: list[list[Any]] = []
    for name, curve in data["curves"].items():
        x, y = np.asarray(curve["x"], float), np.asarray(curve["y"], float)
        band = curve_band(data["drawn"][name], analysis.confidence)
        low = high = None
        if band is not None:
            grid, lo, hi = band
            inside = (x >= grid[0]) & (x <= grid[-1])
            low = np.where(inside, np.interp(x, grid, lo), np.nan)
            high = np.where(inside, np.interp(x, grid, hi), np.nan)
        for i in range(x.size):
            rows.append(
                [
                    name,
                    float(x[i]),
                    _number(y[i]),
                    None if low is None else _number(low[i]),
                    None if high is None else _number(high[i]),
                ]
            )
    return columns, rows


def _number(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def log_report_run(
    analysis: RunAnalysis, files: Sequence[Path], job_dir: str | Path
) -> ReportRun | None:
    """Log the report's table, curves, figures and files to the experiment's ``report`` run
    (W&B files under ``<job_dir>/wandb/``); None when the spec's mode logs nothing."""
    run_info = analysis.run

    def content() -> tuple[dict[str, tuple[list[str], list[list[Any]]]], dict[str, float]]:
        from rollcli.analysis.report import results_table

        summary: dict[str, float] = {}
        for res in analysis.allocators:
            for axis, prefix in (("rollouts", "speedup"), ("tokens", "speedup_tokens")):
                speedup = res.axes[axis].speedup
                if speedup.kind != "unknown" and speedup.value is not None:
                    summary[f"{prefix}/{res.name}"] = float(speedup.value)
        tables = {
            "results/speedups": results_table(analysis),
            "results/accuracy_curves": curve_table(analysis),
        }
        return tables, summary

    return _log_results(
        run_info.wandb,
        run_info.experiment,
        run_info.wandb_group,
        {"experiment": run_info.experiment, "target": _target_config(analysis)},
        content,
        files,
        job_dir,
    )


def log_sweep_report_run(
    run_dir: str | Path, files: Sequence[Path], job_dir: str | Path
) -> ReportRun | None:
    """A sweep's ``report`` run: ``results/ablation`` (the rows of ``ablation.csv``: speedup
    and interval per point and allocator), the figures and the report files as the artifact."""
    from rollcli.store.layout import load_manifest

    spec = load_manifest(run_dir).get("spec") or {}
    cfg = dict((spec.get("tracking") or {}).get("wandb") or {})
    experiment = str(spec.get("name") or Path(run_dir).name)
    csv_path = next((p for p in files if p.name == "ablation.csv"), None)

    def content() -> tuple[dict[str, tuple[list[str], list[list[Any]]]], dict[str, float]]:
        tables = {"results/ablation": _read_csv(csv_path)} if csv_path is not None else {}
        return tables, {}

    group = str(cfg.get("group") or experiment)
    config = {"experiment": experiment, "sweep": True}
    return _log_results(cfg, experiment, group, config, content, files, job_dir)


def _read_csv(path: Path) -> tuple[list[str], list[list[Any]]]:
    """(header, rows) of a report CSV, numbers as numbers and empty cells as None."""
    import csv

    with open(path, newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    return header, [[_cell(v) for v in row] for row in rows]


def _cell(text: str) -> Any:
    if text == "":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _log_results(
    cfg: dict[str, Any],
    experiment: str,
    group: str,
    config: dict[str, Any],
    content: Any,
    files: Sequence[Path],
    job_dir: str | Path,
) -> ReportRun | None:
    """Open the experiment's report run and log ``content()``'s tables and summary, every PNG
    of ``files`` as ``figures/<name>`` and all ``files`` as the artifact."""
    run_id = report_run_id(experiment)
    kwargs = dict(
        project=str(cfg.get("project") or "rollcli"),
        entity=cfg.get("entity") or None,
        group=group,
        job_type="report",
        name=REPORT_RUN_NAME,
        tags=[str(t) for t in (cfg.get("tags") or [])] or None,
        config=config,
        id=run_id,
        resume="allow",
        dir=str(job_dir),
    )
    opened = init_run(cfg, kwargs)
    if opened is None:
        return None
    import wandb

    run, mode = opened
    tracker = WandbTracker(run, mode, Path(job_dir) / "wandb")
    try:
        tables, summary = content()
        logged: dict[str, Any] = {
            key: wandb.Table(columns=columns, data=rows) for key, (columns, rows) in tables.items()
        }
        for path in files:
            if path.suffix == ".png":
                logged[f"figures/{path.stem}"] = wandb.Image(str(path))
        run.log(logged)
        for key, value in summary.items():
            run.summary[key] = value
        artifact = wandb.Artifact(f"report-{experiment}", type="report")
        for path in files:
            if path.is_file():
                artifact.add_file(str(path), name=path.name)
        run.log_artifact(artifact)
    finally:
        tracker.finish()
    return ReportRun(run_id, mode, Path(job_dir) / "wandb")


def _target_config(analysis: RunAnalysis) -> dict[str, Any]:
    target = analysis.run.target
    return {
        "baseline": target.baseline,
        "metric": target.metric,
        "value": analysis.target_value,
        "confidence": analysis.confidence,
    }
