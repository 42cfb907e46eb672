"""The job rows behind ``rollcli status`` and the live view (limit for huge runs)."""

from __future__ import annotations

from rollcli.cli._jobs import JobRows
from rollcli.store.atomic import append_jsonl
from rollcli.store.layout import job_dir
from rollcli.store.state import set_status


def _manifest(n: int) -> dict:
    jobs = [
        {"id": f"j{i:03d}", "type": "train", "allocator": "a", "seed": i, "depends_on": []}
        for i in range(n)
    ]
    return {"experiment": "x", "spec": {"budget": {"steps": 10}}, "plan": {"jobs": jobs}}


def test_rows_show_progress_and_errors(tmp_path):
    rows = JobRows(_manifest(2), tmp_path)
    append_jsonl(
        job_dir(tmp_path, "j000") / "metrics.jsonl",
        [{"step": 0, "cum_rollouts": 0, "eval/accuracy": 0.25}, {"step": 3, "cum_rollouts": 192}],
    )
    set_status(job_dir(tmp_path, "j000"), "running")
    set_status(job_dir(tmp_path, "j001"), "failed", error_tail="Traceback\nValueError: bad knob")
    first, second = rows.rows()
    assert (first["status"], first["step"], first["rollouts"], first["accuracy"]) == (
        "running",
        "3/10",
        "192",
        "0.250",
    )
    assert second["status"] == "failed" and second["note"] == "ValueError: bad knob"


def test_live_rows_are_limited_running_first(tmp_path):
    rows = JobRows(_manifest(100), tmp_path)
    statuses = {f"j{i:03d}": "done" for i in range(100)}
    statuses["j050"] = "running"
    statuses["j099"] = "failed"
    shown = rows.rows(statuses, limit=5)
    assert len(shown) == 5
    assert {"j050", "j099"} <= {r["id"] for r in shown}
    assert rows.table(statuses, limit=5).caption == "100 jobs: 98 done, 1 failed, 1 running"


def test_a_drained_pool_shows_in_the_live_view(tmp_path):
    """Issue 28: Pilot-Commit generated nothing from step 143 and the live view said nothing."""
    rows = JobRows(_manifest(1), tmp_path)
    metrics = job_dir(tmp_path, "j000") / "metrics.jsonl"
    set_status(job_dir(tmp_path, "j000"), "running")
    append_jsonl(
        metrics, [{"step": s, "cum_rollouts": 64 * s, "step_rollouts": 64} for s in (1, 2)]
    )
    assert rows.rows()[0]["note"] == ""
    append_jsonl(metrics, [{"step": s, "cum_rollouts": 128, "step_rollouts": 0} for s in (3, 4)])
    assert rows.rows()[0]["note"] == "pool drained: nothing generated since step 3"
    append_jsonl(metrics, [{"step": 5, "cum_rollouts": 192, "step_rollouts": 64}])
    assert rows.rows()[0]["note"] == ""  # the pool refilled (a new epoch)


def test_a_running_job_whose_process_died_shows_failed(tmp_path):
    """Issue 28: `rollcli status` kept a job `running` after its orchestrator was killed."""
    import subprocess
    import sys

    from rollcli.launch.api import ENTRY_MODULE

    rows = JobRows(_manifest(2), tmp_path)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    set_status(job_dir(tmp_path, "j000"), "running", executor={"kind": "local", "pid": gone.pid})
    alive = subprocess.Popen(  # a process whose command line is the job's entry point
        [
            sys.executable,
            "-c",
            "import time; time.sleep(60)",
            ENTRY_MODULE,
            str(job_dir(tmp_path, "j001")),
        ]
    )
    try:
        set_status(
            job_dir(tmp_path, "j001"), "running", executor={"kind": "local", "pid": alive.pid}
        )
        dead, running = rows.rows()
    finally:
        alive.kill()
        alive.wait()
    assert dead["status"] == "failed" and "process is gone" in dead["note"]
    assert running["status"] == "running" and running["note"] == ""
    # the live view's statuses come from the executor, which knows better than the state file
    assert rows.rows({"j000": "running", "j001": "running"})[0]["status"] == "running"
