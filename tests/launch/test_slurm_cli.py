"""``rollcli run --detach`` / ``status`` / ``logs`` / ``cancel`` of a spec with ``executor: slurm``,
end to end on the REAL local cluster (skipped with the reason when ``sinfo`` does not answer)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.store.state import read_state
from rollcli.testing.slurm import NO_CLUSTER_REASON, cluster_answers

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.slow,
    pytest.mark.skipif(
        not cluster_answers(),
        reason=NO_CLUSTER_REASON,
    ),
]

# the sim quickstart template: seconds a job, no base model to build
SPEC = Path(__file__).resolve().parents[2] / "rollcli" / "templates" / "specs" / "quickstart.yaml"
SLURM = ["launch.executor=slurm", "launch.time=00:30:00", "launch.array_parallelism=4", "seeds=[0]"]


def cli(*args: str):
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def statuses(run_dir: Path) -> dict[str, str]:
    rows = json.loads(cli("status", run_dir, "--json"))["jobs"]
    return {row["job"]: row["status"] for row in rows}


def wait_statuses(run_dir: Path, want: set[str], timeout: float) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = statuses(run_dir)
        if set(current.values()) <= want:
            return current
        time.sleep(0.5)
    raise AssertionError(f"statuses still {current} after {timeout}s")


def test_run_detach_then_status_and_logs(tmp_path):
    runs = tmp_path / 'my "runs" dir'
    start = time.monotonic()
    out = cli("run", SPEC, *SLURM, "budget.steps=10", "--detach", "--runs-dir", runs)
    assert time.monotonic() - start < 15 and "submitted" in out
    run_dir = runs / "quickstart"
    final = wait_statuses(run_dir, {"done"}, 120)
    assert len(final) == 5  # 4 allocators x 1 seed + the report
    assert "wrote" in cli("logs", run_dir, "report", "--stream", "stdout")
    assert "Starting with JobEnvironment" in cli("logs", run_dir, "grpo/0", "--stream", "stdout")


def test_cancel_a_detached_run(tmp_path):
    runs = tmp_path / "runs"
    cli("run", SPEC, *SLURM, "budget.steps=5000", "--detach", "--runs-dir", runs)
    run_dir = runs / "quickstart"
    deadline = time.monotonic() + 60
    while "running" not in statuses(run_dir).values():
        assert time.monotonic() < deadline, "no job started"
        time.sleep(0.3)
    out = cli("cancel", run_dir, "grpo/0")
    assert "signalled 1 job" in out
    out = cli("cancel", run_dir)
    final = wait_statuses(run_dir, {"cancelled"}, 60)
    assert set(final.values()) == {"cancelled"}
    for job in (run_dir / "jobs").iterdir():
        assert read_state(job)["status"] == "cancelled"
