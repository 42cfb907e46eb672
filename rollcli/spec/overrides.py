"""Command-line overrides in Hydra's grammar applied to a spec's composed data.

``key=value`` changes a key the spec has (or a declared field with a default), ``+key=value``
adds one, ``++key=value`` adds or changes, ``~key`` deletes; a sweep (``a=1,2``) is refused
here with :class:`SweepOverrideError` (the CLI prints the ``rollcli sweep`` command that runs it). Each error names the override and the nearest key.
Spec assembly order: :mod:`rollcli.spec.extends`, these overrides, then
:mod:`rollcli.spec.resolve` (interpolations, presets).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from rollcli.errors import SpecError, closest, suggest
from rollcli.spec.extends import merge
from rollcli.spec.yamlio import Mark, Marks, Path_, dotted

__all__ = ["apply_overrides", "check_override_nesting", "parse_override", "SweepOverrideError"]


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


class SweepOverrideError(SpecError):
    """An override with several values (``key=a,b``) given where one spec is built; ``override``
    is its text, so a command can offer the ``rollcli sweep`` that runs it."""

    def __init__(self, message: str, override: str) -> None:
        super().__init__(message)
        self.override = override


def _key_hint(data: dict[str, Any], path: Sequence[str | int], parent: Any, text: str) -> str:
    """What to write instead of an override naming a key that is not there: the corrected
    override when a valid key is close; ``+key=value`` only where a key can be added (a free-form
    section such as ``allocators``), never in a typed section whose keys are fixed."""
    from rollcli.spec.diagnose import declared_fields

    last = str(path[-1])
    fields = declared_fields(tuple(path[:-1]), data)
    if fields and len(path) == 3 and path[0] == "allocators":
        fields = [*fields, "preset"]
    valid = fields or (list(parent) if isinstance(parent, dict) else [])
    close = closest(last, [str(v) for v in valid])
    key, _, value = text.partition("=")
    fixed = key[: len(key) - len(last)] + close + "=" + value if close else None
    if fields:  # fixed keys: '+' would fail as an unknown key
        if fixed:
            return f"did you mean '{fixed}'?"
        return f"valid keys there: {', '.join(map(str, fields))}"
    if fixed:
        return f"did you mean '{fixed}'? or add the key with '+{text}'"
    return f"add the key with '+{text}'"


MAX_OVERRIDE_NESTING = 64  # brackets/braces/parentheses inside one override's value
MAX_KEY_SEGMENTS = 32


def check_override_nesting(text: str, where: str) -> None:
    """Refuse an override nested deeper than ``MAX_OVERRIDE_NESTING`` before Hydra's recursive
    parser sees it (3,000 nested brackets printed a 2,000-line RecursionError traceback)."""
    depth = deepest = 0
    for char in text:
        if char in "[{(":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]})":
            depth -= 1
    if deepest > MAX_OVERRIDE_NESTING:
        raise SpecError(f"{where}: nested {deepest} levels deep, more than {MAX_OVERRIDE_NESTING}")
    key = text.split("=", 1)[0]
    if key.count(".") + 1 > MAX_KEY_SEGMENTS:
        raise SpecError(f"{where}: a key of more than {MAX_KEY_SEGMENTS} segments")


def parse_override(parser: Any, text: str, where: str) -> Any:
    """One override parsed by Hydra, or a one-line :class:`SpecError` naming it."""
    from hydra.errors import HydraException

    check_override_nesting(text, where)
    try:
        (override,) = parser.parse_overrides([text])
    except HydraException as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise SpecError(
            f"{where}: cannot parse ({first}); write key=value, +key=value or ~key"
        ) from None
    except RecursionError:
        raise SpecError(f"{where}: nested too deeply to parse") from None
    return override


def apply_overrides(data: dict[str, Any], marks: Marks, overrides: Sequence[str]) -> dict[str, Any]:
    """Apply Hydra-grammar overrides to ``data`` (a copy is returned)."""
    if not overrides:
        return data
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType

    data = copy.deepcopy(data)
    parser = OverridesParser.create()
    for text in overrides:
        where = f"override '{text if len(text) <= 200 else text[:200] + '...'}'"
        override = parse_override(parser, text, where)
        if override.is_sweep_override():
            raise SweepOverrideError(
                f"{where}: is a sweep; give one value, or sweep it with `rollcli sweep` (the "
                "same spec and overrides)",
                text,
            )
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
                    from rollcli.spec.diagnose import declared_fields

                    free = isinstance(parent, dict) and not declared_fields(
                        tuple(path[:depth]), data
                    )  # a section of free names (allocators): '+' adds one
                    raise SpecError(
                        f"{where}: {dotted(tuple(path[: depth + 1]))}: no such key"
                        f"{suggest(part, valid, listing=True)}"
                        + (f"; or add it with '+{text}'" if free else "")
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
            hint = _key_hint(data, path, parent, text)
            raise SpecError(f"{where}: {dotted(tuple(path))} is not in the spec; {hint}")
        if override.type == OverrideType.ADD and exists:
            raise SpecError(
                f"{where}: {dotted(tuple(path))} is already set; drop the '+' to change it"
            )
        if isinstance(value, dict) and exists and isinstance(parent[last], dict):
            value = merge(parent[last], value)
        parent[last] = value
        marks.set(tuple(path), mark)
    return data
