"""The ``rollcli`` command: a thin typer app assembled from one module per command group.

Command modules import only typer/rich at module level; everything heavy (torch, verl, wandb,
submitit) is imported inside command bodies so ``rollcli --help`` starts fast.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer

from rollcli import __version__
from rollcli.errors import RollcliError

__all__ = ["app", "main"]

app = typer.Typer(
    name="rollcli",
    help="Declarative experiments on where to spend rollouts in group-based RL post-training.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Each module defines ``register(app: typer.Typer) -> None``.
COMMAND_MODULES: list[str] = [
    "run", "plan", "spec", "runs", "report", "eval", "sweep", "data", "doctor"
]  # fmt: skip


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rollcli {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """rollcli: compile a YAML spec into jobs, run them, and report rollouts-to-target speedups."""


for _name in COMMAND_MODULES:
    importlib.import_module(f"rollcli.cli.{_name}").register(app)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: domain errors become one line and an exit code."""
    from rollcli.store.damaged import reset_warnings

    reset_warnings()  # each command warns once about each damaged file it reads
    try:
        app(args=argv, standalone_mode=True)
    except RollcliError as error:
        if os.environ.get("ROLLCLI_DEBUG") == "1":
            raise
        typer.secho(f"error: {error}", fg=typer.colors.RED, err=True)
        sys.exit(error.exit_code)
    except OSError as error:  # a path the user gave that cannot be read or written
        if os.environ.get("ROLLCLI_DEBUG") == "1" or error.strerror is None:
            raise
        where = f"{error.filename}: " if error.filename is not None else ""
        typer.secho(
            f"error: {where}{error.strerror} (ROLLCLI_DEBUG=1 shows where)",
            fg=typer.colors.RED,
            err=True,
        )
        sys.exit(1)
