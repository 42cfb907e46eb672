"""The issue-29 allocators (VCRL, AR3PO, Rollout-GDRO, HORA, VIP, XRPO) run whole tiny jobs with
RL-ZVP's advantage on: the metrics rows follow the contract and zero-variance rows train (except under
VCRL, which trains no zero-variance group)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollcli.jobs.train import run_train_job
from rollcli.store.atomic import read_jsonl
from rollcli.testing.rows import check_metrics_rows
from rollcli.testing.train_jobs import write_job

from .conftest import learning_micro_config


@pytest.mark.parametrize(
    "allocator",
    [
        {"kind": "vcrl", "n": 4},
        {"kind": "ar3po", "round_size": 2, "max_rounds": 2},
        {"kind": "gdro", "n_mean": 4, "n_min": 2, "n_max": 8},
        {"kind": "hora", "n_mean": 4, "n_init": 2, "n_max": 8},
        {"kind": "vip", "n_mean": 4, "n_min": 2, "n_max": 8},
        {"kind": "xrpo", "n_mean": 4, "n_init": 2, "n_max": 8},
    ],
    ids=lambda a: a["kind"],
)
def test_field_allocators_run_tiny_jobs_with_rl_zvp(
    tmp_path: Path, tiny_cache: Path, allocator: dict
) -> None:
    backend = learning_micro_config(tiny_cache, zero_variance_advantage="rl_zvp")
    job = write_job(tmp_path / allocator["kind"], steps=4, eval_every=2, backend=backend,
                    allocator=allocator, rollouts_per_step=16)  # fmt: skip
    run_train_job(job)
    rows = read_jsonl(job / "metrics.jsonl")
    check_metrics_rows(rows, num_steps=4, eval_steps={2, 4})
    train = [r for r in rows if r["step"] > 0]
    assert all(r["step_rollouts"] <= (32 if allocator["kind"] == "gdro" else 16) for r in train)
    zvp_rows = sum(r["train/zvp_rows"] for r in train)
    if allocator["kind"] == "vcrl":
        assert zvp_rows == 0  # VCRL trains only groups of high variance: none is zero-variance
    else:
        assert zvp_rows > 0
