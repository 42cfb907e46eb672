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
from rollcli.store.datafile import DataFileError
from rollcli.store.folders import JobFolder
from rollcli.train.checkpoint import Checkpoint, list_checkpoints, load_checkpoint, save_checkpoint
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
    """Load the newest checkpoint that reads back whole and passes :func:`_check_checkpoint`
    into the loop and cut later metrics rows; its step, or None (a fresh start).

    A checkpoint is a file anyone with access to the run folder may have edited: one whose
    fields do not fit the job (a step past ``budget.steps``, counters that disagree, prompts
    outside the pool) or whose states the loop refuses is skipped with a one-line warning, and
    the previous one is used. The metrics of steps 0..N must all be there for checkpoint N: a
    deleted, truncated or damaged ``metrics.jsonl`` (rows missing, a line that is not JSON)
    cannot be rebuilt from the checkpoint, so the job restarts from step 0 with a one-line
    notice (checkpoints removed).
    """
    rows, problems = read_jsonl_lenient(folder.metrics)
    fresh: tuple[Any, Any, Any] | None = None
    for _, path in reversed(list_checkpoints(folder.path)):
        try:
            ckpt = load_checkpoint(path)
            _check_checkpoint(ckpt, loop)
        except DataFileError as error:
            log.warning("skipping checkpoint %s: %s", path, error)
            continue
        kept = [row for row in rows if _step(row) is not None and _step(row) <= ckpt.step]
        steps = sorted(_step(row) for row in kept)  # bounded by the rows, not by the step
        if len(steps) != ckpt.step + 1 or steps != list(range(len(steps))):
            damage = (
                problems[0]
                if problems
                else f"{folder.metrics}: rows of steps 0..{ckpt.step} missing"
            )
            break  # the rows of this checkpoint are gone: nothing older has them either
        if fresh is None:  # a half-loaded checkpoint must not leak into the next attempt
            fresh = _states(loop)
        try:
            _load_states(loop, ckpt.allocator, ckpt.backend, ckpt.loop)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
            log.warning("skipping checkpoint %s: its state does not load (%s)", path, error)
            _load_states(loop, *fresh)
            continue
        if len(kept) != len(rows) or problems:
            rewrite_jsonl(folder.metrics, kept)
        return ckpt.step
    else:
        if folder.metrics.exists():  # a run that died before its first checkpoint starts over
            rewrite_jsonl(folder.metrics, [])
        return None
    log.warning("notice: %s; restarting this job from step 0", damage)
    shutil.rmtree(folder.checkpoints, ignore_errors=True)
    rewrite_jsonl(folder.metrics, [])
    return None


def _states(loop: TrainLoop) -> tuple[Any, Any, Any]:
    """The loop's allocator, backend and own states, as a checkpoint holds them."""
    import copy

    return copy.deepcopy(
        (loop.allocator.state_dict(), loop.backend.state_dict(), loop.state_dict())
    )


def _load_states(loop: TrainLoop, allocator: Any, backend: Any, own: Any) -> None:
    loop.allocator.load_state_dict(allocator)
    loop.backend.load_state_dict(backend)
    loop.load_state_dict(own)


def _check_checkpoint(ckpt: Checkpoint, loop: TrainLoop) -> None:
    """Raise :class:`DataFileError` unless the checkpoint's numbers fit this job.

    Checked before anything is loaded or sized by them: the step against ``budget.steps`` and
    the folder's name, the loop's and the allocator's counters against the step, the wall
    time, and every prompt a pending ask names against the pool.
    """
    where = ckpt.path / "loop.json"
    name_step = int(ckpt.path.name.rpartition("_")[2])
    if not 0 <= ckpt.step <= loop.num_steps or ckpt.step != name_step:
        raise DataFileError(
            f"{where}: step {ckpt.step} does not fit this job (budget.steps {loop.num_steps}, "
            f"folder {ckpt.path.name})"
        )
    loop_step, wall_s = ckpt.loop.get("step"), ckpt.loop.get("wall_s", 0.0)
    if loop_step != ckpt.step:
        raise DataFileError(f"{where}: loop.step {loop_step!r} is not the step {ckpt.step}")
    if not isinstance(wall_s, (int, float)) or not 0 <= wall_s < 1e9:
        raise DataFileError(f"{where}: loop.wall_s {wall_s!r} is not a duration")
    allocator_step = ckpt.allocator.get("step")
    if not isinstance(allocator_step, int) or not -1 <= allocator_step <= ckpt.step:
        raise DataFileError(f"{where}: allocator.step {allocator_step!r} past step {ckpt.step}")
    num_prompts = loop.allocator.source.num_prompts
    pending = ckpt.allocator.get("pending") or []
    if not isinstance(pending, list) or any(
        not isinstance(item, list)
        or len(item) != 3
        or not all(isinstance(value, int) for value in item[:2])
        or not 0 <= item[0] < num_prompts
        or item[1] <= 0
        for item in pending
    ):
        raise DataFileError(f"{where}: allocator.pending names prompts outside the pool")
    asked = sum(item[1] for item in pending)
    if asked > loop.allocator.max_step_rollouts:
        raise DataFileError(
            f"{where}: allocator.pending asks {asked} rollouts, more than a step's "
            f"{loop.allocator.max_step_rollouts}"
        )


def _step(row: Mapping[str, Any]) -> int | None:
    step = row.get("step")
    return step if isinstance(step, int) and not isinstance(step, bool) else None
