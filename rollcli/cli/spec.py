"""Spec commands: ``rollcli validate``, ``rollcli schema`` and ``rollcli init``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated

import typer

from rollcli.cli._options import OverridesArg, SpecArg, console, load_spec_or_sweep_hint
from rollcli.errors import suggest

__all__ = ["allocator_kinds_listing", "register"]

VALIDATE_EPILOG = """[bold]Examples[/bold]

  rollcli validate experiments/quickstart.yaml

  rollcli validate experiments/quickstart.yaml allocators.pc.p_upper=0.8 --print

Exit code 0 when the spec is valid, 2 with file:line:column and the field when it is not.
"""

SCHEMA_EPILOG = """[bold]Examples[/bold]

  rollcli schema > rollcli.schema.json

  rollcli schema --output .vscode/rollcli.schema.json

Point your editor's YAML language server at it for completion, e.g. a first line
[dim]# yaml-language-server: $schema=rollcli.schema.json[/dim]
"""

INIT_EPILOG = """[bold]Examples[/bold]

  rollcli init my-experiment

  rollcli init pc-1.5b --template verl-slurm --dir experiments

  rollcli init --list
"""


def _one_line(text: str | None, width: int) -> str:
    """The first line of ``text`` without reST quotes, cut to ``width`` characters."""
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    line = line.replace("``", "").rstrip(".,;: ")
    if len(line) > width:
        line = line[: width - 4].rsplit(" ", 1)[0].rstrip(",;:(") + " ..."
    return line


def _kind_description(kind: str, width: int) -> str:
    """An allocator kind in one line: its module docstring's first line (plug-ins: the class's)."""
    import sys

    from rollcli.allocators.registry import ALLOCATORS

    cls = ALLOCATORS[kind][1]
    module = sys.modules.get(cls.__module__)
    return _one_line(getattr(module, "__doc__", None) or cls.__doc__, width)


def allocator_kinds_listing(width: int = 80) -> list[str]:
    """Two lines per registered allocator kind (plug-ins included): what it is, its presets;
    each at most ``width`` characters."""
    from rollcli.allocators.registry import PRESETS, allocator_kinds

    kinds = allocator_kinds()
    pad = max(map(len, kinds), default=0) + 2
    lines = []
    for kind in kinds:
        lines.append(f"{kind:<{pad}}{_kind_description(kind, width - pad - 2)}".rstrip())
        presets = ", ".join(sorted(PRESETS[kind]))
        if presets:
            import textwrap

            lines += textwrap.wrap(
                f"presets: {presets}",
                width - 2,
                initial_indent=" " * pad,
                subsequent_indent=" " * (pad + 9),
                break_on_hyphens=False,
            )
    return lines


def template_listing(names: list[str], width: int = 80) -> list[str]:
    """One line per spec template: its name and its ``description:`` (else its first comment)."""
    import re

    from rollcli.spec.templates import templates_dir

    pad = max(map(len, names), default=0) + 2
    lines = []
    for name in names:
        text = (templates_dir() / f"{name}.yaml").read_text("utf-8")
        found = re.search(r"(?m)^description:\s*(.+)$", text) or re.search(r"(?m)^#\s*(.+)$", text)
        about = _one_line(found.group(1).strip("'\"") if found else "", width - pad - 2)
        lines.append(f"{name:<{pad}}{about}".rstrip())
    return lines


def register(app: typer.Typer) -> None:
    @app.command("validate", epilog=VALIDATE_EPILOG)
    def validate(
        spec: SpecArg,
        overrides: OverridesArg = None,
        show: Annotated[
            bool, typer.Option("--print", help="Print the resolved spec (YAML).")
        ] = False,
    ) -> None:
        """Check SPEC (with overrides) without creating anything."""
        from rollcli.plan import build_plan
        from rollcli.store.layout import dump_yaml

        spec_obj = load_spec_or_sweep_hint(spec, overrides, None)
        if show:
            typer.echo(dump_yaml(spec_obj.to_dict()), nl=False)
            return
        plan = build_plan(spec_obj)
        num_train = len(plan.by_type("train"))
        bases = f" x {len(spec_obj.base_seeds)} base models" if spec_obj.base_seeds else ""
        console().print(
            f"[green]ok[/green]: {spec} — {len(spec_obj.allocators)} allocators x "
            f"{len(spec_obj.seeds)} seeds{bases} = {num_train} train jobs, backend "
            f"{spec_obj.backend.kind}, {spec_obj.launch.executor} executor"
        )
        from rollcli.plan.scale import scale_warnings

        for warning in scale_warnings(spec_obj):
            console().print(f"[yellow]warning:[/yellow] {warning}", highlight=False)

    @app.command("schema", epilog=SCHEMA_EPILOG)
    def schema(
        output: Annotated[
            Path | None, typer.Option("--output", "-o", help="Write to this file.")
        ] = None,
    ) -> None:
        """Print the JSON Schema of the spec (for editor completion and validation)."""
        from rollcli.spec import spec_json_schema

        text = json.dumps(spec_json_schema(), indent=2) + "\n"
        if output is None:
            typer.echo(text, nl=False)
            return
        from rollcli.errors import RollcliError
        from rollcli.store.atomic import atomic_write_text

        if output.is_dir():
            raise RollcliError(
                f"{output} is a folder; give a file name, e.g. {output / 'rollcli.schema.json'}"
            )
        atomic_write_text(output, text)
        console().print(f"wrote {output}")

    @app.command("init", epilog=INIT_EPILOG)
    def init(
        name: Annotated[
            str | None, typer.Argument(help="Experiment name (letters, digits, _ and -).")
        ] = None,
        template: Annotated[
            str, typer.Option("--template", "-t", help="Template in rollcli/templates/specs.")
        ] = "quickstart",
        directory: Annotated[Path, typer.Option("--dir", help="Where to write NAME.yaml.")] = Path(
            "experiments"
        ),
        force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
        list_templates: Annotated[
            bool, typer.Option("--list", help="List the templates and exit.")
        ] = False,
    ) -> None:
        """Create a new spec NAME.yaml from a template."""
        from rollcli.errors import RollcliError
        from rollcli.spec.templates import template_names, templates_dir
        from rollcli.store.atomic import atomic_write_text

        names = template_names(complete=True)
        kinds = allocator_kinds_listing()
        if list_templates:
            typer.echo("templates (rollcli init NAME --template TEMPLATE):")
            for line in template_listing(names):
                typer.echo(f"  {line}")
            typer.echo("\nallocator kinds (knobs: rollcli schema; docs/allocators.md):")
            for line in kinds:
                typer.echo(f"  {line}")
            return
        if not name:
            raise RollcliError("give a name: rollcli init NAME (templates: rollcli init --list)")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", name):
            raise RollcliError(
                f"'{name}' is not a valid experiment name; use letters, digits, '_' and '-'"
            )
        if template not in names:
            hint = suggest(template, names, sentence=True)
            raise RollcliError(f"unknown template '{template}'.{hint} Valid: {', '.join(names)}.")
        if directory.exists() and not directory.is_dir():
            raise RollcliError(f"--dir {directory} is a file, not a folder")
        target = directory / f"{name}.yaml"
        if target.exists() and not force:
            raise RollcliError(f"{target} exists; pick another name or add --force")
        text = (templates_dir() / f"{template}.yaml").read_text("utf-8")
        text, count = re.subn(r"(?m)^name:.*$", f"name: {name}", text, count=1)
        if not count:
            text = f"name: {name}\n{text}"
        text = text.rstrip("\n") + "\n\n# Allocator kinds installed here (knobs: rollcli schema):\n"
        text += "".join(f"#   {line}\n" for line in kinds)
        atomic_write_text(target, text)
        console().print(
            f"wrote {target}\n  check it:  rollcli validate {target}\n  run it:    rollcli run {target}"
        )
