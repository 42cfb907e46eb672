"""The step loop's metrics rows (docs/CONTRACTS.md §4) for every registered allocator kind."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from rollcli.jobs.train import run_train_job
from rollcli.store.atomic import read_jsonl
from rollcli.testing.rows import check_metrics_rows
from rollcli.testing.train_jobs import ALL_KINDS, write_job
from rollcli.train.rows import mean_group_variance

# kinds whose step may generate nothing and train groups completed in earlier steps
TRAINS_CARRY_OVER = {"speed"}


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_rows_of_every_allocator(tmp_path: Path, kind: str) -> None:
    job = write_job(tmp_path / kind, kind, steps=7, eval_every=3)
    seen: list[dict] = []

    def callback(row: dict) -> None:
        # called after the row is written: it is the file's last line
        assert read_jsonl(job / "metrics.jsonl")[-1] == json.loads(json.dumps(row))
        seen.append(row)

    run_train_job(job, callbacks=[callback])
    rows = read_jsonl(job / "metrics.jsonl")
    assert len(seen) == len(rows) == 8
    check_metrics_rows(rows, num_steps=7, eval_steps={3, 6, 7})  # the contract of every backend
    for step, row in enumerate(rows[1:], start=1):  # what the sim adds: one update a step
        assert row["policy_version"] == step
        if row["step_rollouts"] or kind not in TRAINS_CARRY_OVER:
            assert row["step_tokens"] > row["step_rollouts"] > 0  # tokens are not rollouts


def test_uniform_row_values(tmp_path: Path) -> None:
    job = write_job(tmp_path / "u", "uniform", steps=3)
    run_train_job(job)
    for row in read_jsonl(job / "metrics.jsonl")[1:]:
        assert row["step_rollouts"] == row["rollouts_trained"] == 128
        assert row["prompts_trained"] == 16
        assert row["reward_var"] == row["gen_reward_var"]  # uniform trains all it generates
        assert row["evicted"] == row["deferred"] == 0


def test_mean_group_variance() -> None:
    groups = [np.array([1.0, 0.0]), np.array([1.0, 1.0, 1.0]), np.array([0.0])]
    assert mean_group_variance(groups) == pytest.approx((0.25 + 0 + 0) / 3)
    assert mean_group_variance([]) == 0.0


def test_stop_event_checkpoints_and_returns(tmp_path: Path) -> None:
    job = write_job(tmp_path / "s", steps=10, every=0)  # only the stop makes a checkpoint
    stop = threading.Event()

    def stop_at_four(row: dict) -> None:
        if row["step"] == 4:
            stop.set()

    run_train_job(job, stop=stop, callbacks=[stop_at_four])
    assert [r["step"] for r in read_jsonl(job / "metrics.jsonl")] == [0, 1, 2, 3, 4]
    assert [p.name for p in (job / "checkpoints").iterdir()] == ["step_00000004"]
    run_train_job(job)  # resumes at 5
    assert [r["step"] for r in read_jsonl(job / "metrics.jsonl")] == list(range(11))


def test_stop_already_set_runs_nothing(tmp_path: Path) -> None:
    job = write_job(tmp_path / "s", steps=10)
    stop = threading.Event()
    stop.set()
    run_train_job(job, stop=stop)
    assert [r["step"] for r in read_jsonl(job / "metrics.jsonl")] == [0]
    assert not (job / "checkpoints").exists()


def test_finished_job_is_not_rerun(tmp_path: Path) -> None:
    job = write_job(tmp_path / "f", steps=2)
    run_train_job(job)
    before = (job / "metrics.jsonl").read_bytes()
    run_train_job(job)
    assert (job / "metrics.jsonl").read_bytes() == before


def test_a_drained_pool_is_said_once_in_the_log():
    """Issue 28: Pilot-Commit generated nothing from step 143 and the logs said nothing."""
    from rollcli.train.job import DrainWatch

    watch = DrainWatch()
    rows = [{"step": 0}] + [{"step": s, "step_rollouts": 64 if s < 3 else 0} for s in range(1, 6)]
    notices = [watch.notice(row) for row in rows]
    assert notices[:3] == [None, None, None] and notices[4:] == [None, None]
    assert notices[3].startswith("warning: step 3 generated nothing: the prompt pool is drained")
    assert watch.notice({"step": 6, "step_rollouts": 8}) == (
        "step 6 generates again (nothing was generated from step 3)"
    )
