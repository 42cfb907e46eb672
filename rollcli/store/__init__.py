"""The run store: experiment folders, manifests, job state, metrics and checkpoints on disk.

:class:`~rollcli.store.folders.RunFolder` and :class:`~rollcli.store.folders.JobFolder` name
every file of a run (docs/CONTRACTS.md §5); the other modules write and read them atomically.
"""

from rollcli.store.folders import JobFolder, RunFolder
from rollcli.store.layout import (
    find_job,
    job_dir,
    load_manifest,
    prepare_run,
)
from rollcli.store.lock import RunLock, lock_holder
from rollcli.store.state import read_state, set_status, update_state

__all__ = [
    "JobFolder",
    "RunFolder",
    "RunLock",
    "find_job",
    "job_dir",
    "load_manifest",
    "lock_holder",
    "prepare_run",
    "read_state",
    "set_status",
    "update_state",
]
