"""The job config (``<job>/config.yaml``, docs/CONTRACTS.md §3) as one typed, frozen record.

:func:`load_job_config` is the one reader of a job's config: it checks the sections its job type
needs and hands each part only its own section — the backend section to the backend factory,
the allocator section to the allocator registry, the budget and eval cadence to the train loop,
the checkpoint settings to the checkpoint writer, the whole file only to the parts that record
it (the W&B tracker, verl's trainer). An unusable config fails with the file and the field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcli.errors import RollcliError
from rollcli.store.folders import JobFolder

__all__ = [
    "DEFAULT_EVAL_EVERY",
    "JOB_TYPES",
    "BudgetConfig",
    "CheckpointConfig",
    "JobConfig",
    "JobConfigError",
    "JobInfo",
    "load_job_config",
]

DEFAULT_EVAL_EVERY = 5
# the sections each job type reads, besides `job`
JOB_TYPES: dict[str, tuple[str, ...]] = {
    "train": ("backend", "allocator", "budget"),
    "eval": ("backend", "eval"),
    "report": (),
}


class JobConfigError(RollcliError):
    """A job's config.yaml lacks a section or holds a value of the wrong type."""


@dataclass(frozen=True)
class JobInfo:
    """The ``job`` section: which job this is."""

    id: str
    type: str
    allocator: str | None = None  # the allocator's name in the spec (train and eval jobs)
    seed: int = 0
    train_job: str | None = None  # eval jobs: the train job whose checkpoints they evaluate


@dataclass(frozen=True)
class BudgetConfig:
    """The ``budget`` section: the equal per-step budget."""

    steps: int
    rollouts_per_step: int


@dataclass(frozen=True)
class CheckpointConfig:
    """The ``checkpoint`` section: steps between checkpoints (0: only at the end and on a stop)
    and how many to keep."""

    every: int = 1
    keep: int = 2


@dataclass(frozen=True)
class JobConfig:
    """A job's config.yaml, section by section (see the module docstring)."""

    source: str  # the file, for error messages
    experiment: str
    job: JobInfo
    backend: Mapping[str, Any] = field(default_factory=dict)
    allocator: Mapping[str, Any] = field(default_factory=dict)
    budget: BudgetConfig | None = None
    eval: Mapping[str, Any] = field(default_factory=dict)
    checkpoint: CheckpointConfig = CheckpointConfig()
    tracking: Mapping[str, Any] = field(default_factory=dict)
    launch: Mapping[str, Any] = field(default_factory=dict)
    target: Mapping[str, Any] = field(default_factory=dict)
    jobs: tuple[str, ...] = ()  # report jobs: the jobs they report on
    data: Mapping[str, Any] = field(default_factory=dict)  # the whole file as read

    @property
    def eval_every(self) -> int:
        """Steps between evaluations (0: only at the last step)."""
        every = self.eval.get("every", DEFAULT_EVAL_EVERY)
        return 0 if every is None else _int(every, "eval.every", self.source, minimum=0)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "<job config>") -> JobConfig:
        """Check and type a config mapping (what :func:`load_job_config` does after reading)."""
        if not isinstance(data, Mapping):
            raise JobConfigError(f"{source}: expected a mapping, found {type(data).__name__}")
        job = _section(data, "job", source, required=True)
        kind = str(job.get("type", "train"))
        if kind not in JOB_TYPES:
            raise JobConfigError(
                f"{source}: job.type: unknown job type '{kind}' (valid: {', '.join(JOB_TYPES)})"
            )
        sections = {name: _section(data, name, source, required=name in JOB_TYPES[kind])
                    for name in ("backend", "allocator", "budget", "eval", "checkpoint",
                                 "tracking", "launch", "target")}  # fmt: skip
        budget = None
        if sections["budget"]:
            budget = BudgetConfig(
                steps=_int(sections["budget"].get("steps"), "budget.steps", source, minimum=1),
                rollouts_per_step=_int(
                    sections["budget"].get("rollouts_per_step"),
                    "budget.rollouts_per_step",
                    source,
                    minimum=1,
                ),
            )
        ckpt = sections["checkpoint"]
        every = ckpt.get("every", 1)
        checkpoint = CheckpointConfig(
            every=0 if every is None else _int(every, "checkpoint.every", source, minimum=0),
            keep=_int(ckpt.get("keep", 2), "checkpoint.keep", source, minimum=1),
        )
        if kind == "eval" and not job.get("train_job"):
            raise JobConfigError(f"{source}: job.train_job: an eval job names its train job")
        info = JobInfo(
            id=str(job.get("id") or ""),
            type=kind,
            allocator=None if job.get("allocator") is None else str(job["allocator"]),
            seed=_int(job.get("seed", 0) or 0, "job.seed", source, minimum=0),
            train_job=None if job.get("train_job") is None else str(job["train_job"]),
        )
        jobs = data.get("jobs") or ()
        if not isinstance(jobs, (list, tuple)):
            raise JobConfigError(f"{source}: jobs: expected a list of job ids")
        return cls(
            source=source,
            experiment=str(data.get("experiment") or ""),
            job=info,
            backend=sections["backend"],
            allocator=sections["allocator"],
            budget=budget,
            eval=sections["eval"],
            checkpoint=checkpoint,
            tracking=sections["tracking"],
            launch=sections["launch"],
            target=sections["target"],
            jobs=tuple(str(j) for j in jobs),
            data=dict(data),
        )


def load_job_config(job_dir: str | os.PathLike[str] | JobFolder) -> JobConfig:
    """Read and check ``<job_dir>/config.yaml``."""
    folder = job_dir if isinstance(job_dir, JobFolder) else JobFolder(Path(job_dir))
    return JobConfig.from_mapping(folder.read_config(), str(folder.config))


def _section(data: Mapping[str, Any], name: str, source: str, *, required: bool) -> dict:
    value = data.get(name)
    if value is None:
        if required:
            raise JobConfigError(f"{source}: missing section '{name}'")
        return {}
    if not isinstance(value, Mapping):
        raise JobConfigError(f"{source}: {name}: expected a mapping, found {type(value).__name__}")
    return dict(value)


def _int(value: Any, where: str, source: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise JobConfigError(f"{source}: {where}: expected an integer, found {value!r}")
    if value < minimum:
        raise JobConfigError(f"{source}: {where}: must be >= {minimum}, got {value}")
    return value
