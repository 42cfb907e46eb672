"""The verl backend: rollcli's allocators inside verl's trainer (vLLM/FSDP/Ray; CPU for tests).

Unlike sim and tiny, verl's trainer owns the process structure (a Ray actor driving worker
groups), so this backend is *trainer-driven*: a train job whose ``backend.kind`` is ``verl``
runs through :func:`run_train_job` (``rollcli.jobs.train.run_train_job`` hands it the job, see
``rollcli.backends.TRAINER_DRIVEN``), and :func:`create_verl_backend` refuses with a message
that says so. Only this package imports verl, and only inside functions; importing it
costs nothing (the spec imports :mod:`rollcli.backends.verl.config`). See docs/verl.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rollcli.backends.verl.config import VerlConfig
from rollcli.errors import RollcliError

__all__ = ["VerlConfig", "VerlTrainerDrivenError", "create_verl_backend", "run_train_job"]


class VerlTrainerDrivenError(RollcliError):
    """The verl backend cannot be stepped by the generic loop: verl's trainer owns the loop."""


def create_verl_backend(config: Mapping[str, Any], *, seed: int, job_dir: Any = None) -> Any:
    """Always raises: verl runs the step loop itself (use :func:`run_train_job`)."""
    raise VerlTrainerDrivenError(
        "the verl backend is trainer-driven: verl's trainer runs the allocator's ask/tell loop, "
        "so it has no generate()/update() backend object. Run the job with "
        "rollcli.backends.verl.run_train_job(job_dir) (rollcli run and rollcli.jobs.train do "
        "this for backend.kind == 'verl')."
    )


def run_train_job(
    job_dir: str | Path,
    *,
    job: Mapping[str, Any] | None = None,
    stop: threading.Event | None = None,
    callbacks: Sequence[Callable[[dict], None]] = (),
) -> None:
    """Run or resume one verl train job (see :mod:`rollcli.backends.verl.runner`); ``job`` is
    its config (read from the folder when not given)."""
    from rollcli.backends.verl.runner import run_train_job as _run

    _run(job_dir, job=job, stop=stop, callbacks=callbacks)
