"""``rollcli sweep``: a base spec plus axes, run as one set of deduplicated jobs, then an ablation."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from rollcli.cli._options import OverridesArg, RunsDirOpt, console

__all__ = ["register"]

EPILOG = """[bold]Examples[/bold]

  rollcli sweep sweeps/pc-thresholds.yaml --dry-run

  rollcli sweep sweeps/pc-thresholds.yaml

  rollcli sweep sweeps/vigor-alpha-gamma.yaml budget.steps=40 -j 2

Axes (grid, zip, random/Sobol samples) use Hydra's grammar: 0.1,0.2 | range(0,5) | choice(a,b) |
interval(0,1). Jobs that several points share run once. Rerunning resumes an unfinished sweep;
rollcli status / cancel RUNDIR act on the whole sweep. Report files land in RUNDIR/report/.
"""


def _print_points(sweep_plan: Any, out: Any, limit: int = 50) -> None:
    from rich.table import Table

    keys = sweep_plan.sweep.swept_keys
    table = Table(title=f"{sweep_plan.sweep.name}: {len(sweep_plan.points)} points")
    table.add_column("point", justify="right")
    for key in keys:
        table.add_column(key.rsplit(".", 1)[-1], justify="right")
    table.add_column("jobs", justify="right")
    for point in sweep_plan.points[:limit]:
        values = point.labels
        num_jobs = sum(len(ids) for ids in point.jobs.values())
        table.add_row(str(point.index), *(str(values.get(k, "")) for k in keys), str(num_jobs))
    out.print(table)
    if len(sweep_plan.points) > limit:
        out.print(f"... and {len(sweep_plan.points) - limit} more points")


def register(app: typer.Typer) -> None:
    @app.command("sweep", epilog=EPILOG)
    def sweep(
        sweep_file: Annotated[
            Path,
            typer.Argument(
                help="The sweep file (YAML), e.g. sweeps/pc-thresholds.yaml.", readable=False
            ),
        ],
        overrides: OverridesArg = None,
        runs_dir: RunsDirOpt = Path("runs"),
        dry_run: Annotated[
            bool, typer.Option("--dry-run", help="Show the points and job count; run nothing.")
        ] = False,
        max_parallel: Annotated[
            int | None,
            typer.Option(
                "--max-parallel", "-j", min=1, help="Jobs at once (local; default: cores)."
            ),
        ] = None,
        detach: Annotated[
            bool, typer.Option("--detach", help="Submit and return (Slurm only).")
        ] = False,
        plots: Annotated[
            bool, typer.Option("--plots/--no-plots", help="Write ablation plots.")
        ] = True,
    ) -> None:
        """Run an ablation sweep over any spec keys and report speedup against each axis."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        from rollcli.extras import require_spec_extras
        from rollcli.sweep.file import load_sweep_file
        from rollcli.sweep.plan import plan_sweep

        out = console()
        sweep_plan = plan_sweep(load_sweep_file(sweep_file, overrides or []))
        for point in sweep_plan.points:  # a swept backend kind may need its own extra
            require_spec_extras(point.spec, sweep_file)
        run_dir = runs_dir / sweep_plan.sweep.name
        dedup = sweep_plan.num_point_jobs - len(sweep_plan.plan)
        if dry_run:
            from rollcli.store.folders import RunFolder
            from rollcli.store.state import read_state

            _print_points(sweep_plan, out)
            # what is left: a finished job (same content hash, already in the folder) is skipped
            done = sum(
                read_state(RunFolder(run_dir).job(job.id).path)["status"] == "done"
                for job in sweep_plan.plan
                if job.type != "report"
            )
            left = len(sweep_plan.plan) - done
            already = f"{done} already done, " if done else ""
            out.print(
                f"{len(sweep_plan.points)} points -> {left} jobs to run ({already}"
                f"{sweep_plan.num_point_jobs} point-jobs; {dedup} repeats run once) -> {run_dir}"
            )
            return
        from rollcli.sweep.run import run_sweep

        progress = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=out,
            transient=False,
        )
        task: list[Any] = []

        def on_start(jobs: list[Any], skipped: list[str]) -> None:
            out.print(
                f"[bold]{sweep_plan.sweep.name}[/bold]: {len(sweep_plan.points)} points, "
                f"{len(jobs)} jobs ({len(skipped)} already done; {dedup} repeats run once) -> {run_dir}"
            )
            if not detach:
                progress.start()
                task.append(progress.add_task("jobs", total=len(jobs), completed=len(skipped)))

        def on_tick(statuses: dict[str, str]) -> None:
            if task:
                done = sum(1 for s in statuses.values() if s in ("done", "failed", "cancelled"))
                progress.update(task[0], completed=len(sweep_plan.plan) - len(statuses) + done)

        command = "rollcli " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        try:
            result = run_sweep(
                sweep_plan,
                run_dir,
                max_parallel=max_parallel,
                detach=detach,
                on_tick=on_tick,
                on_start=on_start,
                command=command,
                spec_file=str(sweep_file),
            )
        finally:
            if task:
                progress.stop()
        if result.detached:
            out.print(f"submitted; follow with: rollcli status {run_dir}")
            return
        if result.interrupted:
            where = [] if runs_dir == Path("runs") else ["--runs-dir", str(runs_dir)]
            again = " ".join(shlex.quote(a) for a in [str(sweep_file), *(overrides or []), *where])
            out.print(f"[yellow]stopped; rerun to resume: rollcli sweep {again}[/yellow]")
            raise typer.Exit(130)
        from rollcli.analysis.ablation import ablation_table
        from rollcli.jobs.report import write_sweep_report

        ablation, files = write_sweep_report(run_dir, plots=plots)
        if ablation.is_suite:
            from rollcli.analysis.robustness import robustness, robustness_table

            rob = robustness(ablation)
            out.print(robustness_table(rob))
            if rob.holdout:
                out.print(robustness_table(rob, held=True))
        else:
            out.print(ablation_table(ablation, best_only=True, max_width=out.width))
        for warning in ablation.warnings[:5]:
            out.print(f"[yellow]warning: {warning}[/yellow]")
        out.print(
            f"ablation report: {', '.join(str(f) for f in files[:3])} (+{len(files) - 3} plots)"
        )
        if result.failed:
            typer.secho(
                f"error: {len(result.failed)} job(s) failed; see rollcli status {run_dir}",
                fg=typer.colors.RED,
                err=True,
            )
            raise typer.Exit(1)
