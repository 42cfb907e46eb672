"""Launching jobs: the executor protocol (:mod:`rollcli.launch.api`), the local executor, the
Slurm executor and the orchestration behind ``rollcli run`` (:mod:`rollcli.launch.orchestrate`).
Every executor starts a job as one opaque command, ``python -m rollcli.jobs.entry JOB_DIR``.

Nothing heavy is imported here: executors are created by kind through
:func:`rollcli.launch.api.create_executor`, which imports submitit only for Slurm.
"""

from rollcli.launch.api import (
    EXECUTORS,
    STATUSES,
    TERMINAL,
    BaseExecutor,
    Job,
    Resources,
    create_executor,
    entry_command,
)

__all__ = [
    "EXECUTORS",
    "STATUSES",
    "TERMINAL",
    "BaseExecutor",
    "Job",
    "Resources",
    "create_executor",
    "entry_command",
]
