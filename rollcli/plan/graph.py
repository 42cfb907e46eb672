"""Spec -> job graph: a train job per allocator x seed (x base seed, when the spec lists
``base_seeds``: the job's backend section then carries that ``base_seed``), eval jobs where the
backend needs them, and one report job; each job's id is a short content hash of its resolved config.

The id hashes the canonical JSON (sorted keys, no spaces) of the job config without
``job.id``, ``experiment``, ``tracking``, ``checkpoint`` and ``launch`` (none of which changes
what the job computes), so
the same job gets the same id on every machine and every run, and a rerun of a spec finds its
finished jobs. Configs share their common sections by reference.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rollcli.plan.budget import tokens_per_rollout
from rollcli.plan.resources import Resources

__all__ = ["PlannedJob", "Plan", "build_plan", "job_id", "canonical_json", "HASH_EXCLUDED"]

ID_LENGTH = 10
# none of these changes what a job computes (launch: the cluster shape a verl job runs on)
HASH_EXCLUDED = ("experiment", "tracking", "checkpoint", "launch")


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:ID_LENGTH]


def job_id(config: dict[str, Any]) -> str:
    """The id of a job config: short sha256 of its canonical JSON without the excluded keys."""
    hashed = {k: v for k, v in config.items() if k not in HASH_EXCLUDED}
    hashed["job"] = {k: v for k, v in config["job"].items() if k != "id"}
    return _digest(canonical_json(hashed))


@dataclass(frozen=True)
class PlannedJob:
    """One job of the plan; ``config`` is what goes to ``jobs/<id>/config.yaml``."""

    id: str
    type: str
    allocator: str | None
    seed: int | None
    depends_on: tuple[str, ...]
    resources: Resources
    config: dict[str, Any]
    # the *trained* rollouts (steps x budget.rollouts_per_step) and their tokens; what a job
    # generates depends on its allocator and the rewards: rollcli.plan.budget
    expected_rollouts: int | None = None
    expected_tokens: int | None = None
    base_seed: int | None = None  # set only when the spec lists base_seeds

    def summary(self) -> dict[str, Any]:
        """The manifest's entry for this job."""
        base = {} if self.base_seed is None else {"base_seed": self.base_seed}
        return {
            "id": self.id,
            "type": self.type,
            "allocator": self.allocator,
            "seed": self.seed,
            **base,
            "depends_on": list(self.depends_on),
            "resources": self.resources.to_dict(),
            "expected_rollouts": self.expected_rollouts,
            "expected_tokens": self.expected_tokens,
        }


@dataclass(frozen=True)
class Plan:
    experiment: str
    jobs: tuple[PlannedJob, ...]

    def __iter__(self) -> Iterator[PlannedJob]:
        return iter(self.jobs)

    def __len__(self) -> int:
        return len(self.jobs)

    def by_type(self, kind: str) -> list[PlannedJob]:
        return [job for job in self.jobs if job.type == kind]

    def get(self, job_id: str) -> PlannedJob:
        for job in self.jobs:
            if job.id == job_id:
                return job
        raise KeyError(job_id)

    def to_manifest(self) -> dict[str, Any]:
        return {"jobs": [job.summary() for job in self.jobs]}


def _resources(launch: Any, kind: str) -> Resources:
    common = {
        "partition": launch.partition,
        "account": launch.account,
        "qos": launch.qos,
        "constraint": launch.constraint,
        "sbatch_extra": tuple(launch.sbatch_extra),
        "requeue": launch.requeue,
    }
    if kind == "train":
        return Resources(
            nodes=launch.nodes,
            gpus_per_node=launch.gpus_per_node,
            cpus_per_task=launch.cpus_per_task,
            mem=launch.mem,
            time=launch.time,
            **common,
        )
    if kind == "eval":
        return Resources(
            nodes=1,
            gpus_per_node=launch.gpus_per_node,
            cpus_per_task=launch.cpus_per_task,
            mem=launch.mem,
            time=launch.time,
            **common,
        )
    # the report needs no GPU and is cheap to rerun: none of the train jobs' requeue or
    # sbatch_extra (an --exclusive there would hold a whole GPU node to write a table)
    common = {**common, "sbatch_extra": (), "requeue": False}
    if launch.cpu_partition is not None:  # off the GPU partition
        common = {**common, "partition": launch.cpu_partition, "constraint": None}
    return Resources(nodes=1, gpus_per_node=0, cpus_per_task=1, time="01:00:00", **common)


