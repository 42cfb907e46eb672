"""Assemble a spec's raw data: ``extends:`` bases, command-line overrides, ``${...}`` interpolation
and allocator presets, keeping the source mark of every value for error messages.

Order (as Hydra's): bases are merged under the file (mappings merge recursively; lists and
scalars are replaced; a mapping whose ``kind`` changes is replaced whole), then overrides
(``key=value``, ``+key=value``, ``++key=value``, ``~key``) are applied, then interpolations are
resolved with OmegaConf, then ``preset:`` names are expanded from the allocator registry.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rollcli.errors import SpecError, closest, suggest
from rollcli.spec.yamlio import Mark, Marks, Path_, load_yaml

__all__ = [
    "templates_dir",
    "template_names",
    "compose_file",
    "apply_overrides",
    "resolve_interpolations",
    "expand_presets",
    "dotted",
]


def dotted(path: Path_) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<spec>"


def _suggest(name: str, valid: Sequence[str]) -> str:
    hint = suggest(name, valid)
    return f"{hint} (valid: {', '.join(sorted(map(str, valid)))})" if valid else hint


def templates_dir() -> Path:
    """``$ROLLCLI_TEMPLATES`` or the package's ``rollcli/templates/specs``."""
    from rollcli.templates import spec_templates_dir

    return spec_templates_dir()


def template_names(*, complete: bool = False) -> list[str]:
    """Template names; with ``complete``, only full specs (a ``name:``), not partial bases."""
    root = templates_dir()
    if not root.is_dir():
        return []
    paths = sorted(root.glob("*.yaml"))
    if complete:
        paths = [p for p in paths if re.search(r"(?m)^name:", p.read_text("utf-8"))]
    return [p.stem for p in paths]


# -- extends -------------------------------------------------------------------------------


def _merge(base: Any, top: Any) -> Any:
    if isinstance(base, dict) and isinstance(top, dict):
        if "kind" in base and "kind" in top and base["kind"] != top["kind"]:
            return copy.deepcopy(top)
        out = dict(base)
        for key, value in top.items():
            out[key] = _merge(base[key], value) if key in base else value
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
            f"{mark}: extends: unknown template '{name}'{_suggest(name, template_names())}"
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
        merged = _merge(merged, base_data)
        merged_marks.update(base_marks)
    merged = _merge(merged, data)
    merged_marks.update(marks)
    return merged, merged_marks


# -- overrides -------------------------------------------------------------------------------


def _split_key(key: str, where: str) -> list[str | int]:
    parts: list[str | int] = []
    for part in key.split("."):
        if not part:
            raise SpecError(f"{where}: empty key segment in '{key}'")
        parts.append(int(part) if part.isdigit() else part)
    return parts


def _is_field(data: dict[str, Any], parent: Path_, key: str | int) -> bool:
    """Whether ``key`` is a declared field (with a default) of the section at ``parent``, so
    ``key=value`` may set it although the YAML does not (Hydra's structured-config behaviour)."""
    from rollcli.spec.diagnose import declared_fields

    return key in declared_fields(parent, data)


