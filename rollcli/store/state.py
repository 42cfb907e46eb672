"""A job's ``state.json``: its status, attempts, timestamps, error tail and executor handle.

Several processes update one job's state (the orchestrating ``rollcli run``, the job itself,
``rollcli cancel``), so every update is a read-modify-write under an ``fcntl`` lock on
``.state.lock`` and the file itself is replaced atomically. Status transitions::

    pending -> running -> done | failed | cancelled
    failed | cancelled -> pending | running     (a rerun resumes from the last checkpoint)
    running -> running                          (a requeued Slurm job that restarted)

``done`` is final: a finished job is never run again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rollcli.errors import StoreError
from rollcli.store.atomic import atomic_write_json, open_nofollow, read_json
from rollcli.store.folders import JobFolder

__all__ = [
    "TRANSITIONS",
    "now",
    "read_state",
    "init_state",
    "update_state",
    "set_status",
]

TRANSITIONS: dict[str, frozenset[str]] = {
    "pending": frozenset({"running", "failed", "cancelled"}),
    "running": frozenset({"running", "done", "failed", "cancelled"}),
    "failed": frozenset({"pending", "running", "cancelled"}),
    "cancelled": frozenset({"pending", "running", "cancelled"}),
    "done": frozenset(),
}


def now() -> str:
    """UTC timestamp, ISO 8601 to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _fresh() -> dict[str, Any]:
    return {
        "status": "pending",
        "attempts": 0,
        "started": None,
        "finished": None,
        "updated": now(),
        "error_tail": None,
        "executor": None,
    }


def read_state(job_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The job's state (a fresh pending state if the file does not exist yet)."""
    path = JobFolder(job_dir).state
    try:
        state = read_json(path)
    except FileNotFoundError:
        return _fresh()
    except ValueError as error:  # never happens with atomic writes; say so clearly if it does
        raise StoreError(
            f"{path}: unreadable job state ({error}); delete it to reset the job"
        ) from None
    return {**_fresh(), **state}


@contextlib.contextmanager
def _locked(job_dir: Path) -> Iterator[None]:
    job_dir.mkdir(parents=True, exist_ok=True)
    fd = open_nofollow(JobFolder(job_dir).state_lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def init_state(job_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Create a pending state if the job has none; return the current state."""
    job_dir = Path(job_dir)
    with _locked(job_dir):
        if not JobFolder(job_dir).state.exists():
            atomic_write_json(JobFolder(job_dir).state, _fresh())
        return read_state(job_dir)


def update_state(job_dir: str | os.PathLike[str], **changes: Any) -> dict[str, Any]:
    """Merge ``changes`` into the state (no status check); returns the new state."""
    job_dir = Path(job_dir)
    with _locked(job_dir):
        state = {**read_state(job_dir), **changes, "updated": now()}
        atomic_write_json(JobFolder(job_dir).state, state)
        return state


def set_status(
    job_dir: str | os.PathLike[str],
    status: str,
    *,
    only_from: frozenset[str] | set[str] | None = None,
    **changes: Any,
) -> dict[str, Any] | None:
    """Move the job to ``status`` (checked against :data:`TRANSITIONS`) and merge ``changes``.

    ``running`` counts an attempt and stamps ``started``; terminal statuses stamp ``finished``.
    With ``only_from``, a job in another status is left alone and None is returned (used to
    mark a job failed only if it still claims to be running).
    """
    job_dir = Path(job_dir)
    with _locked(job_dir):
        state = read_state(job_dir)
        current = state["status"]
        if only_from is not None and current not in only_from:
            return None
        if status not in TRANSITIONS:
            raise StoreError(f"unknown job status '{status}'")
        if status not in TRANSITIONS[current]:
            raise StoreError(
                f"{job_dir.name}: cannot go from {current} to {status}"
                + ("; the job is finished" if current == "done" else "")
            )
        state.update(changes)
        state["status"] = status
        if status == "running":
            state["attempts"] = int(state.get("attempts") or 0) + 1
            state["started"] = now()
            state["finished"] = None
            state.setdefault("error_tail", None)
            if "error_tail" not in changes:
                state["error_tail"] = None
        elif status in ("done", "failed", "cancelled"):
            state["finished"] = now()
        state["updated"] = now()
        atomic_write_json(JobFolder(job_dir).state, state)
        return state
