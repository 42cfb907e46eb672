"""A train loop run as a job: metrics rows to ``metrics.jsonl``, checkpoints, resume.

:func:`run_loop_job` takes a ready :class:`~rollcli.train.loop.TrainLoop` (the backend and the
allocator are created by ``rollcli.jobs.train`` from the job's config), resumes it from the
newest checkpoint (dropping metrics rows written after it, so a resumed run writes exactly the
rows of an uninterrupted one), and drives it with :func:`rollcli.train.drive.drive_loop` (the
cadence verl's trainer shares): one row per step appended to ``metrics.jsonl``, a checkpoint
every ``checkpoint_every`` steps, at the end, and when ``stop`` is set (then it returns).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rollcli.store.atomic import append_jsonl, read_jsonl_lenient, rewrite_jsonl
from rollcli.store.folders import JobFolder
from rollcli.train.checkpoint import load_latest_checkpoint, save_checkpoint
from rollcli.train.drive import drive_loop
from rollcli.train.loop import TrainLoop

__all__ = ["run_loop_job", "DrainWatch"]

Callback = Callable[[dict[str, Any]], None]
log = logging.getLogger(__name__)


def run_loop_job(
    loop: TrainLoop,
    job_dir: str | os.PathLike[str],
    *,
    checkpoint_every: int = 1,
    keep: int = 2,
    stop: threading.Event | None = None,
    callbacks: Sequence[Callback] = (),
) -> None:
    """Run (or resume) ``loop`` in ``job_dir`` to its last step or until ``stop`` is set."""
    folder = JobFolder(job_dir)
    saved_step = _resume(loop, folder)

    drained = DrainWatch()

    def emit(row: dict[str, Any]) -> None:
        append_jsonl(folder.metrics, [row])
        if notice := drained.notice(row):
            log.warning("%s", notice)
        for callback in callbacks:
            callback(row)

    def checkpoint() -> None:
        save_checkpoint(
            folder.path,
            step=loop.step,
            loop=loop.state_dict(),
            allocator=loop.allocator.state_dict(),
            backend=loop.backend.state_dict(),
            keep=keep,
        )

    drive_loop(
        loop,
        emit=emit,
        save=checkpoint,
        save_every=checkpoint_every,
        should_stop=stop.is_set if stop is not None else lambda: False,
        fresh=saved_step is None,
    )


class DrainWatch:
    """Says once, in the job's log, when steps start generating nothing (a prompt pool drained
    by eviction or deferral), and again if that ends; the report warns of it as well."""

    def __init__(self) -> None:
        self.since: int | None = None

    def notice(self, row: Mapping[str, Any]) -> str | None:
        step, generated = row.get("step"), row.get("step_rollouts")
        if not isinstance(step, int) or step < 1 or not isinstance(generated, (int, float)):
            return None
        if generated <= 0 and self.since is None:
            self.since = step
            return (
                f"warning: step {step} generated nothing: the prompt pool is drained (every "
                "prompt evicted or deferred); the job trains nothing until an epoch refills it"
            )
        if generated > 0 and self.since is not None:
            since, self.since = self.since, None
            return f"step {step} generates again (nothing was generated from step {since})"
        return None


def _resume(loop: TrainLoop, folder: JobFolder) -> int | None:
    """Load the newest readable checkpoint into the loop and cut later metrics rows; its step,
    or None (a fresh start).

    The metrics of steps 0..N must all be there for checkpoint N: a deleted, truncated or
    damaged ``metrics.jsonl`` (rows missing, a line that is not JSON) cannot be rebuilt from the
    checkpoint, so the job restarts from step 0 with a one-line notice (checkpoints removed).
    """
    ckpt = load_latest_checkpoint(folder.path)
    rows, problems = read_jsonl_lenient(folder.metrics)
    if ckpt is None:
        if folder.metrics.exists():  # a run that died before its first checkpoint starts over
            rewrite_jsonl(folder.metrics, [])
        return None
    kept = [row for row in rows if _step(row) is not None and _step(row) <= ckpt.step]
    if sorted(_step(row) for row in kept) != list(range(ckpt.step + 1)):
        damage = (
            problems[0] if problems else f"{folder.metrics}: rows of steps 0..{ckpt.step} missing"
        )
        log.warning("notice: %s; restarting this job from step 0", damage)
        shutil.rmtree(folder.checkpoints, ignore_errors=True)
        rewrite_jsonl(folder.metrics, [])
        return None
    loop.allocator.load_state_dict(ckpt.allocator)
    loop.backend.load_state_dict(ckpt.backend)
    loop.load_state_dict(ckpt.loop)
    if len(kept) != len(rows) or problems:
        rewrite_jsonl(folder.metrics, kept)
    return ckpt.step


def _step(row: Mapping[str, Any]) -> int | None:
    step = row.get("step")
    return step if isinstance(step, int) and not isinstance(step, bool) else None
