"""verl job folders for the tests of verl's vLLM rollout on CPU (stdlib + yaml only).

:func:`write_vllm_job` writes a train job's ``config.yaml`` for :func:`rollcli.backends.verl.
run_train_job`: the tiny model, vLLM's CPU build as the rollout engine, a fair-coin reward (a
random tiny model never solves MATH; the allocators need reward variance), traced groups, and a
learning rate large enough that a missed weight sync shows in the engine-vs-actor check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = ["VLLM_BACKEND", "write_verl_cpu_spec", "write_vllm_job"]

VLLM_BACKEND: dict[str, Any] = {
    "kind": "verl",
    "device": "cpu",
    "model": "tiny",
    "rollout_engine": "vllm",
    "train_data": "math_train",
    "train_max_samples": 48,
    "val_max_samples": 2,
    "max_prompt_len": 384,
    "max_response_len": 12,
    # one Adam step at 1e-4 moved the engine-vs-actor agreement of a skipped sync only from
    # corr 0.9988 to 0.9953 (docs/LOG.md): at 1e-2 one missed sync is far outside the numerics
    "lr": 1.0e-2,
    "reward": "rollcli.backends.verl.rewards:toy_reward",
    "trace_groups": True,
    "val_before_train": False,
}


def write_vllm_job(
    job_dir: Path, allocator: dict[str, Any], *, steps: int, rollouts: int, **backend: Any
) -> Path:
    """A verl train job of ``steps`` steps of ``rollouts`` rollouts on vLLM's CPU build; the
    last step is evaluated on 2 MATH-500 problems, ``backend`` knobs override the defaults."""
    job_dir.mkdir(parents=True, exist_ok=True)
    config = {
        "experiment": "verl-vllm-cpu-test",
        "job": {"id": job_dir.name, "type": "train", "allocator": allocator["kind"], "seed": 0},
        "backend": {**VLLM_BACKEND, **backend},
        "allocator": allocator,
        "budget": {"steps": steps, "rollouts_per_step": rollouts},
        "eval": {"suite": ["math500"], "every": steps, "samples": 2},
        "checkpoint": {"every": steps},
        "tracking": {"wandb": {"mode": "disabled"}},
    }
    (job_dir / "config.yaml").write_text(yaml.safe_dump(config))
    return job_dir


def write_verl_cpu_spec(
    folder: Path,
    name: str,
    allocators: dict[str, dict[str, Any]],
    *,
    baseline: str,
    steps: int,
    rollouts_per_step: int,
    **backend: Any,
) -> Path:
    """An experiment spec over ``experiments/verl-cpu.yaml``'s backend (``backend`` overrides its
    keys) for the verl-on-CPU end-to-end tests: one seed, local jobs one at a time, a checkpoint
    every step, one eval at the end, W&B off. Written to ``folder/<name>.yaml``."""
    root = Path(__file__).resolve().parents[2]
    base = yaml.safe_load((root / "experiments" / "verl-cpu.yaml").read_text())
    spec = {
        "name": name,
        "extends": "base",
        "backend": {**base["backend"], **backend},
        "budget": {"steps": steps, "rollouts_per_step": rollouts_per_step},
        "allocators": allocators,
        "seeds": [0],
        "eval": {"every": steps, "suite": ["math500"], "samples": 2},
        "target": {"baseline": baseline, "metric": "accuracy", "at": "final"},
        "launch": {"executor": "local", "max_parallel": 1},
        "checkpoint": {"every": 1},
        "tracking": {"wandb": {"mode": "disabled"}},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path
