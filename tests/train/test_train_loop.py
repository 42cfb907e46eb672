"""The step loop's metrics rows (docs/CONTRACTS.md §4) for every registered allocator kind."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from rollcli.jobs.train import run_train_job
from rollcli.store.atomic import read_jsonl
from rollcli.testing.train_jobs import ALL_KINDS, write_job
from rollcli.train.loop import mean_group_variance

STEP_KEYS = {
    "step", "cum_rollouts", "cum_tokens", "step_rollouts", "step_tokens", "wall_s",
    "time/generate_s", "time/allocate_s", "time/update_s", "time/eval_s", "time/step_s",
    "reward_mean", "reward_var", "gen_reward_var", "zero_var_frac", "prompts_trained",
    "rollouts_trained", "cum_rollouts_trained", "evicted", "deferred", "epoch", "policy_version",
}  # fmt: skip


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
    first = rows[0]
    assert (first["step"], first["cum_rollouts"], first["cum_tokens"]) == (0, 0, 0)
    assert 0.0 <= first["eval/accuracy"] <= 1.0
    cum_rollouts = cum_tokens = cum_trained = 0
    for step, row in enumerate(rows[1:], start=1):
        assert set(row) >= STEP_KEYS, STEP_KEYS - set(row)
        assert row["step"] == step and row["policy_version"] == step
        cum_rollouts += row["step_rollouts"]
        cum_tokens += row["step_tokens"]
        assert (row["cum_rollouts"], row["cum_tokens"]) == (cum_rollouts, cum_tokens)
        assert row["step_tokens"] > row["step_rollouts"] > 0  # tokens are not rollouts
        assert 0 <= row["zero_var_frac"] <= 1 and 0 <= row["reward_mean"] <= 1
        assert row["rollouts_trained"] >= row["prompts_trained"] >= 0
        cum_trained += row["rollouts_trained"]
        assert row["cum_rollouts_trained"] == cum_trained <= row["cum_rollouts"]
        assert row["wall_s"] >= rows[step - 1]["wall_s"]
        assert any(key.startswith("train/") for key in row)
        assert ("eval/accuracy" in row) == (step in (3, 6, 7))
        assert not {"alloc/evicted", "alloc/deferred", "alloc/epoch"} & set(row)


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
