"""The Ray bootstrap of multi-node verl jobs: pure planning (hostnames, ranks, ports, commands,
addresses), the join report, and a real two-task run on the one-node Slurm cluster (head and
worker on one machine, distinct ports, fake GPUs declared to Ray) that checks every node joined
and ran a task. Across two nodes: test_multinode.py."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rollcli.launch.ray_bootstrap import (
    RayClusterError,
    head_command,
    node_address,
    node_ports,
    plan_from_env,
    slurm_hostnames,
    worker_command,
)
from rollcli.launch.ray_join import join_report, read_statuses, write_status
from rollcli.testing.slurm import cluster_answers

ENV3 = {
    "SLURM_JOB_NODELIST": "gpu[01-02],cpu7",
    "SLURM_JOB_NUM_NODES": "3",
    "SLURM_NTASKS": "3",
    "SLURM_JOB_ID": "4242",
    "SLURM_CPUS_PER_TASK": "64",
    "ROLLCLI_RAY_PORT": "30000",
}


def test_hostnames_are_one_per_node():
    assert slurm_hostnames("gpu[01-03],cpu7") == ["gpu01", "gpu02", "gpu03", "cpu7"]
    assert slurm_hostnames("node-a,node-b") == ["node-a", "node-b"]
    with pytest.raises(ValueError):
        slurm_hostnames("")


def test_three_nodes_give_a_head_and_two_workers():
    # verl's example quotes its array ("$nodes") and so starts no worker at all
    plans = [plan_from_env({**ENV3, "SLURM_NODEID": str(r)}, gpus_per_node=8) for r in range(3)]
    assert [p.is_head for p in plans] == [True, False, False]
    assert [p.host for p in plans] == ["gpu01", "gpu02", "cpu7"]
    assert {p.head_host for p in plans} == {"gpu01"}
    assert all(p.num_nodes == 3 and p.num_cpus == 64 and p.base_port == 30000 for p in plans)


def test_ports_are_distinct_across_ranks_on_one_machine():
    seen: set[int] = set()
    for rank in range(8):
        plan = plan_from_env({**ENV3, "SLURM_NODEID": "0"}, gpus_per_node=8)
        plan = type(plan)(**{**plan.__dict__, "rank": rank})
        ports = node_ports(plan)
        listening = [v for k, v in ports.items() if not k.endswith("worker-port")]
        lo, hi = ports["min-worker-port"], ports["max-worker-port"]
        assert plan.base_port not in listening
        mine = set(listening) | set(range(lo, hi + 1))
        assert not (mine & seen), f"rank {rank} reuses a port"
        seen |= mine


def test_head_and_worker_commands():
    head = plan_from_env({**ENV3, "SLURM_NODEID": "0"}, gpus_per_node=8)
    cmd = head_command(head, "10.0.0.1")
    assert cmd[:3] == ["ray", "start", "--head"] and "--port=30000" in cmd
    assert "--num-gpus=8" in cmd and "--num-cpus=64" in cmd and "--block" in cmd
    worker = plan_from_env({**ENV3, "SLURM_NODEID": "2"}, gpus_per_node=8)
    cmd = worker_command(worker, "10.0.0.3", "10.0.0.1")
    assert "--address=10.0.0.1:30000" in cmd and "--node-ip-address=10.0.0.3" in cmd
    assert "--head" not in cmd


def test_addresses_not_hostname_luck():
    one_host = plan_from_env(
        {
            **ENV3,
            "SLURM_JOB_NODELIST": "localhost",
            "SLURM_JOB_NUM_NODES": "1",
            "SLURM_NTASKS": "2",
        },
        gpus_per_node=0,
    )
    assert node_address(one_host, {}) == "127.0.0.1"  # every task on this host: loopback is fine
    assert node_address(one_host, {"ROLLCLI_RAY_NODE_IP": "10.9.8.7"}) == "10.9.8.7"
    assert node_address(one_host, {}, head_ip="127.0.0.1") == "127.0.0.1"  # the route to the head
    # a multi-host job whose head name resolves only to loopback (Debian's 127.0.1.1): refuse
    two = plan_from_env(
        {**ENV3, "SLURM_JOB_NODELIST": "localhost,gpu02", "SLURM_JOB_NUM_NODES": "2",
         "SLURM_NTASKS": "2", "SLURM_NODEID": "0"},
        gpus_per_node=0,
    )  # fmt: skip
    with pytest.raises(RayClusterError, match="ROLLCLI_RAY_NODE_IP") as error:
        node_address(two, {})
    assert error.value.rank == 0 and "resolves only to 127.0.0.1" in str(error.value)
    unknown = type(two)(**{**two.__dict__, "hostnames": ("no-such-host.invalid", "gpu02")})
    with pytest.raises(RayClusterError, match="cannot resolve its own hostname"):
        node_address(unknown, {})


def test_session_counts_requeues():
    plan = plan_from_env({**ENV3, "SLURM_NODEID": "1"}, gpus_per_node=8)
    again = plan_from_env(
        {**ENV3, "SLURM_NODEID": "1", "SLURM_RESTART_COUNT": "2"}, gpus_per_node=8
    )
    assert (plan.session, again.session) == ("4242.0", "4242.2")


def test_join_report_names_each_missing_node_and_why(tmp_path):
    hosts = ("gpu01", "gpu02", "gpu03", "cpu7")
    for rank, stage, info in (
        (1, "waiting-for-head", {"reason": "no TCP connection to 10.0.0.1:30000"}),
        (2, "joining", {"ip": "10.0.0.3", "head": "10.0.0.1:30000"}),
    ):
        write_status(tmp_path, rank=rank, host=hosts[rank], session="7.0", stage=stage, **info)
    (tmp_path / "worker2-7.0.log").write_text("raylet: connection refused\n")
    joined = {0: {"host": "gpu01", "ip": "10.0.0.1"}}
    statuses = read_statuses(tmp_path, "7.0", range(1, 4))
    report = join_report(
        hostnames=hosts,
        joined=joined,
        statuses=statuses,
        waited_s=61,
        ray_dir=tmp_path,
        session="7.0",
    )
    assert "incomplete after 61s: 1 of 4 nodes joined (gpu01 10.0.0.1)" in report
    assert "rank 1 (gpu02): waiting for the head for" in report and "10.0.0.1:30000" in report
    assert "rank 2 (gpu03, 10.0.0.3): its `ray start` has run for" in report
    assert "rank 3 (cpu7): no word from its task" in report
    assert str(tmp_path / "worker2-7.0.log") in report and "worker1-7.0.log" not in report


def test_inconsistent_environment_is_an_error():
    with pytest.raises(ValueError, match="names 3 hosts"):
        plan_from_env({**ENV3, "SLURM_JOB_NUM_NODES": "2"}, gpus_per_node=0)


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.skipif(not cluster_answers(), reason="no Slurm cluster answers `sinfo`")
def test_two_slurm_tasks_form_one_ray_cluster(tmp_path: Path):
    pytest.importorskip("ray")
    job_dir = tmp_path / "ray job 'x'"
    job_dir.mkdir()
    env = {
        **os.environ,
        "ROLLCLI_RAY_PORT": str(random.randrange(30000, 40000, 100)),
        "ROLLCLI_RAY_OBJECT_STORE_BYTES": str(80 * 1024 * 1024),
    }
    cmd = ["srun", "-n", "2", "-c", "1", "-t", "5", "--quit-on-interrupt"]
    cmd += [sys.executable, "-m", "rollcli.launch.ray_bootstrap", str(job_dir), "--probe"]
    cmd += ["--gpus-per-node", "1", "--join-timeout", "120"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    probe = json.loads((job_dir / "ray" / "probe.json").read_text())
    ports = sorted(n["port"] for n in probe["nodes"])
    assert len(ports) == 2 and ports[0] != ports[1]  # head and worker: two raylets
    assert sum(n["gpus"] for n in probe["nodes"]) == 2  # every declared GPU joined
    assert probe["ran_on"] == sorted(n["node_id"] for n in probe["nodes"])  # a task on each
    assert list((job_dir / "ray").glob("done-*")), "the head did not mark the end for workers"
    assert oct((job_dir / "ray" / "auth_token").stat().st_mode & 0o777) == "0o600"


def test_stopping_the_jobs_ray_clears_its_address_file(tmp_path, monkeypatch):
    """`ray start` records its cluster in Ray's address file and only `ray stop` removes it; a
    later plain `ray.init()` on the node would wait for the dead cluster for ever. Stopping the
    job's Ray process clears the file when it names this job's head, and only then."""
    from rollcli.launch import ray_bootstrap as rb

    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "raytmp"))
    address_file = rb.ray_address_file()
    assert address_file == tmp_path / "raytmp" / "ray" / "ray_current_cluster"
    # a stand-in for `ray start --block`: records the address, then blocks until stopped
    fake = f"mkdir -p {address_file.parent} && printf 10.0.0.1:20001 > {address_file} && sleep 60"
    with rb._ray_process(["sh", "-c", fake], tmp_path / "log", os.environ, "10.0.0.1:20001") as p:
        # generous: the loop ends as soon as the file is written (the shell creates it first,
        # then writes, so wait for its content); a loaded CI machine may be slow to start sh
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
            address_file.exists() and address_file.read_text() == "10.0.0.1:20001"
        ):
            time.sleep(0.05)
        assert address_file.read_text() == "10.0.0.1:20001" and p.poll() is None
    assert not address_file.exists()
    # another job's (or the user's own) cluster on this node is left alone
    address_file.write_text("10.0.0.9:6379")
    assert rb.clear_ray_address_file("10.0.0.1:20001") is False
    assert address_file.read_text() == "10.0.0.9:6379"


def test_address_file_is_where_ray_looks(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    from ray._common.utils import get_ray_address_file

    from rollcli.launch.ray_bootstrap import ray_address_file

    for env in ({"RAY_TMPDIR": str(tmp_path / "a")}, {"TMPDIR": str(tmp_path / "b")}, {}):
        for var in ("RAY_TMPDIR", "TMPDIR"):
            monkeypatch.delenv(var, raising=False)
        for var, value in env.items():
            monkeypatch.setenv(var, value)
        assert ray_address_file() == Path(get_ray_address_file(None))


def _worker_with_fake_ray(tmp_path: Path, monkeypatch, script: str) -> tuple[Any, Path]:
    """Rank 1 of a two-node job whose head answers, with a shell ``script`` standing in for the
    `ray` binary (``$n``: the call number, 1, 2, ...; ``{done}``: the head's done file)."""
    from rollcli.launch import ray_bootstrap as rb

    env = {**ENV3, "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_NUM_NODES": "2"}
    env.update(SLURM_NTASKS="2", SLURM_NODEID="1", ROLLCLI_RAY_NODE_IP="127.0.0.1")
    plan = plan_from_env(env, gpus_per_node=0)
    ray_dir = tmp_path / "job" / "ray"
    ray_dir.mkdir(parents=True)
    (ray_dir / "auth_token").write_text("t" * 64)
    (ray_dir / f"head-{plan.session}.json").write_text(
        json.dumps({"host": "n1", "ip": "127.0.0.1", "port": plan.base_port})
    )
    monkeypatch.setattr(rb, "_reachable", lambda host, port, timeout=2.0: True)
    calls, fake = tmp_path / "calls", tmp_path / "ray"
    body = script.replace("{done}", str(ray_dir / f"done-{plan.session}"))
    fake.write_text(f"#!/bin/sh\necho x >> {calls}\nn=$(wc -l < {calls})\n{body}\n")
    fake.chmod(0o755)
    monkeypatch.setattr(rb, "_ray_binary", lambda: str(fake))
    return (lambda: rb._run_worker(plan, tmp_path / "job", env, timeout_s=60)), calls


def test_a_worker_whose_ray_start_timed_out_registering_starts_again(tmp_path, monkeypatch):
    """Ray gives a starting node a fixed 30 s to register; on a loaded node `ray start` exits
    with "timed out during startup" (seen in CI, 2026-12-07). The worker starts it again and
    joins; the head's done file then ends it as usual."""
    slow = 'echo "Exception: The current node timed out during startup. This could happen..."'
    script = f'if [ "$n" -lt 3 ]; then {slow}; exit 1; fi; touch {{done}}; sleep 30'
    run, calls = _worker_with_fake_ray(tmp_path, monkeypatch, script)
    assert run() == "worker"
    assert len(calls.read_text().splitlines()) == 3  # two timed-out starts, then one that joined
    (status,) = read_statuses(tmp_path / "job" / "ray", "4242.0", [1]).values()
    assert status["stage"] == "joining" and status["retry"] == 2


def test_a_worker_fails_at_once_on_another_error_and_after_three_slow_starts(tmp_path, monkeypatch):
    run, calls = _worker_with_fake_ray(tmp_path, monkeypatch, 'echo "ValueError: bad"; exit 1')
    with pytest.raises(RayClusterError, match=r"exited with code 1 while the head still runs;"):
        run()
    assert len(calls.read_text().splitlines()) == 1
    slow = 'echo "Exception: The current node timed out during startup."; exit 1'
    run, calls = _worker_with_fake_ray(tmp_path / "again", monkeypatch, slow)
    with pytest.raises(RayClusterError, match=r"\(start 3 of 3\)(.|\n)*timed out during startup"):
        run()
    assert len(calls.read_text().splitlines()) == 3
