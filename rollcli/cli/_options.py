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
    "load_spec_or_sweep_hint",
]

SpecArg = Annotated[
    Path,
    typer.Argument(
        help="The experiment spec (YAML), e.g. experiments/quickstart.yaml.",
        show_default=False,
        readable=False,  # the loader says why it cannot read it, in one line (not click's box)
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
    Path,
    typer.Argument(help="A run folder, e.g. runs/quickstart.", show_default=False, readable=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead.")]


def console(**kwargs: Any) -> Any:
    """A rich console for command output (imported lazily)."""
    from rich.console import Console

    return Console(highlight=False, **{"soft_wrap": True, **kwargs})


def run_dir_for(runs_dir: Path, name: str) -> Path:
    return runs_dir / name


def load_spec_or_sweep_hint(
    spec: Path, overrides: list[str] | None, runs_dir: Path | None = None
) -> Any:
    """``load_spec``; an override with several values (``key=a,b``) fails with the exact
    ``rollcli sweep`` command that runs it (the same spec and overrides). A spec whose backend
    or tracking needs a pip extra that is not installed fails here, naming the extra."""
    import shlex

    from rollcli.errors import SpecError
    from rollcli.extras import require_spec_extras
    from rollcli.spec import load_spec
    from rollcli.spec.overrides import SweepOverrideError

    try:
        spec_obj = load_spec(spec, overrides or [])
    except SweepOverrideError as error:
        where = [] if runs_dir in (None, Path("runs")) else ["--runs-dir", str(runs_dir)]
        command = shlex.join(["rollcli", "sweep", str(spec), *(overrides or []), *where])
        raise SpecError(f"{error}: {command} --dry-run") from None
    require_spec_extras(spec_obj, spec)
    return spec_obj
