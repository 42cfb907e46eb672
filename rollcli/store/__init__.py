"""The run store: experiment folders, manifests, job state, metrics and checkpoints on disk."""

from rollcli.store.layout import (
    find_job,
    job_dir,
    load_job_config,
    load_manifest,
    prepare_run,
)
from rollcli.store.lock import RunLock, lock_holder
from rollcli.store.state import read_state, set_status, update_state

__all__ = [
    "RunLock",
    "find_job",
    "job_dir",
    "load_job_config",
    "load_manifest",
    "lock_holder",
    "prepare_run",
    "read_state",
    "set_status",
    "update_state",
]
