"""The step and checkpoint cadence of a train job, shared by the generic job and verl's trainer.

:func:`drive_loop` emits the ``step: 0`` row of a fresh run, then runs :class:`TrainLoop` steps,
emitting each row, saving every ``save_every`` steps, and once more at the end or when
``should_stop()`` says so between steps (then it returns). Where rows go and what a save writes
is the caller's: ``metrics.jsonl`` and rollcli's checkpoints for sim and tiny
(:mod:`rollcli.train.job`), verl's checkpoint folder and tracker for verl.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rollcli.train.loop import TrainLoop

__all__ = ["drive_loop"]


def drive_loop(
    loop: TrainLoop,
    *,
    emit: Callable[[dict[str, Any]], None],
    save: Callable[[], None],
    save_every: int,
    should_stop: Callable[[], bool] = lambda: False,
    fresh: bool,
) -> bool:
    """Run ``loop`` to its last step or a stop; returns whether it stopped early.

    ``fresh``: nothing was run before (emit the ``step: 0`` row); otherwise the loop was
    resumed from a save at ``loop.step``.
    """
    if save_every < 0:
        raise ValueError(f"checkpoint.every must be >= 0, got {save_every}")
    if fresh:
        emit(loop.initial_row())
    saved = loop.step
    stopped = False
    while not loop.done:
        if should_stop():
            stopped = True
            break
        emit(loop.run_step())
        if save_every and loop.step % save_every == 0:
            save()
            saved = loop.step
    if saved != loop.step:
        save()
    return stopped
