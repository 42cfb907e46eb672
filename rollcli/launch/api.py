"""The executor protocol: how planned jobs are started, watched and stopped (local, Slurm).

Executors know jobs as opaque units with a folder, dependencies and resources; they know nothing
of RL. Every job, on any executor, runs the same entry point ``python -m rollcli.jobs.entry
JOB_DIR``, which marks ``state.json`` running/done/failed itself. An executor therefore only has
to (1) start that command for each job once its dependencies are done, (2) record how to find the
process again in ``state.json["executor"]`` (``{kind: local, pid}`` or ``{kind: slurm, job_id,
array_job_id}``), (3) report statuses, noticing jobs that died without updating their state, and
(4) cancel. ``rollcli run`` drives an executor as::

    executor = create_executor(spec.launch)
    executor.submit(jobs, run_dir)               # returns once jobs are started / queued
    statuses = executor.wait(jobs, run_dir, on_tick=live_view.update)   # unless --detach

Statuses are the strings of :data:`STATUSES`. This module is stable: the Slurm executor
(``rollcli.launch.slurm``) is written against it.
"""

from __future__ import annotations

import abc
import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rollcli.plan.resources import Resources

__all__ = [
    "STATUSES",
    "TERMINAL",
    "Resources",
    "Job",
    "BaseExecutor",
    "ENTRY_MODULE",
    "EXECUTORS",
    "create_executor",
    "entry_command",
]

# the job entry point (rollcli.jobs.entry), started as an opaque command
ENTRY_MODULE = "rollcli.jobs.entry"
STATUSES = ("pending", "running", "done", "failed", "cancelled")
TERMINAL = frozenset({"done", "failed", "cancelled"})


@dataclass(frozen=True)
class Job:
    """One planned job as an executor sees it. ``job_dir`` holds its ``config.yaml`` and
    ``state.json``; ``type`` is ``train``, ``eval`` or ``report``."""

    id: str
    type: str
    job_dir: Path
    depends_on: tuple[str, ...] = ()
    resources: Resources = field(default_factory=Resources)


def entry_command(job_dir: Path, python: str | None = None) -> list[str]:
    """The one command every executor runs for a job."""
    import sys

    return [python or sys.executable, "-m", ENTRY_MODULE, str(job_dir)]


class BaseExecutor(abc.ABC):
    """Starts jobs, reports their status, cancels them. Subclasses implement the four hooks."""

    kind: ClassVar[str]
    # whether `rollcli run --detach` may return right after submit (jobs outlive the CLI)
    supports_detach: ClassVar[bool] = False

    def __init__(self, launch: Mapping[str, Any] | None = None) -> None:
        """``launch`` is the spec's ``launch`` section as a plain mapping."""
        self.launch: dict[str, Any] = dict(launch or {})

    @abc.abstractmethod
    def submit(self, jobs: Sequence[Job], run_dir: Path) -> None:
        """Start (or queue) ``jobs``, each after its ``depends_on`` are done. Jobs whose state is
        already ``done`` are not passed in. Records ``state.json["executor"]`` for each job."""

    @abc.abstractmethod
    def poll(self, jobs: Sequence[Job], run_dir: Path) -> dict[str, str]:
        """Current status of each job (job id -> one of :data:`STATUSES`). A job whose process
        is gone while its state still says running is reported (and recorded) as failed."""

    @abc.abstractmethod
    def cancel(self, run_dir: Path, job_ids: Sequence[str] | None = None) -> list[str]:
        """Stop the given jobs (all unfinished jobs of the run if None) so they checkpoint and
        exit; mark them cancelled; return the ids actually signalled."""

    def preflight(self) -> str | None:
        """Why this executor cannot run jobs on this machine (what is missing), or None.

        Called before a run folder is created, so an unrunnable spec leaves nothing behind."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what submit started (threads, pools). Called once by ``rollcli run``."""

    def wait(
        self,
        jobs: Sequence[Job],
        run_dir: Path,
        *,
        on_tick: Callable[[dict[str, str]], None] | None = None,
        interval: float = 0.5,
    ) -> dict[str, str]:
        """Poll until every job is terminal; call ``on_tick(statuses)`` after each poll."""
        while True:
            statuses = self.poll(jobs, run_dir)
            if on_tick is not None:
                on_tick(statuses)
            if all(s in TERMINAL for s in statuses.values()):
                return statuses
            time.sleep(interval)


# executor kind -> "module:class"; imported lazily (submitit only when slurm is used)
EXECUTORS: dict[str, str] = {
    "local": "rollcli.launch.local:LocalExecutor",
    "slurm": "rollcli.launch.slurm:SlurmExecutor",
}


def create_executor(launch: Mapping[str, Any] | Any) -> BaseExecutor:
    """Create the executor named by ``launch["executor"]`` (a mapping or an object with
    ``model_dump()``, e.g. the spec's ``LaunchSpec``)."""
    if hasattr(launch, "model_dump"):
        launch = launch.model_dump()
    kind = launch.get("executor", "local")
    if kind not in EXECUTORS:
        from rollcli.errors import RollcliError

        raise RollcliError(f"unknown executor '{kind}'. Valid: {', '.join(EXECUTORS)}.")
    module_name, class_name = EXECUTORS[kind].split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls(launch)
