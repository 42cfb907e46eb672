"""The metrics-row contract on the tiny backend: the same check as sim's and verl's rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollcli.jobs.train import run_train_job
from rollcli.store.atomic import read_jsonl
from rollcli.testing.rows import check_metrics_rows
from rollcli.testing.train_jobs import write_job

from .conftest import micro_config


@pytest.mark.parametrize(
    "allocator",
    [
        {"kind": "uniform", "n": 4},
        {"kind": "pilot_commit", "n_pilot": 2, "n_commit": 2, "on_max_rounds": "stop"},
    ],
)
def test_tiny_rows_follow_the_contract(tmp_path: Path, tiny_cache: Path, allocator: dict) -> None:
    job = write_job(tmp_path / allocator["kind"], steps=4, eval_every=2,
                    backend=micro_config(tiny_cache), allocator=allocator,
                    rollouts_per_step=16)  # fmt: skip
    run_train_job(job)
    rows = read_jsonl(job / "metrics.jsonl")
    check_metrics_rows(rows, num_steps=4, eval_steps={2, 4})
    assert all(r["policy_version"] == r["step"] for r in rows)
