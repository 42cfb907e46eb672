"""What the Slurm controller and accounting say: job states, the cluster's array limit.

Every call runs one Slurm client command with a timeout and answers None when it is missing,
hangs or fails, so callers fall back to the run folder's own records (``state.json`` is the
source of truth; these add what only Slurm knows). ``sacct`` lags and keeps requeued attempts;
``squeue`` knows only queued and running tasks.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence

__all__ = [
    "DEFAULT_MAX_ARRAY_SIZE",
    "SLURM_FAILED",
    "SLURM_PENDING",
    "SLURM_RUNNING",
    "read_max_array_size",
    "run_slurm",
    "sacct_states",
    "squeue_states",
]

DEFAULT_MAX_ARRAY_SIZE = 1001  # Slurm's default MaxArraySize
SLURM_PENDING = frozenset(
    {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SUSPENDED"}
)
SLURM_RUNNING = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING"})
SLURM_FAILED = frozenset(
    {"FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}
)


def run_slurm(cmd: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str] | None:
    """Run a Slurm client command; None when it is missing, hangs past ``timeout`` or fails."""
    try:
        proc = subprocess.run(
            list(cmd), capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc if proc.returncode == 0 else None


def read_max_array_size(timeout: float = 10.0) -> int:
    """The cluster's ``MaxArraySize`` (from ``scontrol show config``), Slurm's default if unknown."""
    proc = run_slurm(["scontrol", "show", "config"], timeout)
    if proc is not None:
        match = re.search(r"^MaxArraySize\s*=\s*(\d+)", proc.stdout, re.MULTILINE)
        if match:
            return int(match.group(1))
    return DEFAULT_MAX_ARRAY_SIZE


def sacct_states(slurm_ids: Sequence[str], timeout: float = 10.0) -> dict[str, str] | None:
    """``{"<array>_<task>" or "<job>": STATE}`` for the given job/array ids from one sacct call,
    or None when sacct is unavailable (not installed, no slurmdbd, hanging)."""
    from submitit.slurm.slurm import SlurmInfoWatcher

    bases = sorted({str(i).split("_")[0] for i in slurm_ids})
    if not bases:
        return {}
    cmd = ["sacct", "-X", "--parsable2", "-o", "JobID,State,ExitCode"]
    for base in bases:
        cmd += ["-j", base]
    proc = run_slurm(cmd, timeout)
    if proc is None:
        return None
    info = SlurmInfoWatcher().read_info(proc.stdout)
    return {job_id: (row.get("State") or "UNKNOWN").split()[0] for job_id, row in info.items()}


def squeue_states(slurm_ids: Sequence[str], timeout: float = 10.0) -> dict[str, str] | None:
    """Queued and running tasks among the given ids, from slurmctld (no accounting lag); tasks
    that left the queue are absent. None when squeue does not answer."""
    from submitit.slurm.slurm import read_job_id

    bases = sorted({str(i).split("_")[0] for i in slurm_ids})
    if not bases:
        return {}
    proc = run_slurm(["squeue", "-h", "-j", ",".join(bases), "-o", "%i|%T"], timeout)
    if proc is None:
        return None
    states: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        if "|" not in line:
            continue
        job_id, state = line.strip().split("|", 1)
        try:
            parts = read_job_id(job_id)
        except Exception:  # noqa: BLE001 - an id format we do not know: skip the line
            continue
        for part in parts:
            states["_".join(part[:2])] = state
            if len(part) >= 3:
                for index in range(int(part[1]), int(part[2]) + 1):
                    states[f"{part[0]}_{index}"] = state
    return states
