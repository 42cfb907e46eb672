"""Rotate whole verl checkpoint folders, rollcli's own state in them included.

verl rotates only what its checkpoint managers wrote (``global_step_N/actor``), and only the
paths saved by the running process: the rest of each ``global_step_N`` folder — rollcli's
rollout rows and allocator state (``rollcli/``) and verl's ``data.pt`` — and every folder of an
earlier attempt (a requeued job) stays for ever. For Pilot-Commit at 8k-token responses the
retained rows alone are gigabytes per checkpoint. :func:`prune_step_folders` keeps the newest
``keep`` folders (verl's ``trainer.max_actor_ckpt_to_keep``; ``None`` keeps all, as eval jobs
need) and never the one ``latest_checkpointed_iteration.txt`` names. No verl import here.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

__all__ = ["prune_step_folders", "step_folders"]

_STEP = re.compile(r"^global_step_(\d+)$")
TRACKER = "latest_checkpointed_iteration.txt"


def step_folders(root: Path) -> list[tuple[int, Path]]:
    """``(step, folder)`` of every ``global_step_N`` folder under ``root``, oldest first."""
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        match = _STEP.match(path.name)
        if match and path.is_dir():
            found.append((int(match.group(1)), path))
    return sorted(found)


def prune_step_folders(root: Path, keep: int | None) -> list[Path]:
    """Delete all but the newest ``keep`` step folders under ``root`` (never the latest one the
    tracker file names); returns what was deleted. ``keep`` None or < 1: nothing is deleted."""
    if keep is None or int(keep) < 1:
        return []
    tracker = root / TRACKER
    latest = tracker.read_text().strip() if tracker.is_file() else ""
    removed = []
    for step, path in step_folders(root)[: -int(keep)]:
        if str(step) == latest:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed
