"""The Slurm executor on the REAL local cluster (``bash scripts/slurm-local.sh start``).

Skipped, with the reason, when ``sinfo`` does not answer. Jobs are sim train jobs written per
docs/CONTRACTS.md §3 into run folders whose paths hold spaces and quotes. A requeued job is held
by Slurm for ~120 s (BeginTime); the tests release it with ``scontrol update StartTime=now``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from rollcli.launch.api import Job, Resources
from rollcli.launch.sbatch import render_sbatch
from rollcli.launch.slurm import SlurmExecutor
from rollcli.launch.slurm_queries import read_max_array_size, sacct_states
from rollcli.store.atomic import atomic_write_json, read_jsonl
from rollcli.store.state import read_state
from rollcli.testing.slurm import NO_CLUSTER_REASON, cluster_answers, wait_for

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.slow,
    pytest.mark.skipif(
        not cluster_answers(),
        reason=NO_CLUSTER_REASON,
    ),
]

SMALL_SIM = {"kind": "sim", "num_train_prompts": 256, "num_eval_prompts": 64, "score_noise": 5.0}
SLOW_SIM = {"kind": "sim", "num_train_prompts": 4096, "num_eval_prompts": 256}
TIME = "00:30:00"


def write_job(
    run_dir: Path, job_id: str, *, seed=0, steps=10, backend=None, allocator=None
) -> Path:
    """A train job folder per CONTRACTS §3 (``uniform`` allocator, sim backend)."""
    job_dir = run_dir / "jobs" / job_id
    config = {
        "experiment": run_dir.name,
        "job": {"id": job_id, "type": "train", "allocator": "grpo", "seed": seed},
        "backend": backend or SMALL_SIM,
        "allocator": allocator or {"kind": "uniform", "n": 8},
        "budget": {"steps": steps, "rollouts_per_step": 128},
        "eval": {"every": 50},
        "checkpoint": {"every": 1},
        "tracking": {"wandb": {"project": "rollcli", "mode": "disabled"}},
    }
    (job_dir / "logs").mkdir(parents=True, exist_ok=True)
    (job_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), "utf-8")
    return job_dir


def make_jobs(run_dir: Path, n: int, deps=None, **kw) -> list[Job]:
    jobs = []
    for i in range(n):
        jid = f"j{i:02d}"
        jobs.append(
            Job(
                jid,
                "train",
                write_job(run_dir, jid, seed=i, **kw),
                tuple((deps or {}).get(jid, ())),
                Resources(time=TIME),
            )  # fmt: skip
        )
    return jobs


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    path = tmp_path / 'it\'s a "run" dir' / "exp one"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def executor(run_dir: Path):
    executor = SlurmExecutor({"executor": "slurm", "array_parallelism": 4}, sacct_interval_s=0.3)
    yield executor
    if (run_dir / "jobs").is_dir():  # leave nothing queued or running behind a failed test
        executor.cancel(run_dir)


def slurm_id(job: Job) -> str:
    return read_state(job.job_dir)["slurm"]["job_id"]


def squeue_state(sid: str) -> str:
    out = subprocess.run(["squeue", "-h", "-j", sid, "-o", "%T"], capture_output=True, text=True)
    return out.stdout.strip()


def comparable(rows):
    return [
        {k: v for k, v in row.items() if k != "wall_s" and not k.startswith("time/")}
        for row in rows
    ]


def test_twelve_job_sweep_is_one_array_with_parallelism_4(run_dir, executor):
    jobs = make_jobs(run_dir, 12, steps=10)
    executor.submit(jobs, run_dir)
    ids = {slurm_id(j) for j in jobs}
    assert {i.split("_")[0] for i in ids} == {slurm_id(jobs[0]).split("_")[0]}  # one array
    assert sorted(int(i.split("_")[1]) for i in ids) == list(range(12))
    submitted = Path(read_state(jobs[0].job_dir)["slurm"]["submission"]).read_text()
    assert "#SBATCH --array=0-11%4" in submitted
    statuses = executor.wait(jobs, run_dir, interval=0.3)
    assert statuses == {j.id: "done" for j in jobs}
    for job in jobs:
        rows = read_jsonl(job.job_dir / "metrics.jsonl")
        assert [r["step"] for r in rows] == list(range(11))
        assert (job.job_dir / "logs" / "stdout.log").resolve().exists()  # rollcli logs reads it
    # the plan renders exactly the script that was submitted
    from rollcli.launch.sbatch import group_into_arrays

    group = group_into_arrays(jobs, array_parallelism=4)[0]
    assert render_sbatch(group, run_dir=run_dir, experiment=run_dir.name) == submitted
    # sacct agrees (it lags the store by a second or two) ...
    wait_for(
        lambda: [sacct_states(sorted(ids)).get(i) for i in sorted(ids)] == ["COMPLETED"] * 12,
        20,
        "sacct",
    )
    # ... and Slurm never ran more than 4 tasks of the array at once
    base = slurm_id(jobs[0]).split("_")[0]
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", base, "-o", "Start,End"], capture_output=True, text=True
    ).stdout.split()
    spans = [line.split("|") for line in out]
    assert len(spans) == 12
    assert max(sum(s <= t < e for s, e in spans) for t, _ in spans) <= 4


def test_requeued_job_resumes_with_exactly_the_metrics_of_an_uninterrupted_run(
    run_dir, executor, tmp_path
):
    from rollcli.jobs.entry import run_job

    reference = write_job(tmp_path / "reference", "ref", steps=300, backend=SLOW_SIM)
    assert run_job(reference) == 0
    [job] = make_jobs(run_dir, 1, steps=300, backend=SLOW_SIM)
    executor.submit([job], run_dir)
    wait_for(lambda: len(read_jsonl(job.job_dir / "metrics.jsonl")) >= 40, 60, "40 steps")
    sid = slurm_id(job)
    # what submitit's job._interrupt(timeout=True) does: Slurm's USR2 warning
    subprocess.run(["scancel", sid, "--signal", "USR2"], check=True)
    # release it only once the old attempt is gone (PENDING in squeue and sacct, not REQUEUED):
    # releasing while the requeue is still in flight made Slurm fail the new attempt at once
    wait_for(
        lambda: (
            read_state(job.job_dir)["status"] == "pending"
            and squeue_state(sid) == "PENDING"
            and sacct_states([sid]).get(sid) == "PENDING"
        ),  # accounting closed the old attempt
        60,
        "the requeue",
    )
    rows_at_requeue = len(read_jsonl(job.job_dir / "metrics.jsonl"))
    assert rows_at_requeue < 301, "the job finished before it was interrupted"
    subprocess.run(["scontrol", "update", f"JobId={sid}", "StartTime=now"], check=True)
    assert executor.wait([job], run_dir, interval=0.3) == {job.id: "done"}, read_state(job.job_dir)
    state = read_state(job.job_dir)
    assert state["attempts"] == 2
    got = read_jsonl(job.job_dir / "metrics.jsonl")
    want = read_jsonl(reference / "metrics.jsonl")
    assert comparable(got) == comparable(want)
    assert (
        "Requeued job"
        in Path(state["slurm"]["stderr"]).read_text() + Path(state["slurm"]["stdout"]).read_text()
    )


def test_cancel_stops_a_running_array(run_dir, executor):
    executor.launch["array_parallelism"] = 2
    jobs = make_jobs(run_dir, 5, steps=3000, backend=SLOW_SIM)
    executor.submit(jobs, run_dir)

    def steps(job: Job) -> int:
        return len(read_jsonl(job.job_dir / "metrics.jsonl"))

    wait_for(lambda: sum(steps(j) > 5 for j in jobs) == 2, 60, "2 jobs past step 5")
    running = [j for j in jobs if steps(j) > 5]
    signalled = executor.cancel(run_dir)
    assert sorted(signalled) == sorted(j.id for j in jobs)
    assert executor.wait(jobs, run_dir, interval=0.3) == {j.id: "cancelled" for j in jobs}
    base = slurm_id(jobs[0]).split("_")[0]

    def gone() -> bool:
        out = subprocess.run(["squeue", "-h", "-j", base], capture_output=True, text=True)
        return out.stdout.strip() == ""

    wait_for(gone, 40, "the array to leave the queue")
    states = sacct_states([base])
    assert states and set(states.values()) <= {"CANCELLED", "FAILED", "COMPLETED"}, states
    for job in jobs:  # a task that still started saw the cancel request and did no work
        if states.get(slurm_id(job)) == "COMPLETED":
            assert job not in running and not (job.job_dir / "metrics.jsonl").exists()
    # the running ones stopped at a checkpoint, so a rerun resumes them
    for job in running:
        assert any((job.job_dir / "checkpoints").iterdir())
    assert all(read_state(j.job_dir)["status"] == "cancelled" for j in jobs)


def test_failing_job_shows_its_error_tail_and_fails_its_dependents(run_dir, executor):
    bad = Job(
        "bad",
        "train",
        write_job(run_dir, "bad", allocator={"kind": "uniform", "n": 8, "no_such_knob": 1}),
        (),
        Resources(time=TIME),
    )
    after = Job("after", "train", write_job(run_dir, "after"), ("bad",), Resources(time=TIME))
    executor.submit([bad, after], run_dir)
    assert executor.wait([bad, after], run_dir, interval=0.3) == {
        "bad": "failed",
        "after": "failed",
    }
    tail = read_state(bad.job_dir)["error_tail"]
    assert "no_such_knob" in tail
    # `rollcli status` shows it (a minimal manifest makes this folder a run)
    from typer.testing import CliRunner

    from rollcli.cli.app import app

    plan = [
        {
            "id": j.id,
            "type": "train",
            "allocator": "grpo",
            "seed": 0,
            "depends_on": list(j.depends_on),
        }
        for j in (bad, after)
    ]
    manifest = {"experiment": run_dir.name, "spec": {"launch": {"executor": "slurm"}}}
    atomic_write_json(run_dir / "manifest.json", {**manifest, "plan": {"jobs": plan}})
    result = CliRunner().invoke(app, ["status", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["id"]: row for row in json.loads(result.output)["jobs"]}
    assert rows["bad"]["status"] == "failed"
    assert "allocator 'uniform' has no" in rows["bad"]["note"]  # the tail's last line
    assert "dependency bad is failed" in read_state(after.job_dir)["error_tail"]
    assert not (after.job_dir / "metrics.jsonl").exists()  # never ran
    # the dependency is a real Slurm dependency on the first array
    script = Path(read_state(after.job_dir)["slurm"]["submission"]).read_text()
    assert f"--dependency=afterany:{slurm_id(bad).split('_')[0]}" in script


def test_dependent_job_starts_after_its_dependency_is_done(run_dir, executor):
    first = Job("first", "train", write_job(run_dir, "first", steps=60), (), Resources(time=TIME))
    second = Job("second", "train", write_job(run_dir, "second"), ("first",), Resources(time=TIME))
    executor.submit([first, second], run_dir)
    assert executor.wait([first, second], run_dir, interval=0.3) == {
        "first": "done",
        "second": "done",
    }
    assert read_state(first.job_dir)["finished"] <= read_state(second.job_dir)["started"]


def test_max_array_size_is_read_from_the_cluster():
    out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("MaxArraySize"))
    assert read_max_array_size() == int(line.split("=")[1])


def test_rerun_does_not_resubmit_a_job_still_queued(run_dir, executor):
    [job] = make_jobs(run_dir, 1, steps=3000, backend=SLOW_SIM)
    executor.submit([job], run_dir)
    first = slurm_id(job)
    executor.submit([job], run_dir)  # e.g. a second `rollcli run --detach` of the same spec
    assert slurm_id(job) == first
    executor.cancel(run_dir, [job.id])
    assert json.loads((job.job_dir / "state.json").read_text())["status"] == "cancelled"
