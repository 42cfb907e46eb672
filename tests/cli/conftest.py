"""CLI test helpers: a small sim spec (the ``cli`` fixture lives in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rollcli.testing.specs import write_sim_spec


@pytest.fixture
def sim_spec(tmp_path: Path) -> Callable[..., Path]:
    """Write a tiny sim spec (2 train jobs + report) and return its path."""

    def make(name: str = "tiny-sim", steps: int = 4) -> Path:
        return write_sim_spec(
            tmp_path,
            name,
            steps,
            num_train_prompts=256,
            num_eval_prompts=128,
            rollouts_per_step=64,
            eval_every=2,
        )

    return make
