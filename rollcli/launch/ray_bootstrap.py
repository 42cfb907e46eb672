"""A Ray cluster across the nodes of one Slurm job, for verl jobs with ``nodes > 1``.

Slurm starts one task per node (``--ntasks-per-node=1``); every task runs
:func:`run_on_slurm`. The task with ``SLURM_NODEID == 0`` starts the Ray head (``ray start
--head --block`` as a child in its own process group), waits until every node — and every GPU —
has joined, runs the trainer with ``RAY_ADDRESS`` pointing at the head, and tears Ray down when
the trainer returns, raises, or is stopped by pre-emption. Every other task starts a Ray worker
pointed at the head and keeps it alive until the head writes its ``done`` file, the head stops
answering, or the worker dies; then it stops its own Ray processes (and only those: never
``ray stop``, which would kill every Ray on the node).

Hostnames come from ``SLURM_JOB_NODELIST`` expanded into a list (submitit's parser), one host
per entry. verl's ``examples/slurm/ray_on_slurm.slurm`` builds its array as
``nodes_array=("$nodes")``: the quotes make one element holding every hostname, so the head is
that whole string and the worker loop ``${nodes_array[$i]}`` finds nothing — no workers. Here
each task reads its own node from the list, and :func:`slurm_hostnames` has a test for it.

Ports: the head's GCS port is ``ROLLCLI_RAY_PORT`` (rollcli/templates/sbatch/multinode.sh derives it
from the job id) and each node's other Ray ports are offset by its rank, so a head and a worker
can share one machine (the local test cluster runs exactly that). Token authentication: the
head writes a fresh token to ``<job>/ray/auth_token`` (mode 0600) and every process of the job
uses it (``RAY_AUTH_MODE=token``), so jobs of different users sharing nodes cannot connect to
each other's clusters.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcli.store.atomic import atomic_write_text

__all__ = [
    "RayNodePlan",
    "slurm_hostnames",
    "plan_from_env",
    "node_ports",
    "head_command",
    "worker_command",
    "run_on_slurm",
]

DEFAULT_BASE_PORT = 20000
JOIN_TIMEOUT_S = 600.0
HEAD_LOST_S = 60.0  # a worker gives up after the head has not answered this long


@dataclass(frozen=True)
class RayNodePlan:
    """What one Slurm task needs to know to play its part in the job's Ray cluster."""

    rank: int  # SLURM_NODEID: 0 runs the head and the trainer
    hostnames: tuple[str, ...]
    base_port: int
    num_cpus: int | None
    num_gpus: int
    job_id: str
    object_store_bytes: int | None = None

    @property
    def num_nodes(self) -> int:
        return len(self.hostnames)

    @property
    def is_head(self) -> bool:
        return self.rank == 0

    @property
    def head_host(self) -> str:
        return self.hostnames[0]

    @property
    def host(self) -> str:
        return self.hostnames[self.rank]


def slurm_hostnames(nodelist: str) -> list[str]:
    """``"gpu[01-03],cpu7"`` -> ``["gpu01", "gpu02", "gpu03", "cpu7"]`` (one host per entry)."""
    from submitit.slurm.slurm import _parse_node_list

    hosts = [h for h in _parse_node_list(nodelist.strip()) if h]
    if not hosts:
        raise ValueError(f"empty Slurm node list: '{nodelist}'")
    return hosts


def plan_from_env(env: Mapping[str, str], *, gpus_per_node: int) -> RayNodePlan:
    """Read the task's place in the job from Slurm's environment variables."""
    hosts = slurm_hostnames(env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or "")
    nnodes = int(env.get("SLURM_JOB_NUM_NODES") or len(hosts))
    if nnodes != len(hosts):
        raise ValueError(f"SLURM_JOB_NUM_NODES={nnodes} but the node list names {len(hosts)} hosts")
    if int(env.get("SLURM_NTASKS") or nnodes) != nnodes:
        # two tasks on one node sharing a node list entry (the single-machine test): rank by task
        hosts = [hosts[0]] * int(env["SLURM_NTASKS"]) if len(hosts) == 1 else hosts
        rank = int(env.get("SLURM_PROCID") or 0)
    else:
        rank = int(env.get("SLURM_NODEID") or 0)
    job_id = env.get("SLURM_JOB_ID") or "0"
    base = int(env.get("ROLLCLI_RAY_PORT") or DEFAULT_BASE_PORT + int(job_id) % 20000)
    cpus = env.get("SLURM_CPUS_PER_TASK")
    store = env.get("ROLLCLI_RAY_OBJECT_STORE_BYTES")
    return RayNodePlan(
        rank=rank,
        hostnames=tuple(hosts),
        base_port=base,
        num_cpus=int(cpus) if cpus else None,
        num_gpus=gpus_per_node,
        job_id=job_id,
        object_store_bytes=int(store) if store else None,
    )


