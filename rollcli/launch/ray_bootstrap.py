"""A Ray cluster across the nodes of one Slurm job, for verl jobs with ``nodes > 1``.

Slurm starts one task per node (``--ntasks-per-node=1``); every task runs
:func:`run_on_slurm`, and :mod:`rollcli.launch.ray_plan` says what it plays. The task with
``SLURM_NODEID == 0`` starts the Ray head (``ray start --head --block`` as a child in its own
process group), writes its address to ``<job>/ray/head-<session>.json``, waits until every node
— and every GPU — has joined (recording who did in ``ray/cluster-<session>.json``: each node's
host, address and resources), runs the trainer with ``RAY_ADDRESS`` pointing at the head, and
tears Ray down when the trainer returns, raises, or is stopped by pre-emption. Every other task
reads the head's address from that file (not from its hostname), starts a Ray worker pointed at
it and keeps it alive until the head writes its ``done`` file, the head stops answering, or the
worker dies; then it stops its own Ray processes (and only those: never ``ray stop``, which
would kill every Ray on the node).

A node that does not join within ``ROLLCLI_RAY_JOIN_TIMEOUT`` seconds (default 600) fails the
job with a :class:`RayClusterError` that names it and says what it was last doing
(:mod:`rollcli.launch.ray_join`), instead of a hang; a worker whose ``ray start`` exits fails it
at once, unless Ray's fixed 30 s for registering a starting node ran out (a loaded node): that
``ray start`` is started again, twice at most. The session is the job id plus Slurm's restart
count, so a requeued job never reads the previous attempt's files. Token authentication: the
head writes a fresh token to ``<job>/ray/auth_token`` (mode 0600) and every process of the job uses it
(``RAY_AUTH_MODE=token``), so jobs of different users sharing nodes cannot connect to each
other's clusters.
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
from pathlib import Path
from typing import Any

from rollcli.errors import RAY_SLOW_START
from rollcli.launch.ray_join import join_report, log_tail, read_statuses, write_status
from rollcli.launch.ray_plan import (
    RayClusterError,
    RayNodePlan,
    head_command,
    manager_port,
    node_address,
    node_ports,
    plan_from_env,
    slurm_hostnames,
    worker_command,
)
from rollcli.store.atomic import atomic_write_json, atomic_write_text

__all__ = [
    "RayClusterError",
    "RayNodePlan",
    "slurm_hostnames",
    "plan_from_env",
    "node_ports",
    "head_command",
    "worker_command",
    "node_address",
    "run_on_slurm",
    "ray_address_file",
    "clear_ray_address_file",
]

JOIN_TIMEOUT_S = 600.0  # ROLLCLI_RAY_JOIN_TIMEOUT overrides it
HEAD_LOST_S = 60.0  # a worker gives up after the head has not answered this long
LOG_TAIL_LINES = 15
# A worker whose `ray start` exits with Ray's slow-start message (RAY_SLOW_START) starts again
# (its whole process group stopped first), at most START_RETRIES times.
START_RETRIES = 2


def _ray_binary() -> str:
    beside = Path(sys.executable).parent / "ray"
    return str(beside) if beside.exists() else shutil.which("ray") or "ray"


def _reachable(host: str, port: int, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def ray_address_file(env: Mapping[str, str] | None = None) -> Path:
    """Where ``ray start`` records the cluster a plain ``ray.init()`` on this node joins
    (Ray's ``get_ray_address_file``: ``$RAY_TMPDIR``, else ``$TMPDIR``, else /tmp, + ray/)."""
    env = os.environ if env is None else env
    temp = env.get("RAY_TMPDIR") or env.get("TMPDIR") or "/tmp"
    return Path(temp) / "ray" / "ray_current_cluster"


def clear_ray_address_file(address: str, env: Mapping[str, str] | None = None) -> bool:
    """Remove this node's Ray address file when it names ``address`` (this job's cluster, now
    stopped); another job's entry is left alone. Ray removes it only in ``ray stop``, and a
    later ``ray.init()`` without an address would wait for the dead cluster for ever."""
    path = ray_address_file(env)
    try:
        if path.read_text().strip() != address:
            return False
        path.unlink()
    except OSError:
        return False
    return True


@contextlib.contextmanager
def _ray_process(
    cmd: list[str], log: Path, env: Mapping[str, str], address: str
) -> Iterator[subprocess.Popen]:
    """``ray start --block`` in its own process group; the whole group is stopped on exit and
    Ray's address file cleared when it still names ``address`` (the job's head)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=dict(env), start_new_session=True
        )
    try:
        yield proc
    finally:
        _stop_group(proc)
        clear_ray_address_file(address, env)


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


def _joined_nodes(nodes: list[dict[str, Any]], plan: RayNodePlan) -> dict[int, dict[str, Any]]:
    """Alive Ray nodes by rank (a node's rank follows from its node-manager port)."""
    out: dict[int, dict[str, Any]] = {}
    for node in nodes:
        rank, rest = divmod(
            int(node.get("NodeManagerPort", -1)) - manager_port(plan.base_port, 0), 10
        )
        if rest == 0 and 0 <= rank < plan.num_nodes:
            out[rank] = {
                "rank": rank,
                "host": node.get("NodeManagerHostname"),
                "ip": node.get("NodeManagerAddress"),
                "node_id": node.get("NodeID"),
                "resources": node.get("Resources", {}),
            }
    return out


def _wait_for_cluster(
    address: str, plan: RayNodePlan, timeout_s: float, head: subprocess.Popen, ray_dir: Path
) -> dict[str, Any]:
    """Block until every node of ``plan`` and all its GPUs are alive in the cluster; raise a
    :class:`RayClusterError` naming the missing nodes once a worker failed or time is up."""
    import ray

    want_gpus = plan.num_nodes * plan.num_gpus
    start = time.monotonic()
    head_log = ray_dir / f"head-{plan.session}.log"
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    except Exception as error:  # noqa: BLE001 - any failure to reach our own head is fatal
        raise RayClusterError(
            f"rank 0 ({plan.host}): cannot connect to its own Ray head at {address}: {error}\n"
            + log_tail(head_log, LOG_TAIL_LINES),
            rank=0,
        ) from error
    try:
        while True:
            joined = _joined_nodes([n for n in ray.nodes() if n.get("Alive")], plan)
            gpus = sum(float(n["resources"].get("GPU", 0)) for n in joined.values())
            if len(joined) == plan.num_nodes and gpus >= want_gpus:
                return {
                    "address": address,
                    "session": plan.session,
                    "num_nodes": len(joined),
                    "gpus": gpus,
                    "nodes": [joined[r] for r in sorted(joined)],
                    "resources": ray.cluster_resources(),
                }
            if head.poll() is not None:
                raise RayClusterError(
                    f"rank 0 ({plan.host}): the Ray head exited with code {head.returncode}:\n"
                    + log_tail(head_log, LOG_TAIL_LINES),
                    rank=0,
                )
            statuses = read_statuses(ray_dir, plan.session, range(1, plan.num_nodes))
            failed = [s for r, s in statuses.items() if s.get("stage") == "failed"]
            waited = time.monotonic() - start
            if failed or waited > timeout_s:
                raise RayClusterError(
                    join_report(
                        hostnames=plan.hostnames,
                        joined=joined,
                        statuses=statuses,
                        waited_s=waited,
                        ray_dir=ray_dir,
                        session=plan.session,
                    ),
                    rank=0,
                )
            time.sleep(1.0)
    finally:
        ray.shutdown()


def _ray_env(job_dir: Path, *, create: bool) -> dict[str, str]:
    """The environment of every Ray process of the job, with the job's auth token."""
    path = job_dir / "ray" / "auth_token"
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, secrets.token_hex(32))
        os.chmod(path, 0o600)
    return {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": path.read_text().strip()}


def _status(plan: RayNodePlan, ray_dir: Path, stage: str, **info: Any) -> None:
    write_status(ray_dir, rank=plan.rank, host=plan.host, session=plan.session, stage=stage, **info)


def _fail(plan: RayNodePlan, ray_dir: Path, reason: str) -> RayClusterError:
    _status(plan, ray_dir, "failed", reason=reason)
    return RayClusterError(reason, rank=plan.rank)


def _run_head(
    plan: RayNodePlan,
    job_dir: Path,
    run: Callable[[], str],
    env: Mapping[str, str],
    timeout_s: float,
) -> str:
    ray_dir = job_dir / "ray"
    done = ray_dir / f"done-{plan.session}"
    try:
        head_ip = node_address(plan, env)
        address = f"{head_ip}:{plan.base_port}"
        ray_env = _ray_env(job_dir, create=True)
        _status(plan, ray_dir, "head", ip=head_ip)
        cmd = head_command(plan, head_ip, _ray_binary())
        with _ray_process(cmd, ray_dir / f"head-{plan.session}.log", ray_env, address) as head:
            try:
                info = {"host": plan.host, "ip": head_ip, "port": plan.base_port}
                atomic_write_json(ray_dir / f"head-{plan.session}.json", info)
                os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=ray_env["RAY_AUTH_TOKEN"])
                joined = _wait_for_cluster(address, plan, timeout_s, head, ray_dir)
                atomic_write_json(ray_dir / f"cluster-{plan.session}.json", joined)
                os.environ["RAY_ADDRESS"] = address
                return run()
            finally:  # before the head's Ray stops, so that workers see a clean end
                atomic_write_text(done, "done\n")
    finally:
        atomic_write_text(done, "done\n")


def _wait_for_head(plan: RayNodePlan, ray_dir: Path, deadline: float) -> dict[str, Any] | None:
    """The head's address record once its GCS port answers; None when the head already ended."""
    head_file = ray_dir / f"head-{plan.session}.json"
    done = ray_dir / f"done-{plan.session}"
    while not head_file.exists():
        if done.exists():
            return None
        if time.monotonic() > deadline:
            raise _fail(
                plan,
                ray_dir,
                f"rank {plan.rank} ({plan.host}): the head (rank 0, {plan.head_host}) wrote no "
                f"address to {head_file} in time: did its task start?",
            )
        time.sleep(0.5)
    head = json.loads(head_file.read_text("utf-8"))
    address = f"{head['ip']}:{head['port']}"
    _status(
        plan,
        ray_dir,
        "waiting-for-head",
        reason=f"no TCP connection to the head's Ray port {address} ({plan.head_host}) yet; "
        "a firewall between the nodes?",
    )
    while not _reachable(head["ip"], int(head["port"])):
        if done.exists():
            return None
        if time.monotonic() > deadline:
            top = max(node_ports(plan).values())
            raise _fail(
                plan,
                ray_dir,
                f"rank {plan.rank} ({plan.host}): the Ray head at {address} "
                f"({plan.head_host}) never answered: is TCP open from {plan.host} to "
                f"{plan.head_host} on Ray's ports {plan.base_port}-{top}?",
            )
        time.sleep(1.0)
    return head


def _run_worker(plan: RayNodePlan, job_dir: Path, env: Mapping[str, str], timeout_s: float) -> str:
    ray_dir = job_dir / "ray"
    done = ray_dir / f"done-{plan.session}"
    _status(plan, ray_dir, "waiting-for-head")
    head = _wait_for_head(plan, ray_dir, time.monotonic() + timeout_s)
    if head is None:
        return "worker"
    head_ip, port = str(head["ip"]), int(head["port"])
    node_ip = node_address(plan, env, head_ip=head_ip)
    ray_env = _ray_env(job_dir, create=False)
    log = ray_dir / f"worker{plan.rank}-{plan.session}.log"
    _status(plan, ray_dir, "joining", ip=node_ip, head=f"{head_ip}:{port}")
    cmd = worker_command(plan, node_ip, head_ip, _ray_binary())
    for attempt in range(1 + START_RETRIES):
        with _ray_process(cmd, log, ray_env, f"{head_ip}:{port}") as worker:
            lost_since: float | None = None
            while not done.exists():
                if worker.poll() is not None:
                    time.sleep(3.0)  # the head may be ending the job right now
                    if done.exists() or not _reachable(head_ip, port):
                        return "worker"
                    tail = log_tail(log, LOG_TAIL_LINES)
                    if attempt < START_RETRIES and RAY_SLOW_START in tail:
                        _status(plan, ray_dir, "joining", ip=node_ip, retry=attempt + 1)
                        break  # the group is stopped on leaving the block; start again
                    raise _fail(
                        plan,
                        ray_dir,
                        f"rank {plan.rank} ({plan.host}): its `ray start` exited with code "
                        f"{worker.returncode} while the head still runs"
                        + (f" (start {attempt + 1} of {1 + START_RETRIES})" if attempt else "")
                        + f"; the end of {log}:\n"
                        + tail,
                    )
                if _reachable(head_ip, port):
                    lost_since = None
                elif lost_since is None:
                    lost_since = time.monotonic()
                elif time.monotonic() - lost_since > HEAD_LOST_S:
                    return "worker"
                time.sleep(1.0)
            else:
                return "worker"
    return "worker"


def run_on_slurm(
    job_dir: Path,
    run: Callable[[], str],
    *,
    gpus_per_node: int,
    env: Mapping[str, str] | None = None,
    join_timeout_s: float | None = None,
) -> str:
    """This task's part of the job's Ray cluster; the head returns ``run()``'s result.

    ``join_timeout_s`` (default: ``ROLLCLI_RAY_JOIN_TIMEOUT``, else 600) bounds how long the
    head waits for every node and a worker for the head; past it a :class:`RayClusterError`
    names what is missing."""
    env = os.environ if env is None else env
    plan = plan_from_env(env, gpus_per_node=gpus_per_node)
    if join_timeout_s is None:
        join_timeout_s = float(env.get("ROLLCLI_RAY_JOIN_TIMEOUT") or JOIN_TIMEOUT_S)
    job_dir = Path(job_dir)
    if plan.is_head:
        return _run_head(plan, job_dir, run, env, join_timeout_s)
    return _run_worker(plan, job_dir, env, join_timeout_s)


def _probe() -> str:
    """The trainer stand-in of the ``--probe`` mode: one task pinned to each node of the cluster."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ray.init(address=os.environ["RAY_ADDRESS"], logging_level="ERROR")
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
                    "host": n["NodeManagerHostname"],
                    "ip": n["NodeManagerAddress"],
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
    parser.add_argument("--join-timeout", type=float, default=None)
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
