"""Train-loop checkpoints: loop, allocator and backend state, written atomically, last N kept.

A checkpoint is one folder ``checkpoints/step_00000012/`` holding ``loop.json`` (loop counters
and the allocator's JSON state, human-readable) and ``backend.json`` + ``backend.npz`` (whatever
the backend's ``state_dict()`` returns, in :mod:`rollcli.store.datafile`'s data-only format:
JSON structure, numpy arrays read with ``allow_pickle=False``, tensors stored as arrays). No
file of a checkpoint is a pickle, so a checkpoint folder copied from elsewhere (run folders live
on shared cluster file systems) cannot run code when a job resumes from it. Pickled checkpoints
of older versions (``backend.pkl``) are not read: such a job starts over, with a warning.

It is assembled in a hidden temporary folder and renamed into place, so a crash at any instant
leaves either the complete checkpoint or none, and older ones are pruned only after the new
one is complete. A checkpoint that is torn anyway (a truncated file on a failing disk, a partial
copy) is skipped with a one-line warning and the previous one is used.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcli.store.atomic import atomic_write_json, read_json
from rollcli.store.datafile import DataFileError, load_data, save_data

log = logging.getLogger(__name__)

__all__ = [
    "Checkpoint",
    "CHECKPOINT_DIR",
    "list_checkpoints",
    "load_latest_checkpoint",
    "save_checkpoint",
]

CHECKPOINT_DIR = "checkpoints"
FORMAT_VERSION = 2  # 1: backend.pkl (pickle; no longer read)
_NAME = re.compile(r"^step_(\d{8})$")


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint: the step it was taken after and the three states."""

    step: int
    loop: dict[str, Any]
    allocator: dict[str, Any]
    backend: Any
    path: Path


def _step_dir(root: Path, step: int) -> Path:
    return root / f"step_{step:08d}"


def list_checkpoints(job_dir: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """Complete checkpoints of a job, oldest first (temporary folders are ignored)."""
    root = Path(job_dir) / CHECKPOINT_DIR
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        match = _NAME.match(child.name)
        if match and (child / "loop.json").is_file():
            found.append((int(match.group(1)), child))
    return sorted(found)


def save_checkpoint(
    job_dir: str | os.PathLike[str],
    *,
    step: int,
    loop: Mapping[str, Any],
    allocator: Mapping[str, Any],
    backend: Any,
    keep: int = 2,
) -> Path:
    """Write the checkpoint taken after ``step`` and prune all but the newest ``keep``."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    root = Path(job_dir) / CHECKPOINT_DIR
    root.mkdir(parents=True, exist_ok=True)
    final = _step_dir(root, step)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=root))
    try:
        save_data(tmp, "backend", backend)
        atomic_write_json(
            tmp / "loop.json",
            {"format": FORMAT_VERSION, "step": step, "loop": dict(loop), "allocator": allocator},
        )
        if final.exists():  # re-taking the same step (a stop right after a periodic save)
            shutil.rmtree(final)
        os.replace(tmp, final)
        _fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for _, old in list_checkpoints(job_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    for stale in root.glob(".step_*.tmp"):  # left by a crash mid-save
        shutil.rmtree(stale, ignore_errors=True)
    return final


def load_checkpoint(path: Path) -> Checkpoint:
    """Read one checkpoint folder; raises :class:`DataFileError` when it is torn or foreign."""
    try:
        meta = read_json(path / "loop.json")
    except (OSError, ValueError, RecursionError) as error:
        raise DataFileError(f"{path / 'loop.json'}: unreadable ({error})") from error
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_VERSION:
        version = meta.get("format") if isinstance(meta, dict) else None
        raise DataFileError(f"{path}: checkpoint format {version!r} is not {FORMAT_VERSION}")
    try:
        step, loop, allocator = int(meta["step"]), dict(meta["loop"]), dict(meta["allocator"])
    except (KeyError, TypeError, ValueError) as error:
        raise DataFileError(f"{path / 'loop.json'}: malformed ({error})") from error
    return Checkpoint(step, loop, allocator, load_data(path, "backend"), path)


def load_latest_checkpoint(job_dir: str | os.PathLike[str]) -> Checkpoint | None:
    """The newest checkpoint that reads back whole, or None when the job has none.

    A torn or foreign newest checkpoint is skipped with a one-line warning (it is left on disk
    for inspection and replaced by the next save); the previous complete one is used.
    """
    for _, path in reversed(list_checkpoints(job_dir)):
        try:
            return load_checkpoint(path)
        except DataFileError as error:
            log.warning("skipping checkpoint %s: %s", path, error)
    return None


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