def build_plan(spec: Any) -> Plan:
    """Compile a validated spec into its job graph (pure; writes nothing)."""
    data = spec.to_dict()
    backend, budget, evals = data["backend"], data["budget"], data["eval"]
    tracking, checkpoint = data["tracking"], data["checkpoint"]
    rollouts = budget["steps"] * budget["rollouts_per_step"]
    per_rollout = tokens_per_rollout(spec.backend)
    tokens = round(rollouts * per_rollout) if per_rollout is not None else None
    train_resources = _resources(spec.launch, "train")
    # verl sizes its Ray cluster from the job's launch shape (backend.nnodes/gpus_per_node win)
    cluster = None
    if backend.get("kind") == "verl":
        # and its code-sandbox pools from the node's CPUs (one task per node)
        cluster = {
            "nodes": spec.launch.nodes,
            "gpus_per_node": spec.launch.gpus_per_node,
            "cpus_per_task": spec.launch.cpus_per_task,
        }
    jobs: list[PlannedJob] = []
    train_ids: list[str] = []
    # (base seed or None, seed) per train job: every seed on every base model
    units = [(b, s) for b in data.get("base_seeds") or [None] for s in data["seeds"]]
    for name, allocator in data["allocators"].items():
        for base_seed, seed in units:
            job: dict[str, Any] = {"type": "train", "allocator": name, "seed": seed}
            job_backend = backend
            if base_seed is not None:
                job["base_seed"] = base_seed
                job_backend = {**backend, "base_seed": base_seed}
            config = {
                "experiment": data["name"],
                "job": job,
                "backend": job_backend,
                "allocator": allocator,
                "budget": budget,
                "eval": evals,
                "checkpoint": checkpoint,
                "tracking": tracking,
            }
            if cluster is not None:
                config["launch"] = dict(cluster)
            if spec.launch.memory_limit is not None:  # the job's memory cap (jobs/memcap.py)
                config.setdefault("launch", {})["memory_limit"] = spec.launch.memory_limit
            jid = job_id(config)
            config["job"] = {"id": jid, **config["job"]}
            jobs.append(
                PlannedJob(
                    jid,
                    "train",
                    name,
                    seed,
                    (),
                    train_resources,
                    config,
                    rollouts,
                    tokens,
                    base_seed=base_seed,
                )
            )
            train_ids.append(jid)
    report_deps = list(train_ids)
    if evals.get("jobs"):
        eval_resources = _resources(spec.launch, "eval")
        for train in list(jobs):
            config = {
                "experiment": data["name"],
                "job": {
                    "type": "eval",
                    "allocator": train.allocator,
                    "seed": train.seed,
                    "train_job": train.id,
                },
                "backend": train.config["backend"],
                "eval": evals,
                "tracking": tracking,
            }
            if spec.launch.memory_limit is not None:
                config["launch"] = {"memory_limit": spec.launch.memory_limit}
            jid = job_id(config)
            config["job"] = {"id": jid, **config["job"]}
            jobs.append(
                PlannedJob(
                    jid,
                    "eval",
                    train.allocator,
                    train.seed,
                    (train.id,),
                    eval_resources,
                    config,
                    base_seed=train.base_seed,
                )
            )
            report_deps.append(jid)
    report_config = {
        "experiment": data["name"],
        "job": {"type": "report"},
        "target": data["target"],
        "jobs": sorted(report_deps),
        "tracking": tracking,
    }
    rid = job_id(report_config)
    report_config["job"] = {"id": rid, "type": "report"}
    jobs.append(
        PlannedJob(
            rid,
            "report",
            None,
            None,
            tuple(report_deps),
            _resources(spec.launch, "report"),
            report_config,
        )
    )
    return Plan(data["name"], tuple(jobs))
