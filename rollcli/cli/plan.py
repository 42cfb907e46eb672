"""``rollcli plan``: the dry run of a spec — jobs, resources, expected rollouts and tokens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from rollcli.cli._options import JsonOpt, OverridesArg, RunsDirOpt, SpecArg, console

__all__ = ["register"]

EPILOG = """[bold]Examples[/bold]

  rollcli plan experiments/quickstart.yaml

  rollcli plan experiments/quickstart.yaml seeds=[0,1,2,3] --all

  rollcli plan experiments/quickstart.yaml --json | jq '.jobs[].id'

Nothing is created or started. Job ids are hashes of the resolved job configs: the same spec
gives the same ids on every machine.
"""


def register(app: typer.Typer) -> None:
    @app.command("plan", epilog=EPILOG)
    def plan(
        spec: SpecArg,
        overrides: OverridesArg = None,
        runs_dir: RunsDirOpt = Path("runs"),
        as_json: JsonOpt = False,
        show_all: Annotated[
            bool, typer.Option("--all", help="List every job even when there are many.")
        ] = False,
        sbatch: Annotated[
            bool, typer.Option("--sbatch", help="Also print the exact sbatch scripts (Slurm).")
        ] = False,
    ) -> None:
        """Show the jobs SPEC compiles to, without running anything."""
        from rollcli.cli._render import (
            MAX_PLAN_ROWS,
            fmt_int,
            plan_summary_table,
            plan_table,
            plan_totals,
        )
        from rollcli.plan import build_plan
        from rollcli.spec import load_spec

        spec_obj = load_spec(spec, overrides or [])
        built = build_plan(spec_obj)
        jobs = built.to_manifest()["jobs"]
        totals = plan_totals(jobs)
        if as_json:
            typer.echo(json.dumps({"experiment": built.experiment, "totals": totals, "jobs": jobs}))
            return
        out = console()
        executor = spec_obj.launch.executor
        out.print(
            f"[bold]{built.experiment}[/bold] -> {runs_dir / built.experiment}  "
            f"({executor} executor, backend {spec_obj.backend.kind})"
        )
        if len(jobs) <= MAX_PLAN_ROWS or show_all:
            out.print(plan_table(jobs, executor))
        else:
            out.print(plan_summary_table(jobs, executor))
            out.print(f"[dim]{len(jobs)} jobs: grouped by allocator; --all lists each job[/dim]")
        steps = spec_obj.budget.steps
        rps = spec_obj.budget.rollouts_per_step
        tokens = (
            "tokens unknown (no estimate from the backend)"
            if totals["tokens"] is None
            else f"~{fmt_int(totals['tokens'])} tokens"
        )
        out.print(
            f"{totals['jobs']} jobs ({totals['train']} train, {totals['eval']} eval, 1 report); "
            f"{steps} steps x {fmt_int(rps)} rollouts per train job; "
            f"total {fmt_int(totals['rollouts'])} rollouts, {tokens}"
        )
        if sbatch:  # the scripts `launch.executor: slurm` submits (rollcli/launch/sbatch.py)
            from rollcli.launch.sbatch import render_run_scripts

            run_dir = runs_dir / built.experiment
            for title, text in render_run_scripts(built, run_dir, spec_obj.launch.model_dump()):
                out.print(f"\n# {title}", markup=False)
                out.print(text, markup=False)
