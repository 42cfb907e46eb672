"""``rollcli plan``: the dry run of a spec — jobs, resources, expected rollouts and tokens."""

from __future__ import annotations

import json
import shlex
import textwrap
from pathlib import Path
from typing import Annotated

import typer

from rollcli.cli._options import (
    JsonOpt,
    OverridesArg,
    RunsDirOpt,
    SpecArg,
    console,
    load_spec_or_sweep_hint,
)

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
            budget_table,
            fmt_int,
            fmt_span,
            plan_summary_table,
            plan_table,
            plan_totals,
        )
        from rollcli.plan import build_plan
        from rollcli.plan.budget import allocator_budgets
        from rollcli.plan.scale import scale_warnings

        spec_obj = load_spec_or_sweep_hint(spec, overrides, runs_dir)
        built = build_plan(spec_obj)
        jobs = built.to_manifest()["jobs"]
        budgets = allocator_budgets(spec_obj)
        totals = plan_totals(jobs, budgets)
        warnings = scale_warnings(spec_obj)
        if as_json:
            typer.echo(
                json.dumps(
                    {
                        "experiment": built.experiment,
                        "totals": totals,
                        "budget": [b.to_json() for b in budgets],
                        "jobs": jobs,
                        "warnings": warnings,
                    }
                )
            )
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
        out.print(f"\n[bold]rollouts per train job[/bold] ({steps} steps)")
        out.print(budget_table(budgets))
        out.print(
            "[dim]trained = budget.rollouts_per_step x steps, the same for every allocator;\n"
            "<= x: at most; the allocator may train fewer (a drained pool, stopped rounds);\n"
            "generated depends on the rewards: each allocator states its range per step\n"
            "(docs/spec.md, Budgets)[/dim]"
        )
        generated = totals["generated"]
        at_most = "" if all(b.trained_exact for b in budgets) else "<= "
        tokens = (
            "tokens unknown"
            if totals["tokens"] is None
            else f"~{fmt_int(totals['tokens'])} tokens trained"
        )
        out.print(
            f"{totals['jobs']} jobs ({totals['train']} train, {totals['eval']} eval, 1 report); "
            f"{steps} steps x {fmt_int(rps)} trained rollouts per job\n"
            f"total: {at_most}{fmt_int(totals['rollouts'])} rollouts trained, "
            f"{fmt_span(generated['min'], generated['max'])} generated; {tokens}"
        )
        for warning in warnings:
            out.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
        report = next(j for j in jobs if j["type"] == "report")
        if (
            executor == "slurm"
            and "gpu_hours_reserved" in totals
            and spec_obj.launch.cpu_partition is None
            and report["resources"]["partition"] is not None
        ):
            out.print(
                f"[dim]the report job needs no GPU but queues on {report['resources']['partition']}"
                "; name a CPU partition, e.g.:\n  "
                + shlex.join(
                    ["rollcli", "plan", str(spec), *(overrides or []), "launch.cpu_partition=cpu"]
                )
                + "[/dim]"
            )
        if "gpu_hours_reserved" in totals:
            out.print(
                f"GPU-hours reserved (time limit x GPUs, an upper bound): "
                f"{totals['gpu_hours_reserved']:,.0f}"
            )
        if executor == "slurm":
            from rollcli.launch.preemption import plan_preemption, preemption_summary

            every = getattr(spec_obj.backend, "save_freq", None) or spec_obj.checkpoint.every
            preemption = plan_preemption(
                spec_obj.launch.model_dump(), every, steps, runs_dir / built.experiment
            )
            out.print("\n[bold]time limit and pre-emption[/bold] (per train job)")
            for line in preemption_summary(preemption):
                wrapped = textwrap.fill(line, 78, initial_indent="  ", subsequent_indent="    ")
                out.print(wrapped, markup=False)
        if sbatch:  # the scripts `launch.executor: slurm` submits (rollcli/launch/sbatch.py)
            from rollcli.launch.sbatch import render_run_scripts

            run_dir = runs_dir / built.experiment
            for title, text in render_run_scripts(built, run_dir, spec_obj.launch.model_dump()):
                out.print(f"\n# {title}", markup=False)
                out.print(text, markup=False)
