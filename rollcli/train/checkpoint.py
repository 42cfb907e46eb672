"""Train-loop checkpoints: loop, allocator and backend state, written atomically, last N kept.

A checkpoint is one folder ``checkpoints/step_00000012/`` holding ``loop.json`` (loop counters
and the allocator's JSON state, human-readable) and ``backend.pkl`` (whatever the backend's
``state_dict()`` returns: numpy arrays for sim, tensors for tiny). It is assembled in a hidden
temporary folder and renamed into place, so a crash at any instant leaves either the complete
checkpoint or none; readers only ever see complete ones. Pickles are read back with an
unpickler that only resolves numpy, torch and builtin container types: these files are ours,
but a checkpoint folder copied from elsewhere should not be able to run code.
"""

from __future__ import annotations

import io
import os
import pickle
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcli.store.atomic import atomic_write_bytes, atomic_write_json, read_json

__all__ = [
    "Checkpoint",
    "CHECKPOINT_DIR",
    "list_checkpoints",
    "load_latest_checkpoint",
    "save_checkpoint",
]

CHECKPOINT_DIR = "checkpoints"
FORMAT_VERSION = 1
_NAME = re.compile(r"^step_(\d{8})$")
_SAFE_MODULES = ("numpy", "torch", "collections", "_codecs", "copyreg")
_SAFE_BUILTINS = {
    "dict",
    "list",
    "tuple",
    "set",
    "frozenset",
    "int",
    "float",
    "complex",
    "bool",
    "str",
    "bytes",
    "bytearray",
    "slice",
    "range",
}


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint: the step it was taken after and the three states."""

    step: int
    loop: dict[str, Any]
    allocator: dict[str, Any]
    backend: Any
    path: Path


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        top = module.split(".")[0]
        if top in _SAFE_MODULES or (module == "builtins" and name in _SAFE_BUILTINS):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"checkpoint refers to {module}.{name}, which is not allowed")


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
        if match and (child / "loop.json").is_file() and (child / "backend.pkl").is_file():
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
        atomic_write_bytes(tmp / "backend.pkl", pickle.dumps(backend, protocol=5))
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


def load_latest_checkpoint(job_dir: str | os.PathLike[str]) -> Checkpoint | None:
    """The newest complete checkpoint, or None when the job has none."""
    found = list_checkpoints(job_dir)
    if not found:
        return None
    step, path = found[-1]
    meta = read_json(path / "loop.json")
    if meta.get("format") != FORMAT_VERSION:
        raise ValueError(f"{path}: unknown checkpoint format {meta.get('format')!r}")
    backend = _RestrictedUnpickler(io.BytesIO((path / "backend.pkl").read_bytes())).load()
    return Checkpoint(
        step=int(meta["step"]),
        loop=meta["loop"],
        allocator=meta["allocator"],
        backend=backend,
        path=path,
    )


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
