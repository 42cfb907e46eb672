"""``rollcli doctor [SPEC]``: one line per preflight check of this node, with its fix."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rollcli.cli._options import OverridesArg, RunsDirOpt, console

__all__ = ["register"]

EPILOG = """[bold]Examples[/bold]

  rollcli doctor experiments/pc-1.5b-h200.yaml                 # on the login node

  srun -p h200 --gpus-per-node=1 rollcli doctor experiments/pc-1.5b-h200.yaml   # on a GPU node

  rollcli doctor                                          # the GPU stack only

Exit code 1 when a check fails. docs/verl.md, Running on your cluster, explains each check.
"""


def register(app: typer.Typer) -> None:
    @app.command("doctor", epilog=EPILOG)
    def doctor(
        spec: Annotated[
            Path | None,
            typer.Argument(help="The experiment spec to check for.", show_default=False),
        ] = None,
        overrides: OverridesArg = None,
        runs_dir: RunsDirOpt = Path("runs"),
    ) -> None:
        """Check this node for a first GPU run of SPEC: versions, CUDA, sandbox, caches, Slurm."""
        from rollcli.doctor import Context, failed, render, run_checks

        spec_obj = None
        if spec is not None:
            from rollcli.cli._options import load_spec_or_sweep_hint

            spec_obj = load_spec_or_sweep_hint(spec, overrides, runs_dir)
        ctx = Context(spec=spec_obj, spec_file=str(spec) if spec else None, runs_dir=runs_dir)
        checks = run_checks(ctx)
        out = console()
        for line in render(checks):
            out.print(line, markup=False)
        bad = failed(checks)
        if bad:
            out.print(f"{len(bad)} check(s) failed", markup=False)
            raise typer.Exit(1)
