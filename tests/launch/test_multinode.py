"""Multi-node jobs on the REAL two-node cluster (``scripts/slurm-local.sh start --nodes 2``).

Two network namespaces joined by a veth pair, a slurmd in each (rcnode1, rcnode2), the
controller on the first. Skipped, naming why, when that cluster is not running (CI starts it,
and says why when namespaces are not permitted). What these prove: a 2-node job planned by
``rollcli plan`` starts the Ray head on node 1 and a worker on node 2 *by address*, and the
driver sees both nodes' resources; a node that cannot reach the head fails the job with a clear
message within a bounded time; a 2-node job interrupted by Slurm is requeued and resumes with
exactly the metrics of an uninterrupted run. (verl across both nodes:
tests/backends/verl/test_verl_multinode.py.)
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from rollcli.launch.api import Job, Resources
from rollcli.launch.slurm import SlurmExecutor
from rollcli.launch.slurm_queries import sacct_states
from rollcli.store.atomic import read_jsonl
from rollcli.store.state import read_state
from rollcli.testing.slurm import (
    TEST_FIREWALL,
    TwoNodeCluster,
    two_node_skip_reason,
    use_two_node_cluster,
    wait_for,
)
from rollcli.testing.train_jobs import write_job

SKIP = two_node_skip_reason()
pytestmark = [
    pytest.mark.slurm,
    pytest.mark.slow,
    pytest.mark.skipif(SKIP is not None, reason=str(SKIP)),
]

SPEC = """\
name: two-node
backend: {kind: sim, num_train_prompts: 256, num_eval_prompts: 64}
budget: {steps: 8, rollouts_per_step: 64}
allocators:
  grpo: {kind: uniform, n: 8}
seeds: [0]
eval: {every: 4}
target: {baseline: grpo}
launch: {executor: slurm, nodes: 2, gpus_per_node: 1, cpus_per_task: 2, time: "00:20:00"}
tracking: {wandb: {mode: disabled}}
"""
SLOW_SIM = {"kind": "sim", "num_train_prompts": 4096, "num_eval_prompts": 256}


@pytest.fixture
def cluster(monkeypatch) -> TwoNodeCluster:
    """The two-node cluster's clients on PATH for this test (and the jobs it submits)."""
    found = use_two_node_cluster(monkeypatch)
    monkeypatch.setenv("ROLLCLI_RAY_OBJECT_STORE_BYTES", str(80 * 1024 * 1024))
    return found


def job_dirs(run_dir: Path) -> dict[str, Path]:
    return {
        yaml.safe_load((d / "config.yaml").read_text())["job"]["type"]: d
        for d in (run_dir / "jobs").iterdir()
    }


def squeue_empty(job_id: str) -> bool:
    out = subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True)
    return out.returncode == 0 and not out.stdout.strip()


def ray_processes(cluster: TwoNodeCluster) -> list[str]:
    """Command lines of Ray processes left in either node's namespace."""
    left = []
    for ns in cluster.namespaces:
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        for pid in pids.stdout.split():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "ray" in cmd and "slurm" not in cmd:
                left.append(f"{ns}:{pid}:{cmd[:120]}")
    return left


