"""Train job folders for tests: a small sim pool and a small config of every allocator kind.

``write_job(folder, kind, steps=..., ...)`` writes a ``config.yaml`` that ``rollcli.jobs.train``
runs in a second or so; the train, jobs and row-contract tests share it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rollcli.allocators.registry import ALLOCATORS, create_allocator

ROLLOUTS_PER_STEP = 128

# Small settings of each known kind (fast, and every phase of the algorithm is exercised).
SMALL_ALLOCATORS: dict[str, dict[str, Any]] = {
    "uniform": {"kind": "uniform", "n": 8},
    "dynamic": {"kind": "dynamic", "n": 8, "gen_batch_factor": 2},
    "pilot_commit": {"kind": "pilot_commit", "n_pilot": 4, "n_commit": 12},
    "vigor": {"kind": "vigor", "m0": 2},
    "oracle_select": {"kind": "oracle_select", "n": 8},
    "oracle": {"kind": "oracle", "n_max": 16},
    "pods": {"kind": "pods", "n": 8, "m": 4},
    "reinforce_ada": {"kind": "reinforce_ada", "round_repeat": 4, "max_rounds": 3},
    "speed": {"kind": "speed", "n_screen": 4, "n_continue": 4},
}


def small_allocator(kind: str) -> tuple[dict[str, Any], int]:
    """A small config of ``kind`` and a per-step budget it accepts (defaults for unknown kinds)."""
    if kind in SMALL_ALLOCATORS:
        return SMALL_ALLOCATORS[kind], ROLLOUTS_PER_STEP
    for budget in (128, 256, 384, 512, 768, 1024, 2048, 4096):
        try:
            create_allocator({"kind": kind}, num_prompts=256, rollouts_per_step=budget, seed=0,
                             oracle=lambda ids: ids * 0.0 + 0.5)  # fmt: skip
        except ValueError:
            continue
        return {"kind": kind}, budget
    raise AssertionError(f"no per-step budget up to 4096 fits allocator '{kind}' defaults")


ALL_KINDS = sorted(ALLOCATORS)


def write_job(
    job_dir: Path,
    kind: str = "uniform",
    *,
    steps: int = 10,
    every: int = 1,
    eval_every: int = 3,
    seed: int = 0,
    backend: dict[str, Any] | None = None,
    allocator: dict[str, Any] | None = None,
    rollouts_per_step: int | None = None,
) -> Path:
    """Write ``job_dir/config.yaml``: the small config of ``kind`` (or ``allocator``) on a small
    sim pool (or ``backend``), with a per-step budget it accepts (or ``rollouts_per_step``)."""
    small, budget = small_allocator(kind)
    allocator = allocator or small
    kind = allocator["kind"]
    budget = rollouts_per_step or budget
    config = {
        "experiment": "test",
        "job": {"id": f"{kind}-{seed}", "type": "train", "allocator": kind, "seed": seed},
        "backend": backend
        or {"kind": "sim", "num_train_prompts": 256, "num_eval_prompts": 64, "score_noise": 5.0},
        "allocator": allocator,
        "budget": {"steps": steps, "rollouts_per_step": budget},
        "eval": {"every": eval_every},
        "checkpoint": {"every": every},
        "tracking": {"wandb": {"project": "rollcli", "mode": "disabled"}},
    }
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), "utf-8")
    return job_dir