def apply_overrides(data: dict[str, Any], marks: Marks, overrides: Sequence[str]) -> dict[str, Any]:
    """Apply Hydra-grammar overrides to ``data`` (a copy is returned)."""
    if not overrides:
        return data
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType
    from hydra.errors import HydraException

    data = copy.deepcopy(data)
    parser = OverridesParser.create()
    for text in overrides:
        where = f"override '{text}'"
        try:
            (override,) = parser.parse_overrides([text])
        except HydraException as error:
            first = str(error).splitlines()[0]
            raise SpecError(
                f"{where}: cannot parse ({first}); write key=value, +key=value or ~key"
            ) from None
        if override.is_sweep_override():
            raise SpecError(f"{where}: is a sweep; run it with `rollcli sweep`, or give one value")
        if override.package is not None:
            raise SpecError(f"{where}: package overrides (@) are not supported")
        path = _split_key(override.key_or_group, where)
        value = override.value()
        parent: Any = data
        for depth, part in enumerate(path[:-1]):
            child = parent.get(part) if isinstance(parent, dict) else None
            if child is None and isinstance(parent, list) and isinstance(part, int):
                child = parent[part] if part < len(parent) else None
            if child is None:
                if override.type in (OverrideType.ADD, OverrideType.FORCE_ADD) or _is_field(
                    data, tuple(path[:depth]), part
                ):
                    parent[part] = child = {}
                else:
                    valid = list(parent) if isinstance(parent, dict) else []
                    raise SpecError(
                        f"{where}: {dotted(tuple(path[: depth + 1]))}: no such key"
                        f"{_suggest(str(part), valid)}"
                    )
            if not isinstance(child, (dict, list)):
                raise SpecError(
                    f"{where}: {dotted(tuple(path[: depth + 1]))} is a {type(child).__name__}, "
                    "not a section"
                )
            parent = child
        last = path[-1]
        exists = (
            last in parent
            if isinstance(parent, dict)
            else isinstance(last, int) and last < len(parent)
        )
        mark = Mark(where)
        if override.type == OverrideType.DEL:
            if not exists:
                raise SpecError(f"{where}: {dotted(tuple(path))}: nothing to delete")
            if value is not None and parent[last] != value:
                raise SpecError(
                    f"{where}: {dotted(tuple(path))} is {parent[last]!r}, not {value!r}"
                )
            del parent[last]
            marks.drop(tuple(path))
            continue
        if (
            override.type == OverrideType.CHANGE
            and not exists
            and not _is_field(data, tuple(path[:-1]), last)
        ):
            valid = list(parent) if isinstance(parent, dict) else []
            close = closest(last, valid)
            hint = (
                f"did you mean '{close}'? or add it with '+{text}'"
                if close
                else f"add it with '+{text}'"
            )
            raise SpecError(f"{where}: {dotted(tuple(path))} is not in the spec; {hint}")
        if override.type == OverrideType.ADD and exists:
            raise SpecError(
                f"{where}: {dotted(tuple(path))} is already set; drop the '+' to change it"
            )
        if isinstance(value, dict) and exists and isinstance(parent[last], dict):
            value = _merge(parent[last], value)
        parent[last] = value
        marks.set(tuple(path), mark)
    return data


# -- interpolation ---------------------------------------------------------------------------


def _interpolated(node: Any, path: Path_ = ()) -> list[Path_]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _interpolated(v, path + (k,))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _interpolated(v, path + (i,))]
    return [path] if isinstance(node, str) and "${" in node else []


def resolve_interpolations(data: dict[str, Any], marks: Marks) -> dict[str, Any]:
    """Resolve ``${...}`` with OmegaConf; an error names the value that failed."""
    paths = _interpolated(data)
    if not paths:
        return data
    from rollcli.spec.limits import check_interpolations

    check_interpolations(data, marks, paths)
    marks.interpolated.update(paths)
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        config = OmegaConf.create(data)
    except OmegaConfBaseException as error:
        raise SpecError(f"{marks.find(())}: cannot interpolate the spec: {error}") from None
    for path in paths:
        node: Any = config
        try:
            for part in path:
                node = node[part]
        except OmegaConfBaseException as error:
            message = str(error).splitlines()[0]
            raise SpecError(
                f"{marks.find(path)}: {dotted(path)}: cannot resolve the interpolation: {message}"
            ) from None
    container = OmegaConf.to_container(config, resolve=True)
    assert isinstance(container, dict)
    return container  # type: ignore[return-value]


# -- presets ---------------------------------------------------------------------------------


def expand_presets(data: dict[str, Any], marks: Marks) -> dict[str, Any]:
    """Replace ``preset: <name>`` in each allocator by the preset's knobs (explicit knobs win)."""
    allocators = data.get("allocators")
    if not isinstance(allocators, dict):
        return data
    from rollcli.allocators.registry import ALLOCATORS, PRESETS

    out = dict(data)
    out["allocators"] = dict(allocators)
    for name, config in allocators.items():
        if not isinstance(config, dict) or "preset" not in config:
            continue
        path: Path_ = ("allocators", name, "preset")
        kind = config.get("kind")
        if kind not in ALLOCATORS:
            continue  # the model reports the unknown kind
        presets = PRESETS.get(kind, {})
        preset = config["preset"]
        if preset not in presets:
            raise SpecError(
                f"{marks.find(path)}: {dotted(path)}: unknown preset {preset!r} for allocator "
                f"kind '{kind}'{_suggest(str(preset), list(presets))}"
            )
        expanded = {**presets[preset], **{k: v for k, v in config.items() if k != "preset"}}
        for knob in presets[preset]:
            if knob not in config:
                marks.values[("allocators", name, knob)] = marks.find(path) or Mark("<preset>")
        out["allocators"][name] = expanded
    return out
