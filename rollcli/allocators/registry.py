"""Create allocators by kind from a config mapping; list kinds, their config classes and presets."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

from rollcli.allocators.api import BaseAllocator, OracleFn
from rollcli.allocators.dynamic import DynamicAllocator, DynamicConfig
from rollcli.allocators.oracle import OracleAllocator, OracleConfig
from rollcli.allocators.pilot_commit import PilotCommitAllocator, PilotCommitConfig
from rollcli.allocators.uniform import UniformAllocator, UniformConfig
from rollcli.allocators.vigor import VigorAllocator, VigorConfig

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
    "dynamic": (DynamicConfig, DynamicAllocator),
    "pilot_commit": (PilotCommitConfig, PilotCommitAllocator),
    "vigor": (VigorConfig, VigorAllocator),
    "oracle": (OracleConfig, OracleAllocator),
}
CONFIGS: dict[str, type] = {kind: pair[0] for kind, pair in ALLOCATORS.items()}

# kind -> preset name -> knob values (published settings; see docs/allocators.md)
_PC_PAPER = {
    "p_lower": 0.125,
    "p_upper": 0.75,
    "evict_at": 1.0,
    "evict_consecutive": 1,
    "pilot_batch_factor": 3,
    "bind": True,
    "max_rounds": 10,
}
_VIGOR_HALVING = {"alpha": 0.5, "gamma": 2.0, "rounds": 4}
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "uniform": {
        "paper-grpo": {"n": 8},
        "paper-1.5b": {"n": 128},  # Pilot-Commit's GRPO baseline, Qwen2.5-Math-1.5B
        "paper-4b": {"n": 64},  # Pilot-Commit's GRPO baseline, Qwen3-4B
    },
    "dynamic": {
        "paper-dapo": {"n": 16, "gen_batch_factor": 3, "max_gen_batches": 10},
    },
    "pilot_commit": {
        "paper-1.5b": {
            "n_pilot": 32,
            "n_commit": 96,
            **_PC_PAPER,
            "replay": {"max_age": 4, "order": "max_variance", "flush_at_epoch_end": True},
        },
        "paper-4b": {
            "n_pilot": 16,
            "n_commit": 48,
            **_PC_PAPER,
            "replay": {"max_age": 4, "order": "random", "flush_at_epoch_end": True},
        },
    },
    "vigor": {
        # the paper's rule m0 = G / T with alpha * gamma = 1, for GRPO's G = 8
        "paper": {"m0": 2, **_VIGOR_HALVING},
        # the same rule for G = 128 (Pilot-Commit's 1.5B comparison)
        "paper-g128": {"m0": 32, **_VIGOR_HALVING},
        # the third-party implementation: m0=2, T=4, alpha=0.5, gamma=2, population variance
        "thirdparty": {"m0": 2, **_VIGOR_HALVING},
    },
    "oracle": {
        "variance": {"n": 8, "score": "variance"},
        "informative": {"n": 8, "score": "informative"},
    },
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
        raise UnknownAllocatorError(
            f"unknown allocator kind '{kind}'." + _suggest(str(kind), list(ALLOCATORS))
        )
    config_cls = ALLOCATORS[kind][0]
    preset = values.pop("preset", None)
    if preset is not None:
        presets = PRESETS.get(kind, {})
        if preset not in presets:
            raise UnknownAllocatorError(
                f"unknown preset '{preset}' for allocator '{kind}'."
                + _suggest(preset, list(presets))
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
        config,
        num_prompts=num_prompts,
        rollouts_per_step=rollouts_per_step,
        seed=seed,
        oracle=oracle,
    )
