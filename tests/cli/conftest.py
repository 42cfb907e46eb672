"""CLI test helpers: a small sim spec (the ``cli`` fixture lives in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


SIM_SPEC = """\
name: {name}
backend: {{kind: sim, num_train_prompts: 256, num_eval_prompts: 128}}
budget: {{steps: {steps}, rollouts_per_step: 64}}
allocators:
  grpo: {{kind: uniform, n: 8}}
  pc: {{kind: pilot_commit, n_pilot: 4, n_commit: 12}}
seeds: [0]
eval: {{every: 2}}
target: {{baseline: grpo}}
launch: {{executor: local, max_parallel: 2}}
tracking: {{wandb: {{mode: disabled}}}}
"""


@pytest.fixture
def sim_spec(tmp_path: Path) -> Callable[..., Path]:
    """Write a tiny sim spec (2 train jobs + report) and return its path."""

    def make(name: str = "tiny-sim", steps: int = 4) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(SIM_SPEC.format(name=name, steps=steps))
        return path

    return make
