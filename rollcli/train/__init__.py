"""The one step routine of every backend: steps, metrics rows, their cadence, checkpoints, resume.

:class:`~rollcli.train.loop.TrainLoop` is the step loop itself, :mod:`rollcli.train.rows` builds
its metrics rows, :func:`~rollcli.train.drive.drive_loop` its step/checkpoint cadence,
:func:`run_loop_job` runs one as a job of the sim or tiny backend (metrics file, checkpoints,
resume) and :mod:`rollcli.train.checkpoint` writes the atomic checkpoint files. verl's trainer
runs the same loop and cadence from inside (``rollcli.backends.verl.steps``). A train *job* starts in ``rollcli.jobs.train.run_train_job``, which
creates the backend and the allocator from the job's config (this package creates neither).
"""

from typing import Any

from rollcli.train.checkpoint import list_checkpoints, load_latest_checkpoint, save_checkpoint
from rollcli.train.drive import drive_loop
from rollcli.train.job import run_loop_job
from rollcli.train.loop import TrainLoop
from rollcli.train.rows import mean_group_variance

__all__ = [
    "TrainLoop",
    "drive_loop",
    "mean_group_variance",
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