def node_ports(plan: RayNodePlan) -> dict[str, int]:
    """Every port a node's Ray processes listen on, distinct per rank (head: GCS on the base)."""
    off = plan.base_port + 10 + 10 * plan.rank
    worker_lo = plan.base_port + 1000 + 200 * plan.rank
    ports = {
        "node-manager-port": off,
        "object-manager-port": off + 1,
        "ray-client-server-port": off + 2,
        "dashboard-agent-listen-port": off + 3,
        "dashboard-agent-grpc-port": off + 4,
        "metrics-export-port": off + 5,
        "runtime-env-agent-port": off + 6,
        "min-worker-port": worker_lo,
        "max-worker-port": worker_lo + 199,
    }
    if max(ports.values()) > 65535:
        raise ValueError(f"Ray ports above 65535 (base {plan.base_port}, rank {plan.rank})")
    return ports


def _ray_binary() -> str:
    beside = Path(sys.executable).parent / "ray"
    return str(beside) if beside.exists() else shutil.which("ray") or "ray"


def _common_args(plan: RayNodePlan, node_ip: str) -> list[str]:
    args = [f"--node-ip-address={node_ip}", f"--num-gpus={plan.num_gpus}"]
    if plan.num_cpus is not None:
        args.append(f"--num-cpus={plan.num_cpus}")
    if plan.object_store_bytes is not None:
        args.append(f"--object-store-memory={plan.object_store_bytes}")
    args += [f"--{k}={v}" for k, v in node_ports(plan).items()]
    return [*args, "--disable-usage-stats", "--block"]


def head_command(plan: RayNodePlan, node_ip: str, ray: str = "ray") -> list[str]:
    return [ray, "start", "--head", f"--port={plan.base_port}", "--include-dashboard=false"] + (
        _common_args(plan, node_ip)
    )


def worker_command(plan: RayNodePlan, node_ip: str, head_ip: str, ray: str = "ray") -> list[str]:
    return [ray, "start", f"--address={head_ip}:{plan.base_port}"] + _common_args(plan, node_ip)


def _resolve(host: str) -> str:
    return socket.gethostbyname(host)


