"""Warnings for a published preset run at a scale its paper never used (``validate``, ``plan``).

A preset copies a paper's knobs, not its batch: Pilot-Commit's ``paper-1.5b`` trains 128 prompts
a step in its paper, but at ``budget.rollouts_per_step: 512`` its 32 + 96 rollouts a prompt leave
4 prompts a step — a different algorithm in practice (one survivor more or less swings the
step). Each allocator class states its presets' published prompts per step
(``preset_prompts_per_step``); an allocator whose knobs are a preset's and that trains under a
quarter of that many prompts a step gets a warning (not an error: small screens are legitimate).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

__all__ = ["SCALE_RATIO", "matching_preset", "scale_warnings"]

SCALE_RATIO = 0.25  # warn below this fraction of the paper's prompts per step


def _contains(config: Mapping[str, Any], knobs: Mapping[str, Any]) -> bool:
    for key, value in knobs.items():
        have = config.get(key)
        if isinstance(value, Mapping):
            if not isinstance(have, Mapping) or not _contains(have, value):
                return False
        elif have != value:
            return False
    return True


def matching_preset(kind_presets: Mapping[str, Mapping[str, Any]], config: Any) -> str | None:
    """The name of the first preset whose every knob ``config`` holds (None: none does)."""
    values = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else dict(config)
    for name, knobs in kind_presets.items():
        if knobs and _contains(values, knobs):
            return name
    return None


def scale_warnings(spec: Any) -> list[str]:
    """One sentence per allocator that runs a preset at far fewer prompts a step than its paper."""
    from rollcli.allocators.registry import ALLOCATORS, PRESETS, create_allocator
    from rollcli.plan.budget import _stand_in_oracle

    rps = spec.budget.rollouts_per_step
    num_prompts = getattr(spec.backend, "num_train_prompts", None) or 100_000
    out = []
    for name, config in spec.allocators.items():
        cls = ALLOCATORS[config.kind][1]
        published = dict(getattr(cls, "preset_prompts_per_step", {}) or {})
        preset = matching_preset(
            {k: v for k, v in PRESETS.get(config.kind, {}).items() if k in published}, config
        )
        if preset is None:
            continue
        oracle = _stand_in_oracle if getattr(cls, "requires_oracle", False) else None
        allocator = create_allocator(
            config, num_prompts=num_prompts, rollouts_per_step=rps, seed=0, oracle=oracle
        )
        prompts = getattr(allocator, "batch_prompts", None)
        paper = int(published[preset])
        if not isinstance(prompts, int) or prompts >= SCALE_RATIO * paper:
            continue
        per_prompt = rps // prompts if prompts else None
        needed = (
            f"; its paper's scale is budget.rollouts_per_step={paper * per_prompt}"
            if per_prompt
            else ""
        )
        out.append(
            f"allocators.{name}: preset {preset} trains {prompts} prompts a step at "
            f"budget.rollouts_per_step={rps}, its paper {paper}{needed}: results at this scale "
            "are not the paper's"
        )
    return out
