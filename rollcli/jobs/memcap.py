"""The memory cap every train and eval job runs under, so one job cannot take the host down.

A job that grows without bound (a resume sized by an edited number, a leak, a runaway
allocator) used to grow until the kernel's OOM killer picked a victim anywhere on the host.
:func:`apply_memory_cap` sets ``RLIMIT_AS`` on the job's process (inherited by everything it
starts) before the job runs: past it, allocations fail with ``MemoryError`` inside the job, which
is then recorded failed like any other error.

The cap is ``launch.memory_limit`` (``"64G"``; ``"0"``: no cap) when the spec sets it, else 80 %
of the machine's physical memory. Jobs whose backend runs on CUDA (verl with ``device: cuda``,
the default) get no address-space cap: the CUDA driver reserves far more virtual address space
than there is memory, so ``RLIMIT_AS`` would stop it from starting; there the cluster's cgroup
(Slurm's ``--mem``, ``launch.mem``) is the cap.
"""

from __future__ import annotations

import logging
import os
import re
import resource
from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_FRACTION", "apply_memory_cap", "memory_cap_bytes", "parse_size"]

log = logging.getLogger(__name__)

DEFAULT_FRACTION = 0.8
_UNITS = {"": 1 << 20, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}  # Slurm: MB
_SIZE = re.compile(r"^(\d+)([KMGT]?)B?$")


def parse_size(text: str) -> int:
    """Bytes of a Slurm-style size (``"64G"``, ``"512M"``, ``"2048"`` = MB); ValueError else."""
    match = _SIZE.match(str(text).strip().upper())
    if match is None:
        raise ValueError(f"not a memory size: {text!r} (e.g. '64G')")
    return int(match.group(1)) * _UNITS[match.group(2)]


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return None


def memory_cap_bytes(launch: Mapping[str, Any], backend: Mapping[str, Any]) -> int | None:
    """The job's address-space cap in bytes, or None (no cap: CUDA, or ``memory_limit: "0"``)."""
    on_cuda = backend.get("kind") == "verl" and backend.get("device", "cuda") == "cuda"
    if on_cuda or backend.get("device") == "cuda":
        return None
    limit = launch.get("memory_limit")
    if limit is not None:
        cap = parse_size(limit)
        return cap or None
    physical = _physical_memory()
    return int(physical * DEFAULT_FRACTION) if physical else None


def apply_memory_cap(launch: Mapping[str, Any], backend: Mapping[str, Any]) -> int | None:
    """Set this process's ``RLIMIT_AS`` to the job's cap (never raising an existing lower
    limit); returns the cap in force, or None."""
    cap = memory_cap_bytes(launch, backend)
    if cap is None:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft != resource.RLIM_INFINITY:
        cap = min(cap, soft)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    log.info("memory cap: %.1f GiB of address space", cap / (1 << 30))
    return cap
