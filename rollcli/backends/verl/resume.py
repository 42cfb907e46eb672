"""Which verl checkpoint a job resumes from, checked before verl reads it.

verl resumes from ``checkpoints/latest_checkpointed_iteration.txt``, a number anyone with access
to the run folder can edit. :func:`trusted_latest_step` accepts it only when it is a step of this
job (``0 < step <= budget.steps``) whose ``global_step_<step>/actor`` folder exists; otherwise it
warns and falls back to the newest such folder (rewriting the tracker, atomically, so verl reads
the same), or to a fresh start (tracker removed) when there is none.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from rollcli.backends.verl.checkpoint_rotation import TRACKER
from rollcli.store.atomic import atomic_write_text
from rollcli.store.folders import JobFolder

__all__ = ["TRACKER", "trusted_latest_step"]

log = logging.getLogger(__name__)

_STEP_DIR = re.compile(r"^global_step_(\d{1,9})$")


def _complete_steps(root: Path, max_step: int) -> list[int]:
    steps = []
    if root.is_dir():
        for folder in root.iterdir():
            match = _STEP_DIR.match(folder.name)
            if match and 0 < int(match.group(1)) <= max_step and (folder / "actor").is_dir():
                steps.append(int(match.group(1)))
    return sorted(steps)


def trusted_latest_step(job_dir: str | Path, max_step: int) -> int:
    """The step verl will resume from (0: none), after the checks in the module docstring."""
    root = JobFolder(job_dir).checkpoints
    tracker = root / TRACKER
    if not tracker.is_file():
        return 0
    text = tracker.read_bytes()[:64].decode("ascii", "replace").strip()
    complete = _complete_steps(root, max_step)
    if text.isdigit() and len(text) <= 9 and int(text) in complete:
        return int(text)
    if complete:
        log.warning(
            "%s says %r, not a complete checkpoint of this job (steps 1..%d); resuming from "
            "global_step_%d",
            tracker,
            text[:20],
            max_step,
            complete[-1],
        )
        atomic_write_text(tracker, str(complete[-1]))
        return complete[-1]
    log.warning("%s says %r and no checkpoint is complete; starting over", tracker, text[:20])
    tracker.unlink(missing_ok=True)
    return 0
