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


MAX_BASES = 64  # distinct files one spec may extend, all levels together
MAX_COMPOSED_NODES = 100_000  # mappings, lists and values of the composed tree


def _count_nodes(node: Any, budget: int) -> int:
    """Nodes of ``node`` (stops counting once past ``budget``)."""
    count, stack = 0, [node]
    while stack and count <= budget:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def compose_file(path: Path) -> tuple[dict[str, Any], Marks]:
    """Load ``path`` and merge the bases it ``extends`` (recursively) under it.

    Each file is read and composed once, however many times the ``extends`` graph lists it (a
    DAG listing one base 20 times on 5 levels was parsed 20^5 times), at most ``MAX_BASES``
    files take part, and the composed tree holds at most ``MAX_COMPOSED_NODES`` nodes: past
    either, a one-line error. The result is the caller's own copy."""
    data, marks = _compose(Path(path), (), {})
    copied = Marks()
    copied.update(marks)
    return copy.deepcopy(data), copied


def _compose(
    path: Path, chain: tuple[Path, ...], cache: dict[Path, tuple[dict[str, Any], Marks]]
) -> tuple[dict[str, Any], Marks]:
    """:func:`compose_file` of one file, sharing ``cache`` (results are shared, never mutated:
    :func:`merge` builds new mappings)."""
    resolved = path.resolve()
    if resolved in chain:
        cycle = " -> ".join(str(p) for p in (*chain, resolved))
        raise SpecError(f"{path}:1:1: extends: cycle {cycle}; remove one of the extends")
    if resolved in cache:
        return cache[resolved]
    if len(cache) + len(chain) >= MAX_BASES:  # composed + still being composed
        raise SpecError(
            f"{path}:1:1: extends: more than {MAX_BASES} spec files take part in this spec"
        )
    data, marks = load_yaml(path)
    if "extends" in data:
        bases = data.pop("extends")
        mark = marks.find(("extends",))
        marks.drop(("extends",))
        names = bases if isinstance(bases, list) else [bases]
        merged: dict[str, Any] = {}
        merged_marks = Marks()
        for name in names:
            base_data, base_marks = _compose(
                _base_path(name, path, mark), (*chain, resolved), cache
            )
            merged = merge(merged, base_data)
            merged_marks.update(base_marks)
        data = merge(merged, data)
        merged_marks.update(marks)
        marks = merged_marks
        if _count_nodes(data, MAX_COMPOSED_NODES) > MAX_COMPOSED_NODES:
            raise SpecError(
                f"{path}:1:1: extends: the composed spec holds more than "
                f"{MAX_COMPOSED_NODES:,} values"
            )
    cache[resolved] = (data, marks)
    return data, marks
