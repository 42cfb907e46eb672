"""Create allocators by kind from a config mapping; list kinds, their config classes and presets."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

from rollcli.allocators.api import BaseAllocator, OracleFn
from rollcli.allocators.uniform import UniformAllocator, UniformConfig

__all__ = [
    "ALLOCATORS",
    "CONFIGS",
    "PRESETS",
    "UnknownAllocatorError",
    "create_allocator",
    "create_config",
    "allocator_kinds",
]

# kind -> (config class, allocator class). Helpers add their allocators here.
ALLOCATORS: dict[str, tuple[type, type[BaseAllocator]]] = {
    "uniform": (UniformConfig, UniformAllocator),
}
CONFIGS: dict[str, type] = {kind: pair[0] for kind, pair in ALLOCATORS.items()}

# kind -> preset name -> knob values (published settings; see docs/allocators.md)
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "uniform": {"paper-grpo": {"n": 8}},
}


class UnknownAllocatorError(ValueError):
    """An allocator kind, preset or knob that does not exist (the message lists the valid ones)."""


def allocator_kinds() -> list[str]:
    return sorted(ALLOCATORS)


def _suggest(name: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(name, valid, n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    return f"{hint} Valid: {', '.join(sorted(valid))}."


def create_config(mapping: Mapping[str, Any]) -> Any:
    """Build a frozen config from ``{kind: ..., preset: ..., <knobs>}`` (preset values first)."""
    values = dict(mapping)
    kind = values.get("kind")
    if kind not in ALLOCATORS:
        raise UnknownAllocatorError(f"unknown allocator kind '{kind}'." + _suggest(str(kind), list(ALLOCATORS)))
    config_cls = ALLOCATORS[kind][0]
    preset = values.pop("preset", None)
    if preset is not None:
        presets = PRESETS.get(kind, {})
        if preset not in presets:
            raise UnknownAllocatorError(
                f"unknown preset '{preset}' for allocator '{kind}'." + _suggest(preset, list(presets))
            )
        values = {**presets[preset], **values}
    names = [f.name for f in dataclasses.fields(config_cls)]
    for key in values:
        if key not in names:
            raise UnknownAllocatorError(
                f"allocator '{kind}' has no knob '{key}'." + _suggest(key, names)
            )
    return config_cls(**values)


def create_allocator(
    config: Any,
    *,
    num_prompts: int,
    rollouts_per_step: int,
    seed: int,
    oracle: OracleFn | None = None,
) -> BaseAllocator:
    """Create an allocator from a config object or a ``{kind: ...}`` mapping."""
    if isinstance(config, Mapping):
        config = create_config(config)
    allocator_cls = ALLOCATORS[config.kind][1]
    return allocator_cls(
        config, num_prompts=num_prompts, rollouts_per_step=rollouts_per_step, seed=seed, oracle=oracle
    )
