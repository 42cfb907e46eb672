"""Limits a spec must respect before it is interpolated and validated (docs/spec.md, "Limits").

- :func:`check_top_level_keys`: unknown top-level sections are refused *before* interpolation,
  so no ``${...}`` in a section rollcli does not know is ever evaluated;
- :func:`check_interpolations`: every ``${...}`` is bounded statically before OmegaConf runs it:
  at most ``MAX_INTERPOLATED_CHARS`` characters once resolved and ``MAX_INTERPOLATION_STEPS``
  reference evaluations per value (OmegaConf re-resolves shared references, so
  ``v{i}: ${v{i-1}}${v{i-1}}`` doubles at each level), no cycles, and no key that is itself
  interpolated (``${a.${b}}``: its target is unknown until it runs, so nothing can bound it);
- :func:`check_finite`: every number in the spec is finite (``.inf``/``.nan`` are refused where
  they stand, before any model sees them: an infinite learning rate once gave accuracy 1.000).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from rollcli.errors import SpecError, suggest
from rollcli.spec.yamlio import Marks, Path_, dotted

__all__ = ["check_top_level_keys", "check_interpolations", "check_finite"]

MAX_INTERPOLATED_CHARS = 10_000
MAX_INTERPOLATION_STEPS = 10_000
_RESOLVER_CHARS = 4096  # a resolver call (${oc.env:X}) counts as this long
_REF = re.compile(r"\$\{([^${}]*)\}")
_DYNAMIC_KEY = re.compile(r"\$\{[^:${}]*\$\{")  # ${a.${b}}: a key built while resolving
_INDEX = re.compile(r"\[(\d+)\]")


def check_top_level_keys(data: dict[str, Any], marks: Marks, known: Iterable[str]) -> None:
    """Refuse a top-level key the Spec model does not have (with a suggestion)."""
    known = list(known)
    for key in data:
        if key not in known:
            hint = suggest(key, known)
            raise SpecError(  # worded like the model's own unknown-key errors (diagnose.py)
                f"{marks.find((key,), key=True)}: {key}: unknown key '{key}' at the top level"
                f"{hint} (valid: {', '.join(known)})"
            )


def _split(ref: str) -> list[str | int]:
    parts: list[str | int] = []
    for part in ref.split("."):
        head = _INDEX.split(part)
        if head[0]:
            parts.append(int(head[0]) if head[0].isdigit() else head[0])
        parts.extend(int(x) for x in head[1:] if x)
    return parts


def _target(ref: str, here: Path_) -> Path_:
    ref = ref.strip()
    if ref.startswith("."):
        dots = len(ref) - len(ref.lstrip("."))
        base = here[: max(0, len(here) - dots)]
        return tuple(base) + tuple(_split(ref[dots:]))
    return tuple(_split(ref))


def _get(data: Any, path: Path_) -> tuple[bool, Any]:
    node = data
    for part in path:
        if (
            isinstance(node, dict)
            and part in node
            or isinstance(node, list)
            and isinstance(part, int)
            and 0 <= part < len(node)
        ):
            node = node[part]
        else:
            return False, None
    return True, node


def check_interpolations(data: dict[str, Any], marks: Marks, paths: list[Path_]) -> None:
    """Refuse interpolations that would resolve too long, take too many steps, or loop."""
    memo: dict[Path_, tuple[int, int]] = {}
    active: set[Path_] = set()

    def cost(path: Path_) -> tuple[int, int]:
        """(resolved length, reference evaluations) of the value at ``path``."""
        if path in memo:
            return memo[path]
        found, value = _get(data, path)
        if not found:
            return 0, 1  # OmegaConf reports the missing key itself
        if not isinstance(value, str) or "${" not in value:
            result = (len(str(value)) if not isinstance(value, (dict, list)) else 64, 1)
            memo[path] = result
            return result
        if path in active:
            raise SpecError(f"{marks.find(path)}: {dotted(path)}: interpolation refers to itself")
        if _DYNAMIC_KEY.search(value):
            raise SpecError(
                f"{marks.find(path)}: {dotted(path)}: an interpolation whose key is itself "
                "interpolated (like ${a.${b}}) cannot be bounded before it runs; write the key "
                "out (resolver arguments such as ${oc.decode:${oc.env:X}} are fine)"
            )
        active.add(path)
        length, steps = len(_REF.sub("", value)), 1
        for ref in _REF.findall(value):
            if ":" in ref:
                length, steps = length + _RESOLVER_CHARS, steps + 1
                continue
            sub_length, sub_steps = cost(_target(ref, path[:-1]))
            length, steps = length + sub_length, steps + sub_steps
            if length > MAX_INTERPOLATED_CHARS or steps > MAX_INTERPOLATION_STEPS:
                raise SpecError(
                    f"{marks.find(path)}: {dotted(path)}: the interpolation would resolve to "
                    f"more than {MAX_INTERPOLATED_CHARS:,} characters or take more than "
                    f"{MAX_INTERPOLATION_STEPS:,} steps"
                )
        active.discard(path)
        memo[path] = (length, steps)
        return length, steps

    for path in paths:
        cost(path)


def check_finite(data: Any, marks: Marks, path: Path_ = ()) -> None:
    """Refuse an infinite or NaN number anywhere in the spec, naming where it is."""
    if isinstance(data, dict):
        for key, value in data.items():
            check_finite(value, marks, path + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            check_finite(value, marks, path + (index,))
    elif isinstance(data, float) and not math.isfinite(data):
        raise SpecError(
            f"{marks.find(path)}: {dotted(path)}: must be a finite number, found {data}"
        )
