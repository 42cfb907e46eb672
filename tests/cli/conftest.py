"""CLI test helpers: a small sim spec, and a 3-step run of some allocators through ``rollcli run``
(the ``cli`` fixture lives in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from rollcli.store.atomic import read_json, read_jsonl
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


@pytest.fixture
def run_peers(cli, tmp_path: Path) -> Callable[..., tuple[Any, dict[str, list[dict]]]]:
    """``run_peers(name, backend, allocators, *, baseline, rollouts_per_step, max_parallel=1)``:
    write a 3-step spec (one seed, evaluated at step 3), ``rollcli run`` it, assert it succeeds
    and return the CLI result and each train job's step rows by allocator name."""

    def run(
        name: str,
        backend: dict,
        allocators: dict,
        *,
        baseline: str,
        rollouts_per_step: int,
        max_parallel: int = 1,
    ) -> tuple[Any, dict[str, list[dict]]]:
        spec = {
            "name": name,
            "backend": backend,
            "budget": {"steps": 3, "rollouts_per_step": rollouts_per_step},
            "allocators": allocators,
            "seeds": [0],
            "eval": {"every": 3},
            "target": {"baseline": baseline},
            "launch": {"executor": "local", "max_parallel": max_parallel},
            "tracking": {"wandb": {"mode": "disabled"}},
        }
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(spec))
        runs = tmp_path / "runs"
        result = cli(["run", str(path), "--runs-dir", str(runs)])
        assert result.exit_code == 0, result.output[-3000:]
        run_dir = runs / name
        jobs = read_json(run_dir / "manifest.json")["plan"]["jobs"]
        rows = {
            j["allocator"]: read_jsonl(run_dir / "jobs" / j["id"] / "metrics.jsonl")[1:]
            for j in jobs
            if j["type"] == "train"
        }
        return result, rows

    return run
