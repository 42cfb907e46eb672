"""Resume after SIGKILL is bit-exact: every metrics row but wall_s and time/* matches."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rollcli.jobs.train import run_train_job
from rollcli.store.atomic import read_jsonl

from .conftest import learning_micro_config, micro_config

KILL_AT = 4
ALLOCATORS = {
    "uniform": {"kind": "uniform", "n": 4},
    "pilot_commit": {
        "kind": "pilot_commit",
        "n_pilot": 2,
        "n_commit": 2,
        "pilot_batch_factor": 2,
        "on_max_rounds": "stop",
        "max_rounds": 3,
    },
}


def _job(job_dir: Path, cache: Path, allocator: dict, backend: dict | None = None) -> Path:
    job_dir.mkdir(parents=True)
    config = {
        "experiment": "tiny-resume",
        "job": {"id": job_dir.name, "type": "train", "allocator": allocator["kind"], "seed": 5},
        "backend": backend or micro_config(cache),
        "allocator": allocator,
        "budget": {"steps": 7, "rollouts_per_step": 16},
        "eval": {"every": 3},
        "checkpoint": {"every": 1},
    }
    (job_dir / "config.yaml").write_text(yaml.safe_dump(config))
    return job_dir


def _comparable(rows: list[dict]) -> list[dict]:
    return [
        {k: v for k, v in r.items() if k != "wall_s" and not k.startswith("time/")} for r in rows
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("allocator", "minibatches"),
    [("pilot_commit", 0), ("uniform", 0), ("uniform", 1), ("uniform", 3), ("pilot_commit", 2)],
)
def test_resume_after_sigkill_is_bit_exact(
    tmp_path: Path, tiny_cache: Path, allocator: str, minibatches: int
) -> None:
    # with mini-batches: a base that earns rewards, so the resumed steps take real Adam steps
    backend = (
        learning_micro_config(tiny_cache, num_minibatches=minibatches) if minibatches else None
    )
    straight = _job(tmp_path / "straight", tiny_cache, ALLOCATORS[allocator], backend)
    killed = _job(tmp_path / "killed", tiny_cache, ALLOCATORS[allocator], backend)
    run_train_job(straight)
    if minibatches:
        steps = [r["train/optimizer_steps"] for r in read_jsonl(straight / "metrics.jsonl")[1:]]
        assert steps.count(minibatches) >= 3, steps  # most steps learned something

    # the callback runs after a row is written and before that step's checkpoint: the resumed
    # run must drop the orphan row and redo the step
    code = (
        "import os, signal, sys\n"
        "from rollcli.jobs.train import run_train_job\n"
        "def cb(row):\n"
        f"    if row['step'] == {KILL_AT}: os.kill(os.getpid(), signal.SIGKILL)\n"
        "run_train_job(sys.argv[1], callbacks=[cb])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(killed)], env=dict(os.environ))
    assert proc.returncode == -signal.SIGKILL
    assert len(read_jsonl(killed / "metrics.jsonl")) == KILL_AT + 1  # rows 0..4, 4 orphaned
    run_train_job(killed)

    expected = _comparable(read_jsonl(straight / "metrics.jsonl"))
    assert len(expected) == 8
    assert _comparable(read_jsonl(killed / "metrics.jsonl")) == expected
