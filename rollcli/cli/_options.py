"""Option and argument types shared by the command modules (typer ``Annotated`` aliases).

Imports only typer and the standard library, so ``rollcli --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = [
    "SpecArg",
    "OverridesArg",
    "RunsDirOpt",
    "RunDirArg",
    "JsonOpt",
    "console",
    "run_dir_for",
]

SpecArg = Annotated[
    Path,
    typer.Argument(
        help="The experiment spec (YAML), e.g. experiments/quickstart.yaml.", show_default=False
    ),
]
OverridesArg = Annotated[
    list[str] | None,
    typer.Argument(
        help="Overrides in Hydra's grammar: key=value, +key=value (add), ~key (delete).",
        show_default=False,
    ),
]
RunsDirOpt = Annotated[
    Path,
    typer.Option("--runs-dir", help="Parent folder of run folders (the run is <runs-dir>/<name>)."),
]
RunDirArg = Annotated[
    Path, typer.Argument(help="A run folder, e.g. runs/quickstart.", show_default=False)
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead.")]


def console(**kwargs: Any) -> Any:
    """A rich console for command output (imported lazily)."""
    from rich.console import Console

    return Console(highlight=False, **{"soft_wrap": True, **kwargs})


def run_dir_for(runs_dir: Path, name: str) -> Path:
    return runs_dir / name
