"""Status without a working sacct: nothing hangs and the store answers (no cluster needed).

Small fakes of ``sacct``/``squeue`` on PATH stand for a hanging, missing or lagging accounting
daemon; the executor must answer from ``state.json`` within its timeout, and only mark a job
failed when slurmctld (squeue) confirms that the task left the queue.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rollcli.launch.api import Job
from rollcli.launch.slurm import SlurmExecutor
from rollcli.launch.slurm_queries import sacct_states
from rollcli.store.state import init_state, read_state, set_status, update_state


def _fake(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    bin_dir = tmp_path / "fake bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))  # no real Slurm tools visible
    run_dir = tmp_path / "run 'x'"
    job_dir = run_dir / "jobs" / "a"
    (job_dir).mkdir(parents=True)
    (job_dir / "config.yaml").write_text("job: {id: a, type: train}\n")
    init_state(job_dir)
    stderr = job_dir / "task.err"
    stderr.write_text("line 1\nMemoryError: out of memory in step 7\n")
    update_state(job_dir, slurm={"kind": "slurm", "job_id": "77_3", "stderr": str(stderr)})
    set_status(job_dir, "running")
    return bin_dir, run_dir, Job("a", "train", job_dir)


def test_hanging_sacct_times_out_and_the_store_answers(run):
    bin_dir, run_dir, job = run
    _fake(bin_dir, "sacct", "sleep 30")
    executor = SlurmExecutor({"executor": "slurm"}, sacct_timeout_s=1.0)
    start = time.monotonic()
    assert executor.poll([job], run_dir) == {"a": "running"}
    assert time.monotonic() - start < 5
    assert sacct_states(["77_3"], timeout=0.5) is None


def test_missing_sacct_falls_back_to_the_store(run):
    _, run_dir, job = run
    executor = SlurmExecutor({"executor": "slurm"})
    assert executor.poll([job], run_dir) == {"a": "running"}
    assert executor.cancel(run_dir, ["a"]) == ["a"]  # scancel missing: the store still records it
    assert read_state(job.job_dir)["status"] == "cancelled"


def test_task_killed_by_slurm_is_marked_failed_with_its_log_tail(run):
    bin_dir, run_dir, job = run
    _fake(bin_dir, "sacct", "printf 'JobID|State|ExitCode\\n77_3|OUT_OF_MEMORY|0:125\\n'")
    _fake(bin_dir, "squeue", "true")  # slurmctld: the task is no longer queued
    executor = SlurmExecutor({"executor": "slurm"})
    assert executor.poll([job], run_dir) == {"a": "failed"}
    tail = read_state(job.job_dir)["error_tail"]
    assert "OUT_OF_MEMORY" in tail and "MemoryError: out of memory in step 7" in tail


def test_lagging_sacct_is_checked_against_squeue(run):
    bin_dir, run_dir, job = run
    # accounting still shows the old attempt of a requeued task; slurmctld has it pending
    _fake(bin_dir, "sacct", "printf 'JobID|State|ExitCode\\n77_3|FAILED|1:0\\n'")
    _fake(bin_dir, "squeue", "echo '77_[3-5%2]|PENDING'")
    executor = SlurmExecutor({"executor": "slurm"})
    assert executor.poll([job], run_dir) == {"a": "pending"}
    assert read_state(job.job_dir)["status"] == "running"  # nothing recorded from a guess
    # squeue down too: the store's word stands
    _fake(bin_dir, "squeue", "exit 1")
    assert SlurmExecutor({"executor": "slurm"}).poll([job], run_dir) == {"a": "running"}


def test_sacct_running_state_wins_over_a_stale_pending_store(run):
    bin_dir, run_dir, job = run
    _fake(bin_dir, "sacct", "printf '%s\\n' 'JobID|State|ExitCode' '77_[3-4%2]|PENDING|0:0'")
    executor = SlurmExecutor({"executor": "slurm"})
    assert executor.poll([job], run_dir) == {"a": "pending"}
