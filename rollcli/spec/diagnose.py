"""Diagnostics of a spec: walk the model types alongside the raw data, and turn a pydantic error
or a wrongly typed scalar into one line: ``file:line:col: field.path: expected ..., found ...``
with the nearest valid name for typos.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from typing import Any

from pydantic import BaseModel

from rollcli.errors import SpecError, suggest
from rollcli.spec.models import spec_model
from rollcli.spec.yamlio import Marks, Path_, dotted

__all__ = [
    "declared_fields",
    "describe_error",
    "found",
    "knob_in",
    "raise_first",
    "scalar_errors",
]


# -- walking the model types alongside the data ----------------------------------------------


def _unwrap(tp: Any) -> Any:
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, getattr(__import__("types"), "UnionType", None))


def _fields(tp: Any) -> dict[str, Any] | None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return {name: f.annotation for name, f in tp.model_fields.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = typing.get_type_hints(tp)
        return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(tp)}
    return None


def _type_at(path: Path_, data: Any) -> Any:
    """The declared type at ``path`` of the spec (None if it cannot be told)."""
    tp: Any = spec_model()
    node = data
    for part in path:
        tp = _pick(_unwrap(tp), node)
        fields = _fields(tp)
        if fields is not None:
            if part not in fields:
                return None
            tp = fields[part]
        elif typing.get_origin(tp) in (dict, typing.get_origin(dict[str, int])):
            tp = typing.get_args(tp)[1]
        elif typing.get_origin(tp) in (list, tuple):
            tp = typing.get_args(tp)[0]
        else:
            return None
        node = node.get(part) if isinstance(node, dict) else None
    return _pick(_unwrap(tp), node)


def _pick(tp: Any, node: Any) -> Any:
    """For a union of configs, the member named by the data's ``kind``."""
    if not _is_union(tp):
        return tp
    kind = node.get("kind") if isinstance(node, dict) else None
    for member in typing.get_args(tp):
        fields = _fields(member)
        if fields and "kind" in fields and typing.get_args(fields["kind"]) == (kind,):
            return member
    return tp


def _kinds(tp: Any) -> list[str]:
    kinds = []
    for member in typing.get_args(_unwrap(tp)) or (tp,):
        fields = _fields(member)
        if fields and "kind" in fields:
            kinds.extend(typing.get_args(fields["kind"]))
    return kinds


def declared_fields(path: Path_, data: Any) -> list[str]:
    """Field names of the model or config dataclass at ``path`` ([] for free-form sections)."""
    return list(_fields(_type_at(path, data)) or ())


def _valid_keys(path: Path_, data: Any) -> list[str]:
    fields = _fields(_type_at(path, data))
    keys = list(fields or ())
    if len(path) == 2 and path[0] == "allocators":
        keys.append("preset")
    return keys


# -- pydantic errors -> one line --------------------------------------------------------------


def _data_path(loc: tuple[Any, ...], data: Any) -> Path_:
    """Drop the union tags pydantic inserts into ``loc`` (``allocators.pc.pilot_commit.n``)."""
    path: list[str | int] = []
    node = data
    for part in loc:
        if (
            isinstance(node, dict)
            and part in node
            or isinstance(node, list)
            and isinstance(part, int)
            and part < len(node)
        ):
            path.append(part)
            node = node[part]
        elif isinstance(node, dict) and (node.get("kind") == part or not isinstance(part, str)):
            continue
        elif isinstance(part, str) and ("[" in part or part in ("int", "dict", "str")):
            continue  # union member labels such as 'dict[str,int]'
        else:
            path.append(part)
            node = None
    return tuple(path)


def _listing(names: list[str], limit: int = 12) -> str:
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f", ... {len(names) - limit} more; see `rollcli schema`"


