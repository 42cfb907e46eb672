"""What each task of a multi-node Slurm job plays in its Ray cluster: rank, hosts, ports, address.

Pure planning for :mod:`rollcli.launch.ray_bootstrap` (no process is started here).

Hostnames come from ``SLURM_JOB_NODELIST`` expanded into a list (submitit's parser), one host
per entry. verl's ``examples/slurm/ray_on_slurm.slurm`` builds its array as
``nodes_array=("$nodes")``: the quotes make one element holding every hostname, so the head is
that whole string and the worker loop ``${nodes_array[$i]}`` finds nothing — no workers. Here
each task reads its own node from the list, and :func:`slurm_hostnames` has a test for it.

Ports: the head's GCS port is ``ROLLCLI_RAY_PORT`` (rollcli/templates/sbatch/multinode.sh derives it
from the job id) and each node's other Ray ports are offset by its rank, so a head and a worker
can share one machine (the one-node test cluster runs exactly that); a node's rank can be read
back from its node-manager port (:func:`manager_port`).

Addresses, not hostname luck (:func:`node_address`): the head uses ``ROLLCLI_RAY_NODE_IP``, else
its hostname's first non-loopback address — Debian maps a machine's own name to 127.0.1.1, which
no other node can reach — and loopback only when every task runs on one host; a worker uses the
local address the kernel routes to the head's address.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "DEFAULT_BASE_PORT",
    "RayClusterError",
    "RayNodePlan",
    "slurm_hostnames",
    "plan_from_env",
    "manager_port",
    "node_ports",
    "head_command",
    "worker_command",
    "node_address",
]

DEFAULT_BASE_PORT = 20000


class RayClusterError(RuntimeError):
    """The job's Ray cluster could not be formed; the message names the node and the cause."""

    def __init__(self, message: str, *, rank: int) -> None:
        super().__init__(message)
        self.rank = rank


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
    restart: int = 0  # SLURM_RESTART_COUNT: how often the job was requeued

    @property
    def session(self) -> str:
        """Names this attempt's files in ``ray/`` (a requeued job keeps its Slurm id)."""
        return f"{self.job_id}.{self.restart}"

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
        restart=int(env.get("SLURM_RESTART_COUNT") or 0),
    )


def manager_port(base_port: int, rank: int) -> int:
    """The node-manager port of ``rank`` (10 apart per rank: the rank can be read back)."""
    return base_port + 10 + 10 * rank


def node_ports(plan: RayNodePlan) -> dict[str, int]:
    """Every port a node's Ray processes listen on, distinct per rank (head: GCS on the base)."""
    off = manager_port(plan.base_port, plan.rank)
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


def _route_source(ip: str) -> str:
    """The local address the kernel would send from to reach ``ip`` (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((ip, 9))
        return sock.getsockname()[0]


def node_address(plan: RayNodePlan, env: Mapping[str, str], head_ip: str | None = None) -> str:
    """This node's address for Ray (see the module docstring); ``head_ip`` for workers."""
    if env.get("ROLLCLI_RAY_NODE_IP"):
        return env["ROLLCLI_RAY_NODE_IP"]
    if head_ip is not None:
        return _route_source(head_ip)
    try:
        infos = socket.getaddrinfo(plan.host, None, socket.AF_INET, socket.SOCK_STREAM)
    except OSError as error:
        raise RayClusterError(
            f"rank {plan.rank} ({plan.host}): cannot resolve its own hostname ({error}); "
            "set ROLLCLI_RAY_NODE_IP to this node's address",
            rank=plan.rank,
        ) from error
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    routable = [a for a in addresses if not a.startswith("127.")]
    if routable:
        return routable[0]
    if len(set(plan.hostnames)) > 1:
        raise RayClusterError(
            f"rank {plan.rank} ({plan.host}): its hostname resolves only to {addresses[0]}, "
            "which the other nodes cannot reach; set ROLLCLI_RAY_NODE_IP to this node's address",
            rank=plan.rank,
        )
    return addresses[0]  # every task on this one host: loopback is right