def _reachable(host: str, port: int, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def _ray_process(cmd: list[str], log: Path, env: Mapping[str, str]) -> Iterator[subprocess.Popen]:
    """``ray start --block`` in its own process group; the whole group is stopped on exit."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=dict(env), start_new_session=True
        )
    try:
        yield proc
    finally:
        _stop_group(proc)


def _stop_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(wait)
            # children of the group may outlive the leader for a moment
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            return
        except subprocess.TimeoutExpired:
            continue


def _wait_for_cluster(
    address: str, plan: RayNodePlan, timeout_s: float, head: subprocess.Popen
) -> dict[str, Any]:
    """Block until ``plan.num_nodes`` nodes and all their GPUs are alive in the cluster."""
    import ray

    want_gpus = plan.num_nodes * plan.num_gpus
    deadline = time.monotonic() + timeout_s
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        while True:
            nodes = [n for n in ray.nodes() if n.get("Alive")]
            gpus = sum(float(n.get("Resources", {}).get("GPU", 0)) for n in nodes)
            if len(nodes) >= plan.num_nodes and gpus >= want_gpus:
                return {"nodes": len(nodes), "gpus": gpus}
            if head.poll() is not None:
                raise RuntimeError(f"the Ray head exited with code {head.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Ray cluster incomplete after {timeout_s:.0f}s: {len(nodes)}/{plan.num_nodes} "
                    f"nodes, {gpus:.0f}/{want_gpus} GPUs"
                )
            time.sleep(1.0)
    finally:
        ray.shutdown()


def _ray_env(job_dir: Path, *, create: bool, timeout_s: float) -> dict[str, str]:
    """The environment of every Ray process of the job, with the job's auth token."""
    path = job_dir / "ray" / "auth_token"
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, secrets.token_hex(32))
        os.chmod(path, 0o600)
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path}: the head did not write the Ray token")
        time.sleep(0.5)
    return {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": path.read_text().strip()}


def run_on_slurm(
    job_dir: Path,
    run: Callable[[], str],
    *,
    gpus_per_node: int,
    env: Mapping[str, str] | None = None,
    join_timeout_s: float = JOIN_TIMEOUT_S,
) -> str:
    """This task's part of the job's Ray cluster; the head returns ``run()``'s result."""
    job_dir = Path(job_dir)
    plan = plan_from_env(os.environ if env is None else env, gpus_per_node=gpus_per_node)
    ray_dir = job_dir / "ray"
    done = ray_dir / f"done-{plan.job_id}"
    node_ip, head_ip = _resolve(plan.host), _resolve(plan.head_host)
    address = f"{head_ip}:{plan.base_port}"
    if plan.is_head:
        done.unlink(missing_ok=True)
        ray_env = _ray_env(job_dir, create=True, timeout_s=0)
        cmd = head_command(plan, node_ip, _ray_binary())
        try:
            with _ray_process(cmd, ray_dir / f"head-{plan.job_id}.log", ray_env) as head:
                os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=ray_env["RAY_AUTH_TOKEN"])
                joined = _wait_for_cluster(address, plan, join_timeout_s, head)
                atomic_write_text(
                    ray_dir / f"cluster-{plan.job_id}.json", json.dumps(joined) + "\n"
                )
                os.environ["RAY_ADDRESS"] = address
                return run()
        finally:
            atomic_write_text(done, "done\n")
    ray_env = _ray_env(job_dir, create=False, timeout_s=join_timeout_s)
    deadline = time.monotonic() + join_timeout_s
    while not _reachable(head_ip, plan.base_port):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the Ray head at {address} did not come up")
        time.sleep(1.0)
    cmd = worker_command(plan, node_ip, head_ip, _ray_binary())
    with _ray_process(cmd, ray_dir / f"worker{plan.rank}-{plan.job_id}.log", ray_env) as worker:
        lost_since: float | None = None
        while not done.exists() and worker.poll() is None:
            if _reachable(head_ip, plan.base_port):
                lost_since = None
            elif lost_since is None:
                lost_since = time.monotonic()
            elif time.monotonic() - lost_since > HEAD_LOST_S:
                break
            time.sleep(1.0)
    return "worker"


def _probe() -> str:
    """The trainer stand-in of the ``--probe`` mode: one task pinned to each node of the cluster."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ray.init(logging_level="ERROR")
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]

        @ray.remote(num_cpus=0)
        def where() -> dict[str, Any]:
            ctx = ray.get_runtime_context()
            return {"node_id": ctx.get_node_id(), "pid": os.getpid()}

        refs = [
            where.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
            ).remote()
            for n in nodes
        ]
        ran = ray.get(refs, timeout=120)
        result = {
            "nodes": [
                {
                    "node_id": n["NodeID"],
                    "port": n["NodeManagerPort"],
                    "gpus": n["Resources"].get("GPU", 0),
                }
                for n in nodes
            ],
            "ran_on": sorted(r["node_id"] for r in ran),
            "address": os.environ.get("RAY_ADDRESS"),
        }
    finally:
        ray.shutdown()
    return json.dumps(result)


def main(argv: list[str] | None = None) -> int:
    """``python -m rollcli.launch.ray_bootstrap JOB_DIR --probe [--gpus-per-node N]``: start the
    job's Ray cluster from every task of ``srun`` and run a probe on it (writes
    ``JOB_DIR/ray/probe.json``); used to check a cluster's Ray setup without a trainer."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m rollcli.launch.ray_bootstrap")
    parser.add_argument("job_dir", type=Path)
    parser.add_argument("--probe", action="store_true", required=True)
    parser.add_argument("--gpus-per-node", type=int, default=0)
    parser.add_argument("--join-timeout", type=float, default=JOIN_TIMEOUT_S)
    args = parser.parse_args(argv)
    result = run_on_slurm(
        args.job_dir, _probe, gpus_per_node=args.gpus_per_node, join_timeout_s=args.join_timeout
    )
    if result != "worker":
        atomic_write_text(args.job_dir / "ray" / "probe.json", result + "\n")
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
