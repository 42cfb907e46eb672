"""``rollcli report RUNDIR``: the rollouts-to-target table, report files, plots and a W&B report.

Thin: parses options, calls :func:`rollcli.analysis.report.write_report` (and
:func:`rollcli.analysis.wandb_report.publish_wandb_report` with ``--wandb``), renders with rich.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["register", "report"]


def report(
    run_dir: Annotated[
        Path,
        typer.Argument(
            help="A run folder made by `rollcli run` (runs/<experiment>).", show_default=False
        ),
    ],
    formats: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="Comma-separated file formats to write: md, latex, csv, json.",
        ),
    ] = "md,latex,csv,json",
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Folder for the files (default: RUNDIR/report)."),
    ] = None,
    plots: Annotated[
        bool, typer.Option("--plots/--no-plots", help="Write PNG and SVG plots.")
    ] = True,
    wandb: Annotated[
        bool,
        typer.Option("--wandb", help="Also build a W&B report and print its URL (needs a login)."),
    ] = False,
    confidence: Annotated[
        float, typer.Option(help="Confidence level of the bootstrap intervals.", min=0.5, max=0.999)
    ] = 0.95,
) -> None:
    """Rollouts-to-target speedups against the baseline: table, files, plots, W&B report.

    Per allocator: rollouts (tokens, seconds) to reach the spec's target, and the speedup with a bootstrap interval over seeds.

    Files and plots go to RUNDIR/report/; docs/report.md defines every number.

    Examples:

      rollcli report runs/quickstart

      rollcli report runs/quickstart --format md,csv --out /tmp/qs --no-plots

      rollcli report runs/pc-vs-grpo --wandb
    """
    from rich.console import Console

    from rollcli.analysis.report import parse_formats, write_report
    from rollcli.analysis.summary import print_analysis
    from rollcli.store.folders import RunFolder

    run = RunFolder(run_dir)
    if run.is_sweep:
        from rollcli.errors import RollcliError

        raise RollcliError(
            f"{run_dir} is a sweep run folder: its points reuse allocator names, so one table "
            f"would mix them. Its report is {run.report / 'ablation.md'} (rebuilt by "
            "rerunning `rollcli sweep FILE`, which skips finished jobs)"
        )
    console = Console()
    result = write_report(
        run_dir, formats=parse_formats(formats), out=out, plots=plots, confidence=confidence
    )
    analysis = result.analysis
    tables = [p for p in result.files if p.suffix in (".md", ".csv", ".json", ".tex")]
    print_analysis(analysis, console, full_table=str(tables[0]) if tables else "--format md")
    if result.files:
        console.print(f"wrote {len(result.files)} files:", highlight=False)
        for path in result.files:
            console.print(f"  {path}", highlight=False, soft_wrap=True)
    if wandb:
        from rollcli.analysis.wandb_report import publish_wandb_report

        published = publish_wandb_report(analysis)
        for message in published.messages:
            console.print(message, highlight=False, soft_wrap=True)
        if published.url:
            console.print(f"W&B report: {published.url}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