def found(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{text} ({type(value).__name__})"


def knob_in(message: str, path: Path_, data: Any, marks: Marks | None = None) -> Path_:
    """A config's own ValueError usually names its knob: point at that knob when it is set.

    A message may name several knobs (``p_lower <= p_upper``): one set by a command-line
    override is the likelier culprit than the spec's own lines, so it wins."""
    node: Any = data
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        return path
    named = [
        key
        for key in sorted(node, key=lambda k: -len(str(k)))
        if re.search(rf"\b{re.escape(str(key))}\b", message)
    ]
    if marks is not None:
        overridden = [k for k in named if _is_override(marks.values.get((*path, k)))]
        named = overridden + [k for k in named if k not in overridden]
    return (*path, named[0]) if named else path


def _is_override(mark: Any) -> bool:
    """True for the mark of a value a command-line override set (it has no file line)."""
    return mark is not None and not mark.line and str(mark.source).startswith("override")


PATTERN_HINTS = {
    ("launch", "time"): 'a Slurm time limit such as "48:00:00" or "2-00:00:00"',
    ("launch", "mem"): 'a Slurm memory size such as "64G"',
}
NAME_HINT = "a name of letters, digits, '_' or '-' (no spaces, dots or slashes)"


def describe_error(error: dict[str, Any], data: Any, marks: Marks) -> tuple[Any, str]:
    kind = error["type"]
    loc = tuple(error["loc"])
    if loc and loc[-1] == "[key]":  # a mapping key failed (an allocator name)
        path = _data_path(loc[:-1], data)
        return marks.find(path, key=True), (
            f"{dotted(path)}: expected {NAME_HINT}, found {found(error['input'])}"
        )
    path = _data_path(loc, data)
    if kind in ("extra_forbidden", "unexpected_keyword_argument"):
        # a config class may name the knob that replaced an old one (``RENAMED_KNOBS``)
        renamed = getattr(_type_at(path[:-1], data), "RENAMED_KNOBS", {}).get(str(path[-1]))
        if renamed:
            return marks.find(path, key=True), f"{dotted(path)}: {renamed}"
        valid = _valid_keys(path[:-1], data)
        hint = suggest(path[-1], valid)
        section = f"in {dotted(path[:-1])}" if path[:-1] else "at the top level"
        return marks.find(path, key=True), (
            f"{dotted(path)}: unknown key '{path[-1]}' {section}{hint} (valid: {_listing(valid)})"
        )
    if kind in ("missing", "missing_argument"):
        return marks.find(path), f"{dotted(path)}: missing required field '{path[-1]}'"
    if kind == "union_tag_invalid":
        tag = error["ctx"]["tag"]
        valid = _kinds(_type_at(path[:-1], data) if path else None) or re.findall(
            r"'([^']+)'", error["ctx"]["expected_tags"]
        )
        valid = valid or re.findall(r"'([^']+)'", error["ctx"]["expected_tags"])
        what = "backend" if path[:1] == ("backend",) else "allocator"
        hint = suggest(tag, valid)
        kpath = (*path, "kind")
        if what == "allocator":
            from rollcli.allocators.registry import load_entry_points

            failed = load_entry_points().get(str(tag))
            hint += f"; its plug-in failed to load: {failed}" if failed else ""
        return marks.find(kpath), (
            f"{dotted(kpath)}: unknown {what} kind '{tag}'{hint} (valid: {', '.join(valid)})"
        )
    if kind == "union_tag_not_found":
        valid = re.findall(r"'([^']+)'", str(error.get("ctx", {}).get("expected_tags", "")))
        what = "backend" if path[:1] == ("backend",) else "allocator"
        got = error["input"]
        what_found = found(got) if not isinstance(got, dict) else "no 'kind'"
        return marks.find(path), (
            f"{dotted(path)}: expected a {what} with a 'kind', found {what_found}"
        )
    if kind in ("value_error", "assertion_error"):
        message = str(error["ctx"]["error"]) if "ctx" in error else error["msg"]
        knob = knob_in(message, path, data, marks)
        return marks.find(knob), f"{dotted(knob)}: {message}"
    if kind == "too_short" and path in (("allocators",), ("seeds",)):
        what = "one allocator" if path == ("allocators",) else "one seed"
        return marks.find(path), f"{dotted(path)}: expected at least {what}, found none"
    expected = error["msg"]
    for prefix in ("Input should be ", "String should "):
        if expected.startswith(prefix):
            expected = ("" if prefix.startswith("Input") else "a string that should ") + expected[
                len(prefix) :
            ]
    if kind == "tuple_type":  # list fields are tuples in the (frozen) models
        expected = "a list"
    if kind == "string_pattern_mismatch":
        expected = PATTERN_HINTS.get(path, NAME_HINT)
    if kind in ("dict_type", "model_attributes_type", "dataclass_type", "model_type"):
        expected = "a mapping" + (
            " with a 'kind'" if path[:1] in (("backend",), ("allocators",)) else ""
        )
    return marks.find(path), f"{dotted(path)}: expected {expected}, found {found(error['input'])}"


def raise_first(errors: list[tuple[Any, str]]) -> None:
    def order(item: tuple[Any, str]) -> tuple[int, int]:
        mark = item[0]
        return (getattr(mark, "line", 0) or 10**9, getattr(mark, "column", 0))

    errors = sorted(errors, key=order)
    # a container's "too short" after its items failed is a consequence, not the cause
    specific = [e for e in errors if "expected at least one" not in e[1]]
    errors = specific or errors

    # a required field "missing" next to an unknown key of the same section is most likely that
    # key misspelt (`step: 40`): report the unknown key, with its did-you-mean, first
    def section(message: str) -> str:
        return message.split(": ", 1)[0].rpartition(".")[0]

    misspelt = {section(m) for _, m in errors if ": unknown key '" in m}
    errors.sort(key=lambda e: ": missing required field '" in e[1] and section(e[1]) in misspelt)
    mark, message = errors[0]
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    raise SpecError(f"{mark}: {message}{more}")


_SCALAR_NAMES = {int: "an integer", float: "a number", bool: "true or false"}


def scalar_errors(data: dict[str, Any], marks: Marks) -> list[tuple[Any, str]]:
    """pydantic's lax mode would read ``"60"`` or ``true`` as 60 or 1 and ``"yes"`` as True;
    in a research config that hides mistakes, so numbers and booleans must be written as such."""
    errors: list[tuple[Any, str]] = []

    def walk(node: Any, path: Path_, tp: Any) -> None:
        tp = _pick(_unwrap(tp), node)
        fields = _fields(tp)
        origin = typing.get_origin(tp)
        if fields is not None:
            if isinstance(node, dict):
                for key, value in node.items():
                    if key in fields:
                        walk(value, (*path, key), fields[key])
        elif origin is dict and isinstance(node, dict):
            for key, value in node.items():
                walk(value, (*path, key), typing.get_args(tp)[1])
        elif origin in (list, tuple) and isinstance(node, list):
            args = [a for a in typing.get_args(tp) if a is not Ellipsis]
            for index, value in enumerate(node):
                walk(value, (*path, index), args[min(index, len(args) - 1)] if args else Any)
        elif tp in _SCALAR_NAMES:
            wrong = isinstance(node, str) or (tp is not bool and isinstance(node, bool))
            wrong = wrong or (tp is bool and not isinstance(node, bool) and node is not None)
            if wrong:
                hint = ""
                if path in marks.interpolated and isinstance(node, str):
                    hint = "; an interpolation gave a string: wrap it as ${oc.decode:...}"
                errors.append(
                    (
                        marks.find(path),
                        f"{dotted(path)}: expected {_SCALAR_NAMES[tp]}, found {found(node)}{hint}",
                    )
                )

    walk(data, (), spec_model())
    return errors
