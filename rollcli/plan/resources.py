"""What one planned job asks of its executor: nodes, GPUs, CPUs, memory, time, Slurm placement.

The plan computes a :class:`Resources` per job from the spec's ``launch`` section; executors
(``rollcli.launch``) read it. It lives with the plan, so the plan needs nothing of the executors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Resources"]


@dataclass(frozen=True)
class Resources:
    """What one job asks of its executor (Slurm fields are ignored by the local executor)."""

    nodes: int = 1
    gpus_per_node: int = 0
    cpus_per_task: int = 1
    mem: str | None = None  # Slurm syntax: "64G"
    time: str | None = None  # Slurm syntax: "48:00:00"
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    sbatch_extra: tuple[str, ...] = ()
    requeue: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "cpus_per_task": self.cpus_per_task,
            "mem": self.mem,
            "time": self.time,
            "partition": self.partition,
            "account": self.account,
            "qos": self.qos,
            "constraint": self.constraint,
            "sbatch_extra": list(self.sbatch_extra),
            "requeue": self.requeue,
        }
