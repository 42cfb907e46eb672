"""Whether a folder is visible from every node: the run folder and the Hugging Face cache of a
Slurm run must be on a shared file system.

A Slurm job's tasks read their config and write their checkpoints and metrics in the run
folder, and ``rollcli`` on the login node reads them back; a folder under ``/tmp`` (or any
tmpfs) exists once per node, so the jobs would start on an empty folder. :func:`node_local_reason`
refuses such paths by prefix (``/tmp``, ``/var/tmp``, ``/dev/shm``, ``/run``, ...) and by file
system type (``tmpfs``, ``ramfs``). :func:`filesystem_of` names the mount and its type for
``rollcli doctor`` (network types such as nfs, lustre, gpfs, beegfs, cephfs count as shared;
a local disk type cannot be told apart from a shared one by its name and is reported as such).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "ALLOW_ENV",
    "NODE_LOCAL_PREFIXES",
    "SHARED_TYPES",
    "filesystem_of",
    "node_local_reason",
]

ALLOW_ENV = "ROLLCLI_ALLOW_NODE_LOCAL_RUN_DIR"  # one-machine clusters (tests, a workstation)
NODE_LOCAL_PREFIXES = ("/tmp", "/var/tmp", "/dev/shm", "/run", "/scratch/local", "/lscratch")
NODE_LOCAL_TYPES = ("tmpfs", "ramfs", "devtmpfs")
SHARED_TYPES = (
    "nfs", "nfs4", "lustre", "gpfs", "beegfs", "cephfs", "ceph", "glusterfs", "fuse.glusterfs",
    "panfs", "wekafs", "cifs", "smb3", "fuse.juicefs", "fuse.sshfs", "9p", "virtiofs",
)  # fmt: skip


def _absolute(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def filesystem_of(
    path: str | os.PathLike[str], mountinfo: Path = Path("/proc/self/mountinfo")
) -> tuple[str, str]:
    """``(mount point, file system type)`` of the mount holding ``path`` (the nearest existing
    parent counts for a folder not made yet); ``("?", "?")`` when mountinfo is unreadable."""
    target = _absolute(path)
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return "?", "?"
    best = ("?", "?")
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or not tail:
            continue
        point = fields[4].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[0] if best[0] != "?" else ""):
            best = (point, tail[0])  # later lines of the same point shadow earlier ones
    return best


def node_local_reason(
    path: str | os.PathLike[str], mountinfo: Path = Path("/proc/self/mountinfo")
) -> str | None:
    """Why ``path`` exists once per node (a node-local prefix or a memory file system), or
    None when nothing says so."""
    target = _absolute(path)
    for prefix in NODE_LOCAL_PREFIXES:
        if target == prefix or target.startswith(prefix + "/"):
            return f"it is under {prefix}, which is local to each node"
    point, kind = filesystem_of(target, mountinfo)
    if kind in NODE_LOCAL_TYPES:
        return f"it is on {kind} ({point}), which is local to each node"
    return None
