"""``extends:``: a spec's bases (template names or relative paths) merged under it, recursively.

Mappings merge recursively; lists and scalars are replaced; a mapping whose ``kind`` changes is
replaced whole (Hydra's defaults-list behaviour). The source mark of every value is kept for
error messages; a cycle of bases is an error naming it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from rollcli.errors import SpecError, suggest
from rollcli.spec.templates import template_names, templates_dir
from rollcli.spec.yamlio import Mark, Marks, load_yaml

__all__ = ["compose_file", "merge"]


def merge(base: Any, top: Any) -> Any:
    if isinstance(base, dict) and isinstance(top, dict):
        if "kind" in base and "kind" in top and base["kind"] != top["kind"]:
            return copy.deepcopy(top)
        out = dict(base)
        for key, value in top.items():
            out[key] = merge(base[key], value) if key in base else value
        return out
    return top


def _base_path(name: Any, spec_path: Path, mark: Mark | None) -> Path:
    if not isinstance(name, str) or not name:
        raise SpecError(f"{mark}: extends: expected a template name or a path, found {name!r}")
    if "/" in name or name.endswith((".yaml", ".yml")):
        path = (spec_path.parent / name).resolve()
        if not path.is_file():
            raise SpecError(f"{mark}: extends: base spec '{name}' not found (looked for {path})")
        return path
    path = templates_dir() / f"{name}.yaml"
    if not path.is_file():
        raise SpecError(
            f"{mark}: extends: unknown template '{name}'{suggest(name, template_names(), listing=True)}"
        )
    return path


def compose_file(path: Path, _chain: tuple[Path, ...] = ()) -> tuple[dict[str, Any], Marks]:
    """Load ``path`` and merge the bases it ``extends`` (recursively) under it."""
    path = Path(path)
    resolved = path.resolve()
    if resolved in _chain:
        cycle = " -> ".join(str(p) for p in (*_chain, resolved))
        raise SpecError(f"{path}:1:1: extends: cycle {cycle}; remove one of the extends")
    data, marks = load_yaml(path)
    if "extends" not in data:
        return data, marks
    bases = data.pop("extends")
    mark = marks.find(("extends",))
    marks.drop(("extends",))
    names = bases if isinstance(bases, list) else [bases]
    merged: dict[str, Any] = {}
    merged_marks = Marks()
    for name in names:
        base_data, base_marks = compose_file(_base_path(name, path, mark), (*_chain, resolved))
        merged = merge(merged, base_data)
        merged_marks.update(base_marks)
    merged = merge(merged, data)
    merged_marks.update(marks)
    return merged, merged_marks