def test_planned_two_node_job_runs_head_on_node1_and_worker_on_node2(cluster, cli, tmp_path):
    spec = tmp_path / "two-node.yaml"
    spec.write_text(SPEC)
    runs = tmp_path / "runs 'two'"
    plan = cli(["plan", spec, "--sbatch", "--runs-dir", runs])
    assert plan.exit_code == 0, plan.output
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=1"):
        assert line in plan.stdout
    assert "export ROLLCLI_RAY_PORT=$((20000 + SLURM_JOB_ID % 20000))" in plan.stdout

    result = cli(["run", spec, "--detach", "--runs-dir", runs])
    assert result.exit_code == 0, result.output
    train = job_dirs(runs / "two-node")["train"]
    wait_for(lambda: read_state(train)["status"] in ("done", "failed"), 240, "the 2-node job")
    state = read_state(train)
    assert state["status"] == "done", state["error_tail"]
    # the submitted script is the one the plan showed (same #SBATCH and setup lines)
    submitted = Path(state["slurm"]["submission"]).read_text()
    for line in submitted.splitlines():
        if line.startswith(("#SBATCH --nodes", "#SBATCH --gpus", "export ROLLCLI_RAY")):
            assert line in plan.stdout
    # the head ran on node 1, the trainer with it; the worker on node 2; each by its address
    session = f"{state['slurm']['job_id']}.0"
    ray_dir = train / "ray"
    head = json.loads((ray_dir / f"head-{session}.json").read_text())
    assert (head["host"], head["ip"]) == (cluster.hosts[0], cluster.addresses[0])
    assert state["executor"]["host"] == cluster.hosts[0]
    worker = json.loads((ray_dir / f"node1-{session}.json").read_text())
    assert (worker["host"], worker["ip"]) == (cluster.hosts[1], cluster.addresses[1])
    assert worker["head"] == f"{cluster.addresses[0]}:{head['port']}"
    # the driver saw both nodes and both nodes' resources (2 CPUs and 1 fake GPU each)
    joined = json.loads((ray_dir / f"cluster-{session}.json").read_text())
    assert [(n["rank"], n["host"], n["ip"]) for n in joined["nodes"]] == [
        (0, cluster.hosts[0], cluster.addresses[0]),
        (1, cluster.hosts[1], cluster.addresses[1]),
    ]
    assert [n["resources"]["GPU"] for n in joined["nodes"]] == [1.0, 1.0]
    assert joined["resources"]["CPU"] == 4.0 and joined["resources"]["GPU"] == 2.0
    rows = read_jsonl(train / "metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(9))
    # Slurm ran it on both nodes, and nothing of Ray is left behind on either
    sid = state["slurm"]["job_id"]
    wait_for(lambda: squeue_empty(sid), 30, "the job to leave the queue")

    def accounting() -> str:  # it lags the queue by a second or two
        out = cluster.run("sacct", "-X", "-n", "-P", "-j", sid, "-o", "NodeList,State").stdout
        return out.strip() if "RUNNING" not in out else ""

    assert wait_for(accounting, 30, "sacct") == "rcnode[1-2]|COMPLETED"
    wait_for(lambda: not ray_processes(cluster), 30, "Ray processes to end")


def add_firewall(cluster: TwoNodeCluster) -> None:
    """Node 2 drops its TCP packets to Ray's ports on node 1 (Slurm's own ports stay open)."""
    rules = (
        f"table inet {TEST_FIREWALL} {{\n chain out {{\n  type filter hook output priority 0;\n"
        f"  ip daddr {cluster.addresses[0]} tcp dport 20000-41999 drop\n }}\n}}\n"
    )
    proc = cluster.on_node(1, "nft", "-f", "-", input=rules)
    assert proc.returncode == 0, proc.stderr


def test_node_that_cannot_reach_the_head_fails_the_job_in_bounded_time(
    cluster, tmp_path, monkeypatch
):
    if subprocess.run(["which", "nft"], capture_output=True).returncode != 0:
        pytest.skip("needs nft (nftables) to cut Ray's ports between the nodes")
    join_timeout = 30
    monkeypatch.setenv("ROLLCLI_RAY_JOIN_TIMEOUT", str(join_timeout))
    add_firewall(cluster)
    try:
        for attempt in range(2):
            run_dir = tmp_path / f"cut off {attempt}"
            [job] = make_jobs(run_dir, 1, steps=5)
            executor = SlurmExecutor({"executor": "slurm"}, sacct_interval_s=0.3)
            start = time.monotonic()
            try:
                executor.submit([job], run_dir)
                statuses = executor.wait([job], run_dir, interval=0.5)
            finally:
                executor.cancel(run_dir)
            elapsed = time.monotonic() - start
            # Slurm itself failing to start the step on node 2 (seen once in CI at load ~10:
            # "Task launch ... failed on node rcnode2: Communication connection failure", not
            # reproduced since) is not what this test checks: submit again, once
            if "failed on node" not in read_state(job.job_dir).get("error_tail", ""):
                break
    finally:
        cluster.on_node(1, "nft", "delete", "table", "inet", TEST_FIREWALL)
    assert statuses == {job.id: "failed"}
    # bounded: without the join deadline the job hangs until Slurm's 30-minute limit; the
    # margin over the deadline is Slurm start-up and two `ray start`s, minutes on a loaded box
    assert elapsed < join_timeout + 150, f"took {elapsed:.0f}s to fail"
    tail = read_state(job.job_dir)["error_tail"]
    assert "1 of 2 nodes joined (rcnode1 10.213.7.1)" in tail, tail
    # whichever deadline fires first words it: the head's view ("waiting for the head ... a
    # firewall?") or the worker's own ("never answered: is TCP open ...?")
    assert "rank 1 (rcnode2)" in tail and ("firewall" in tail or "is TCP open" in tail), tail
    assert not (job.job_dir / "metrics.jsonl").exists()  # the trainer never started
    sid = read_state(job.job_dir)["slurm"]["job_id"]
    wait_for(lambda: squeue_empty(sid), 30, "the job to leave the queue")
    wait_for(lambda: (sacct_states([sid]) or {}).get(sid) == "FAILED", 30, "sacct FAILED")
    wait_for(lambda: not ray_processes(cluster), 30, "Ray processes to end")


def make_jobs(run_dir: Path, n: int, *, steps: int, backend=None) -> list[Job]:
    """``n`` 2-node sim train jobs (uniform), checkpointed every step."""
    resources = Resources(nodes=2, gpus_per_node=1, cpus_per_task=1, time="00:30:00")
    return [
        Job(
            f"j{i}",
            "train",
            write_job(run_dir / "jobs" / f"j{i}", steps=steps, eval_every=50, backend=backend),
            (),
            resources,
        )
        for i in range(n)
    ]


def comparable(rows):
    return [
        {k: v for k, v in r.items() if k != "wall_s" and not k.startswith("time/")} for r in rows
    ]


def test_requeued_two_node_job_resumes_with_the_metrics_of_an_uninterrupted_run(cluster, tmp_path):
    from rollcli.jobs.entry import run_job

    reference = write_job(tmp_path / "reference", steps=300, eval_every=50, backend=SLOW_SIM)
    assert run_job(reference) == 0
    run_dir = tmp_path / "requeue"
    [job] = make_jobs(run_dir, 1, steps=300, backend=SLOW_SIM)
    executor = SlurmExecutor({"executor": "slurm"}, sacct_interval_s=0.3)
    try:
        executor.submit([job], run_dir)
        # generous: ends as soon as the steps are there; a loaded machine may need a second
        # `ray start` on node 2 (ray_bootstrap.START_RETRIES) before the first step
        wait_for(lambda: len(read_jsonl(job.job_dir / "metrics.jsonl")) >= 40, 300, "40 steps")
        sid = read_state(job.job_dir)["slurm"]["job_id"]
        subprocess.run(["scancel", sid, "--signal", "USR2"], check=True)  # Slurm's warning
        wait_for(
            lambda: (
                read_state(job.job_dir)["status"] == "pending"
                and subprocess.run(
                    ["squeue", "-h", "-j", sid, "-o", "%T"], capture_output=True, text=True
                ).stdout.strip()
                == "PENDING"
                and (sacct_states([sid]) or {}).get(sid) == "PENDING"
            ),
            90,
            "the requeue",
        )
        assert len(read_jsonl(job.job_dir / "metrics.jsonl")) < 301
        subprocess.run(["scontrol", "update", f"JobId={sid}", "StartTime=now"], check=True)
        assert executor.wait([job], run_dir, interval=0.5) == {job.id: "done"}
    finally:
        executor.cancel(run_dir)
    state = read_state(job.job_dir)
    assert state["attempts"] == 2
    assert comparable(read_jsonl(job.job_dir / "metrics.jsonl")) == comparable(
        read_jsonl(reference / "metrics.jsonl")
    )
    # each attempt built its own two-node Ray cluster (the session counts Slurm's restarts)
    for session in (f"{sid}.0", f"{sid}.1"):
        joined = json.loads((job.job_dir / "ray" / f"cluster-{session}.json").read_text())
        assert [n["host"] for n in joined["nodes"]] == list(cluster.hosts)
