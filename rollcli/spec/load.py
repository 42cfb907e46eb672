"""Load a spec file into a frozen, validated ``Spec``: compose, override, interpolate, validate.

This is the one entry point the CLI, the planner and the sweep engine use. Nothing is written
to disk here; a bad spec raises :class:`rollcli.errors.SpecError` (exit code 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rollcli.spec.extends import compose_file
from rollcli.spec.overrides import apply_overrides
from rollcli.spec.resolve import expand_presets, resolve_interpolations
from rollcli.spec.yamlio import Marks

__all__ = ["load_spec", "load_spec_data", "resolve_spec_data", "spec_from_dict"]


def resolve_spec_data(
    data: dict[str, Any], marks: Marks, overrides: Sequence[str] = ()
) -> tuple[dict[str, Any], Marks]:
    """Composed data with ``overrides`` applied, then interpolations and presets resolved.

    ``data`` and ``marks`` are changed in place: pass copies to resolve one composed file under
    several sets of overrides (the sweep engine does).
    """
    from rollcli.spec.limits import check_top_level_keys
    from rollcli.spec.models import spec_model

    data = apply_overrides(data, marks, list(overrides))
    check_top_level_keys(data, marks, spec_model().model_fields)
    data = resolve_interpolations(data, marks)
    data = expand_presets(data, marks)
    return data, marks


def load_spec_data(path: str | Path, overrides: Sequence[str] = ()) -> tuple[dict[str, Any], Marks]:
    """The composed raw data of a spec (bases merged, overrides applied, interpolations and
    presets resolved) and the source marks of its values; not yet validated."""
    data, marks = compose_file(Path(path))
    return resolve_spec_data(data, marks, overrides)


def load_spec(path: str | Path, overrides: Sequence[str] = ()) -> Any:
    """Load and validate a spec file with command-line overrides (Hydra grammar)."""
    from rollcli.spec.validate import validate_spec

    data, marks = load_spec_data(path, overrides)
    return validate_spec(data, marks)


def spec_from_dict(data: dict[str, Any], source: str = "<spec>") -> Any:
    """Validate an already-composed spec mapping (e.g. a manifest's resolved spec)."""
    from rollcli.spec.validate import validate_spec
    from rollcli.spec.yamlio import Mark

    marks = Marks()
    marks.values[()] = Mark(source)
    return validate_spec(data, marks)
