"""Train jobs: the job's config handed to the backend, the allocator and the loop, then run.

``run_train_job(job_dir, stop=None, callbacks=())`` (docs/CONTRACTS.md §4) reads the job's
config once (:func:`rollcli.jobs.config.load_job_config`) and either runs the generic loop
(sim, tiny: :func:`create_job_loop` + :func:`rollcli.train.run_loop_job`) or, for a backend whose
trainer drives the step loop itself (verl), hands the job to that backend's runner, which runs
the same step routine and row builder from inside its trainer.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rollcli.jobs.config import JobConfig, JobConfigError, load_job_config
from rollcli.store.folders import JobFolder
from rollcli.train.loop import TrainLoop

__all__ = ["create_job_loop", "run", "run_train_job"]

Callback = Callable[[dict[str, Any]], None]


def _as_config(config: JobConfig | Mapping[str, Any]) -> JobConfig:
    return config if isinstance(config, JobConfig) else JobConfig.from_mapping(config)


def create_job_loop(
    config: JobConfig | Mapping[str, Any], job_dir: str | os.PathLike[str] | None = None
) -> TrainLoop:
    """Backend + allocator + loop for a train job's config (the oracle gets the backend's p)."""
    from rollcli.allocators.registry import ALLOCATORS, create_allocator, create_config
    from rollcli.backends import create_backend

    config = _as_config(config)
    if config.budget is None:
        raise JobConfigError(f"{config.source}: missing section 'budget'")
    seed = config.job.seed
    backend = create_backend(
        dict(config.backend), seed=seed, job_dir=Path(job_dir) if job_dir else None
    )
    try:
        alloc_config = create_config(dict(config.allocator))
        allocator_cls = ALLOCATORS[alloc_config.kind][1]
        oracle = backend.success_probabilities if allocator_cls.requires_oracle else None
        allocator = create_allocator(
            alloc_config,
            num_prompts=backend.num_prompts,
            rollouts_per_step=config.budget.rollouts_per_step,
            seed=seed,
            oracle=oracle,
        )
        return TrainLoop(
            backend, allocator, num_steps=config.budget.steps, eval_every=config.eval_every
        )
    except BaseException:
        backend.close()
        raise


def run_train_job(
    job_dir: str | os.PathLike[str],
    *,
    config: JobConfig | None = None,
    stop: threading.Event | None = None,
    callbacks: Sequence[Callback] = (),
) -> None:
    """Run (or resume) the train job in ``job_dir`` to its last step or until ``stop`` is set."""
    from rollcli.backends import trainer_driven_runner
    from rollcli.train.job import run_loop_job

    folder = JobFolder(job_dir)
    config = config or load_job_config(folder)
    if config.budget is None:
        raise JobConfigError(f"{config.source}: missing section 'budget'")
    runner = trainer_driven_runner(str(config.backend.get("kind")))
    if runner is not None:
        runner(folder.path, job=config.data, stop=stop, callbacks=callbacks)
        return
    loop = create_job_loop(config, folder.path)
    try:
        run_loop_job(
            loop,
            folder.path,
            checkpoint_every=config.checkpoint.every,
            keep=config.checkpoint.keep,
            stop=stop,
            callbacks=callbacks,
        )
    finally:
        loop.backend.close()


def run(folder: JobFolder, config: JobConfig, stop: threading.Event) -> None:
    """The entry point's train runner: the job, with the W&B tracker fed every metrics row."""
    from rollcli.jobs.steplog import StepLog

    tracker = _tracker(config, folder)
    steps = config.budget.steps if config.budget is not None else None
    # a line per step on stdout: `rollcli logs RUN JOB [-f]` reads it (jobs/<id>/logs/)
    callbacks: list[Callback] = [StepLog(steps)]
    if tracker is not None:
        callbacks.append(tracker)
    try:
        run_train_job(folder.path, config=config, stop=stop, callbacks=callbacks)
    finally:
        if tracker is not None:
            tracker.finish()


def _tracker(config: JobConfig, folder: JobFolder) -> Any:
    try:
        from rollcli.analysis.tracking import create_tracker
    except ImportError:
        return None
    return create_tracker(dict(config.data), folder.path)
