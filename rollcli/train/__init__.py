"""The generic step loop for the sim and tiny backends: steps, metrics rows, checkpoints, resume.

:class:`~rollcli.train.loop.TrainLoop` is the step loop itself, :func:`run_loop_job` runs one
as a job (metrics file, checkpoints, resume) and :mod:`rollcli.train.checkpoint` writes the
atomic checkpoint files. A train *job* starts in ``rollcli.jobs.train.run_train_job``, which
creates the backend and the allocator from the job's config (this package creates neither).
"""

from typing import Any

from rollcli.train.checkpoint import list_checkpoints, load_latest_checkpoint, save_checkpoint
from rollcli.train.job import run_loop_job
from rollcli.train.loop import TrainLoop

__all__ = [
    "TrainLoop",
    "list_checkpoints",
    "load_latest_checkpoint",
    "run_loop_job",
    "save_checkpoint",
]

_MOVED = {name: "rollcli.jobs.train" for name in ("run_train_job", "create_job_loop")}
_MOVED["load_job_config"] = "rollcli.jobs.config"


def __getattr__(name: str) -> Any:
    if name in _MOVED:  # say where it went instead of a bare AttributeError
        raise AttributeError(f"rollcli.train.{name} moved to {_MOVED[name]} (issue 15)")
    raise AttributeError(f"module 'rollcli.train' has no attribute {name!r}")
