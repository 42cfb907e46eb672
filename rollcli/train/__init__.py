"""The generic train loop for the sim and tiny backends: steps, metrics rows, checkpoints, resume.

``run_train_job(job_dir, stop=None, callbacks=())`` is the entry point (docs/CONTRACTS.md §4);
:class:`~rollcli.train.loop.TrainLoop` is the step loop itself and
:mod:`rollcli.train.checkpoint` the atomic checkpoint files.
"""

from rollcli.train.checkpoint import list_checkpoints, load_latest_checkpoint, save_checkpoint
from rollcli.train.job import create_job_loop, load_job_config, run_train_job
from rollcli.train.loop import TrainLoop

__all__ = [
    "TrainLoop",
    "create_job_loop",
    "list_checkpoints",
    "load_job_config",
    "load_latest_checkpoint",
    "run_train_job",
    "save_checkpoint",
]
