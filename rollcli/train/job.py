"""``run_train_job``: one training job from its folder (docs/CONTRACTS.md §3-§4).

Reads ``config.yaml``, creates the backend and the allocator, resumes from the newest checkpoint
(dropping metrics rows written after it, so a resumed run writes exactly the rows of an
uninterrupted one), runs to ``budget.steps``, appends one row per step to ``metrics.jsonl``,
checkpoints every ``checkpoint.every`` steps, at the end, and when ``stop`` is set (then
returns). verl jobs are handed to ``rollcli.backends.verl.run_train_job``, which drives the same
allocator calls from inside verl's trainer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rollcli.store.atomic import append_jsonl, read_jsonl, rewrite_jsonl
from rollcli.train.checkpoint import load_latest_checkpoint, save_checkpoint
from rollcli.train.loop import TrainLoop

__all__ = ["run_train_job", "load_job_config", "create_job_loop", "METRICS_FILE"]

METRICS_FILE = "metrics.jsonl"
DEFAULT_EVAL_EVERY = 5

Callback = Callable[[dict[str, Any]], None]


def load_job_config(job_dir: str | Path) -> dict[str, Any]:
    """The job's ``config.yaml`` as a mapping (with a clear error when it is missing or bad)."""
    import yaml

    path = Path(job_dir) / "config.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no job config (is this a job folder?)")
    config = yaml.safe_load(path.read_text("utf-8"))
    if not isinstance(config, Mapping):
        raise ValueError(f"{path}: expected a mapping, got {type(config).__name__}")
    for section in ("job", "backend", "allocator", "budget"):
        if not isinstance(config.get(section), Mapping):
            raise ValueError(f"{path}: missing section '{section}'")
    return dict(config)


def _section(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = config.get(name) or {}
    if not isinstance(value, Mapping):
        raise ValueError(f"config section '{name}' must be a mapping, got {type(value).__name__}")
    return value


def create_job_loop(config: Mapping[str, Any], job_dir: Path | None = None) -> TrainLoop:
    """Backend + allocator + loop for a job config (the oracle gets the backend's true p)."""
    from rollcli.allocators.registry import ALLOCATORS, create_allocator, create_config
    from rollcli.backends import create_backend

    seed = int(config["job"]["seed"])
    budget = config["budget"]
    backend = create_backend(dict(config["backend"]), seed=seed, job_dir=job_dir)
    try:
        alloc_config = create_config(dict(config["allocator"]))
        allocator_cls = ALLOCATORS[alloc_config.kind][1]
        oracle = backend.success_probabilities if allocator_cls.requires_oracle else None
        allocator = create_allocator(
            alloc_config,
            num_prompts=backend.num_prompts,
            rollouts_per_step=int(budget["rollouts_per_step"]),
            seed=seed,
            oracle=oracle,
        )
        eval_every = _section(config, "eval").get("every", DEFAULT_EVAL_EVERY)
        return TrainLoop(
            backend,
            allocator,
            num_steps=int(budget["steps"]),
            eval_every=int(eval_every if eval_every is not None else 0),
        )
    except BaseException:
        backend.close()
        raise


def run_train_job(
    job_dir: str | Path,
    *,
    stop: threading.Event | None = None,
    callbacks: Sequence[Callback] = (),
) -> None:
    """Run (or resume) the training job in ``job_dir`` to its last step or until ``stop`` is set."""
    job_dir = Path(job_dir)
    config = load_job_config(job_dir)
    if config["backend"].get("kind") == "verl":
        from rollcli.backends.verl import run_train_job as run_verl_train_job

        run_verl_train_job(job_dir, stop=stop, callbacks=callbacks)
        return

    ckpt_section = _section(config, "checkpoint")
    every = int(ckpt_section.get("every", 1) or 0)
    keep = int(ckpt_section.get("keep", 2))
    if every < 0:
        raise ValueError(f"checkpoint.every must be >= 0, got {every}")
    metrics_path = job_dir / METRICS_FILE

    loop = create_job_loop(config, job_dir)
    try:
        saved_step = _resume(loop, job_dir, metrics_path)

        def emit(row: dict[str, Any]) -> None:
            append_jsonl(metrics_path, [row])
            for callback in callbacks:
                callback(row)

        def checkpoint() -> None:
            nonlocal saved_step
            save_checkpoint(
                job_dir,
                step=loop.step,
                loop=loop.state_dict(),
                allocator=loop.allocator.state_dict(),
                backend=loop.backend.state_dict(),
                keep=keep,
            )
            saved_step = loop.step

        if saved_step is None:
            emit(loop.initial_row())
        while not loop.done:
            if stop is not None and stop.is_set():
                break
            emit(loop.run_step())
            if every and loop.step % every == 0:
                checkpoint()
        if saved_step != loop.step and loop.step > 0:
            checkpoint()
    finally:
        loop.backend.close()


def _resume(loop: TrainLoop, job_dir: Path, metrics_path: Path) -> int | None:
    """Load the newest checkpoint into the loop and cut later metrics rows; its step, or None."""
    ckpt = load_latest_checkpoint(job_dir)
    rows = read_jsonl(metrics_path)
    if ckpt is None:
        if metrics_path.exists():  # a run that died before its first checkpoint starts over
            rewrite_jsonl(metrics_path, [])
        return None
    loop.allocator.load_state_dict(ckpt.allocator)
    loop.backend.load_state_dict(ckpt.backend)
    loop.load_state_dict(ckpt.loop)
    kept = [row for row in rows if int(row.get("step", -1)) <= ckpt.step]
    if len(kept) != len(rows) or metrics_path.read_bytes().count(b"\n") != len(rows):
        rewrite_jsonl(metrics_path, kept)
    return ckpt.step
