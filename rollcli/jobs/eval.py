"""Eval jobs: evaluate every checkpoint of a train job (verl checkpoints; docs/eval.md).

The plan makes eval jobs only for the verl backend (``eval: {jobs: true}``), whose checkpoint
format they read, so the job itself is :func:`rollcli.backends.verl.eval_job.run_eval_job`; this
module hands it the job's config.
"""

from __future__ import annotations

import threading

from rollcli.jobs.config import JobConfig
from rollcli.store.folders import JobFolder

__all__ = ["run"]


def run(folder: JobFolder, config: JobConfig, stop: threading.Event) -> None:
    """The entry point's eval runner."""
    from rollcli.backends.verl.eval_job import run_eval_job

    run_eval_job(folder.path, config=config.data, stop=stop)
