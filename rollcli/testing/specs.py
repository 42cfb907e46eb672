"""Small sim specs for tests: two allocators (grpo + pc), one seed, the local executor, no W&B."""

from __future__ import annotations

from pathlib import Path

__all__ = ["SIM_SPEC", "write_sim_spec"]

SIM_SPEC = """\
name: {name}
backend: {{kind: sim, num_train_prompts: {num_train_prompts}, num_eval_prompts: {num_eval_prompts}}}
budget: {{steps: {steps}, rollouts_per_step: {rollouts_per_step}}}
allocators:
  grpo: {{kind: uniform, n: 8}}
  pc: {{kind: pilot_commit, n_pilot: 4, n_commit: 12}}
seeds: [0]
eval: {{every: {eval_every}}}
target: {{baseline: grpo}}
launch: {{executor: local, max_parallel: 2}}
tracking: {{wandb: {{mode: disabled}}}}
"""


def write_sim_spec(
    folder: Path,
    name: str = "launch-sim",
    steps: int = 6,
    *,
    num_train_prompts: int = 1024,
    num_eval_prompts: int = 256,
    rollouts_per_step: int = 128,
    eval_every: int = 5,
) -> Path:
    """Write ``<folder>/<name>.yaml`` (2 train jobs + a report job) and return its path."""
    path = Path(folder) / f"{name}.yaml"
    path.write_text(
        SIM_SPEC.format(
            name=name,
            steps=steps,
            num_train_prompts=num_train_prompts,
            num_eval_prompts=num_eval_prompts,
            rollouts_per_step=rollouts_per_step,
            eval_every=eval_every,
        )
    )
    return path
