"""Report jobs: the rollouts-to-target report of a run, and the ablation report of a sweep.

A plan's report job runs after every train and eval job and writes ``<run>/report/``
(:func:`rollcli.analysis.write_report`), then logs the results to the experiment's W&B ``report``
run when the spec's tracking logs anything (:mod:`rollcli.analysis.wandb_results`; a sweep's
run gets its ablation table there). A sweep's run folder gets its ablation report instead
(:func:`write_sweep_report`): its points reuse allocator names, so one speedup table would mix
them.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from rollcli.jobs.config import JobConfig
from rollcli.store.folders import JobFolder, RunFolder

__all__ = ["run", "write_sweep_report"]


def run(folder: JobFolder, config: JobConfig, stop: threading.Event) -> None:
    """The entry point's report runner: the report of the run the job belongs to."""
    from rollcli.analysis import wandb_results, write_report

    run_dir = folder.run
    if run_dir.is_sweep:
        _, files = write_sweep_report(run_dir.path)
        logged = wandb_results.log_sweep_report_run(run_dir.path, files, folder.path)
    else:
        result = write_report(run_dir.path)
        files = list(result.files)
        logged = wandb_results.log_report_run(result.analysis, files, folder.path)
    for path in files:
        print(f"wrote {path}")
    if logged is not None:
        print(f"W&B: the report run {logged.run_id} ({logged.mode}) in {logged.wandb_dir}")


def write_sweep_report(run_dir: str | os.PathLike[str], *, plots: bool = True) -> tuple[Any, list]:
    """Analyse a sweep's run folder and write its ablation files to ``<run>/report/``;
    returns the ablation and the files written."""
    from rollcli.analysis.ablation import analyze_sweep, write_ablation

    run = RunFolder(run_dir)
    ablation = analyze_sweep(run.path)
    return ablation, write_ablation(ablation, run.report, plots=plots)
