"""``rollcli report RUN [RUN ...]``: the rollouts-to-target table, report files, plots, W&B report.

Thin: parses options, reads the run folders (:func:`rollcli.analysis.compare.load_runs`), calls
:func:`rollcli.analysis.report.write_report` (and :func:`rollcli.analysis.wandb_report.
publish_wandb_report` with ``--wandb``), renders with rich.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["register", "report"]


def _out_dir(
    runs: list[Path], out: Path | None, target: str | None = None, baseline: str | None = None
) -> Path:
    """Where the files go: ``--out``, else RUN/report, or for several runs
    ``RUN1/report/vs-<RUN2>[-<RUN3>...]`` (the first run's report folder is left alone); a
    ``--target`` or ``--baseline`` other than the spec's adds its own subfolder
    (``target-0.9``, ``baseline-dapo``), so the run's own report is never overwritten."""
    import re

    from rollcli.store.folders import RunFolder

    if out is not None:
        return out
    folder = RunFolder(runs[0]).report
    if len(runs) > 1:
        folder = folder / ("vs-" + "-".join(p.resolve().name for p in runs[1:]))
    parts = [f"target-{target.strip().lower()}"] if target is not None else []
    parts += [f"baseline-{baseline}"] if baseline is not None else []
    if parts:
        folder = folder / re.sub(r"[^A-Za-z0-9._-]+", "-", "-".join(parts))
    return folder


def _suite_report(
    run_dir: Path,
    *,
    out: Path | None,
    as_json: bool,
    plots: bool,
    target: str | None = None,
    baseline: str | None = None,
) -> bool:
    """``rollcli report`` of a suite's run folder (a sweep with scenarios): its ablation files,
    ``robustness.md`` and ``report.json``, and the robustness tables, every scenario at the
    spec's target or ``--target``/``--baseline`` (then in their own subfolder). False for
    another sweep."""
    import json

    from rich.console import Console

    from rollcli.analysis.ablation import (
        analyze_sweep,
        load_sweep_manifest,
        suite_report_json,
        write_ablation,
    )
    from rollcli.analysis.robustness import robustness, robustness_table
    from rollcli.errors import RollcliError

    if not load_sweep_manifest(run_dir).get("scenarios"):
        return False
    if out is not None and str(out) == "-":
        raise RollcliError(
            f"{run_dir} is a suite: its report is several files; use --json for report.json "
            "on stdout, or --out DIR"
        )
    from rollcli.analysis.compare import parse_target

    override = parse_target(target, baseline)
    ablation = analyze_sweep(run_dir, target_override=override)
    files = write_ablation(ablation, _out_dir([run_dir], out, target, baseline), plots=plots)
    if as_json:
        typer.echo(json.dumps(suite_report_json(ablation)))
        return True
    console = Console()
    rob = robustness(ablation)
    console.print(robustness_table(rob))
    if rob.holdout:
        console.print(robustness_table(rob, held=True))
    for warning in ablation.warnings[:5]:
        console.print(f"[yellow]warning: {warning}[/yellow]")
    console.print(f"wrote {len(files)} files under {files[0].parent}", highlight=False)
    return True


def report(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(
            help="Run folders made by `rollcli run` (runs/<experiment>); several are compared.",
            show_default=False,
            readable=False,  # an unreadable folder: one `error:` line from the store, no box
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
        typer.Option(
            "--out",
            "-o",
            help="Folder for the files (default: RUN/report); '-' prints one --format to stdout.",
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            help="Override the spec's target: final, peak (the baseline's), a value, e.g. 0.9, "
            "or rise:F, F of the baseline's rise from its first to its final accuracy.",
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="The allocator speedups are against (name or run/name)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the report as JSON (stdout) instead of a table.")
    ] = False,
    plots: Annotated[
        bool, typer.Option("--plots/--no-plots", help="Write the figures (PDF and PNG).")
    ] = True,
    wandb: Annotated[
        bool,
        typer.Option("--wandb", help="Also build a W&B report and print its URL (needs a login)."),
    ] = False,
    allow_mismatch: Annotated[
        bool,
        typer.Option(
            "--allow-mismatch",
            help="Compare run folders whose backend, budget or eval differ (with a warning).",
        ),
    ] = False,
    confidence: Annotated[
        float, typer.Option(help="Confidence level of the bootstrap intervals.", min=0.5, max=0.999)
    ] = 0.95,
) -> None:
    """Rollouts-to-target speedups against the baseline: table, files, plots, W&B report.

    Per allocator: rollouts (tokens, seconds) to reach the target, and the speedup against the
    baseline, with a bootstrap interval over seeds (5 seeds or more) or each seed's own speedup.
    Several run folders are compared in one table (seeds of the same number paired). A suite's
    run folder (`rollcli sweep` of a file with scenarios) gets its robustness table: speedup per
    scenario, wins/ties/losses and the geometric mean, the hold-out scenarios apart.

    Files and plots go to RUN/report/; docs/report.md defines every number.

    Examples:

      rollcli report runs/quickstart

      rollcli report runs/quickstart runs/quickstart-3f2a9c --target peak

      rollcli report runs/quickstart --json | jq '.allocators.pc.speedup'

      rollcli report runs/quickstart --out - --format md

      rollcli report runs/pc-vs-grpo --wandb

      rollcli report runs/suite-sim
    """
    import json

    from rich.console import Console

    from rollcli.analysis.analyze import analyze_run
    from rollcli.analysis.compare import load_runs, parse_target
    from rollcli.analysis.report import (
        RENDERERS,
        check_out_dir,
        parse_formats,
        render_json,
        write_report,
    )
    from rollcli.analysis.summary import print_analysis
    from rollcli.errors import RollcliError
    from rollcli.store.folders import RunFolder
    from rollcli.text import plural

    if len(run_dirs) == 1 and RunFolder(run_dirs[0]).is_sweep:
        suite = _suite_report(
            run_dirs[0], out=out, as_json=as_json, plots=plots, target=target, baseline=baseline
        )
        if suite:
            return
    for run_dir in run_dirs:
        run = RunFolder(run_dir)
        if run.is_sweep:
            raise RollcliError(
                f"{run_dir} is a sweep run folder: its points reuse allocator names, so one table "
                f"would mix them. Its report is {run.report / 'ablation.md'} (rebuilt by "
                "rerunning the `rollcli sweep` command that made it, which skips finished jobs)"
            )
    names = parse_formats(formats)
    to_stdout = out is not None and str(out) == "-"
    if to_stdout and (len(names) != 1 or as_json):
        raise RollcliError(
            "--out - prints one table format to stdout: add --format md (or latex, csv, json), "
            "e.g. rollcli report " + " ".join(str(p) for p in run_dirs) + " --out - --format md"
        )
    if wandb and len(run_dirs) > 1:
        raise RollcliError("--wandb reports one run folder at a time (W&B groups runs by it)")
    if wandb:
        from rollcli.extras import require_extra

        require_extra("wandb", "rollcli report --wandb")
    if not to_stdout:
        check_out_dir(_out_dir(list(run_dirs), out, target, baseline))
    data = load_runs(run_dirs, target=parse_target(target, baseline), allow_mismatch=allow_mismatch)
    analysis = analyze_run(data, confidence=confidence)
    if to_stdout:
        text = RENDERERS[names[0]](analysis)
        typer.echo(text if isinstance(text, str) else json.dumps(text, indent=2), nl=False)
        return
    result = write_report(
        run_dirs[0],
        formats=names,
        out=_out_dir(list(run_dirs), out, target, baseline),
        plots=plots,
        analysis=analysis,
    )
    if as_json:
        typer.echo(json.dumps(render_json(analysis)))
        return
    console = Console()
    tables = [p for p in result.files if p.suffix in (".md", ".csv", ".json", ".tex")]
    print_analysis(analysis, console, full_table=str(tables[0]) if tables else "--format md")
    from rollcli.analysis.breakdown import breakdown_table, run_breakdown

    if breakdown := run_breakdown(analysis.run):
        console.print(breakdown_table(breakdown, max_width=console.width))
    if result.files:
        console.print(f"wrote {plural(len(result.files), 'file')}:", highlight=False)
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
