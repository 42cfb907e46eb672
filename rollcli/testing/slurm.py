"""Test support for the real local Slurm cluster (``bash scripts/slurm-local.sh start``)."""

from __future__ import annotations

import subprocess

__all__ = ["cluster_answers", "NO_CLUSTER_REASON"]

NO_CLUSTER_REASON = (
    "no Slurm cluster answers `sinfo` (start one: sudo bash scripts/slurm-local.sh start)"
)


def cluster_answers() -> bool:
    """Whether ``sinfo`` answers within 5 s (a cluster is up and this host can reach it)."""
    try:
        proc = subprocess.run(["sinfo", "-h"], capture_output=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0
