"""Export a verl checkpoint of a rollcli job as a Hugging Face model folder (verl's model merger).

``export_hf(job_dir, out_dir, step=None)`` merges the FSDP shards of
``<job>/checkpoints/global_step_<step>/actor`` (the newest step by default) into a folder that
``transformers`` and vLLM load directly (``rollcli eval`` evaluates any of them afterwards). The
merge runs on CPU in this process. The export is written to a sibling folder and renamed into
place, so a crash never leaves a half-written model at ``out_dir``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from rollcli.errors import RollcliError
from rollcli.store.folders import JobFolder

__all__ = ["ExportError", "actor_dir", "checkpoint_steps", "export_hf"]


class ExportError(RollcliError):
    """No checkpoint to export, or the merge failed."""


def actor_dir(job_dir: str | Path, step: int) -> Path:
    """verl's actor checkpoint of ``step``: ``<job>/checkpoints/global_step_<step>/actor``."""
    return JobFolder(job_dir).checkpoints / f"global_step_{step}" / "actor"


def checkpoint_steps(job_dir: str | Path) -> list[int]:
    """Steps that have an actor checkpoint, ascending."""
    root = JobFolder(job_dir).checkpoints
    steps = []
    for folder in root.glob("global_step_*"):
        match = re.fullmatch(r"global_step_(\d+)", folder.name)
        if match and (folder / "actor").is_dir():
            steps.append(int(match.group(1)))
    return sorted(steps)


def export_hf(job_dir: str | Path, out_dir: str | Path, *, step: int | None = None) -> Path:
    """Merge one checkpoint of a verl job into a Hugging Face folder at ``out_dir``."""
    steps = checkpoint_steps(job_dir)
    if not steps:
        raise ExportError(
            f"{job_dir} has no verl actor checkpoint (checkpoints/global_step_*/actor)"
        )
    if step is None:
        step = steps[-1]
    elif step not in steps:
        raise ExportError(f"{job_dir} has no checkpoint of step {step}; it has {steps}")
    actor = actor_dir(job_dir, step)
    from verl.model_merger.base_model_merger import ModelMergerConfig
    from verl.model_merger.fsdp_model_merger import FSDPModelMerger

    out = Path(out_dir)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    config = ModelMergerConfig(
        operation="merge",
        backend="fsdp",
        local_dir=str(actor),
        target_dir=str(tmp),
        hf_model_config_path=str(actor / "huggingface"),
    )
    merger = FSDPModelMerger(config)
    try:
        merger.merge_and_save()
    except Exception as error:
        raise ExportError(f"merging {actor} failed: {error}") from error
    finally:
        merger.cleanup()
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return out
