"""Progress records of the nodes joining a job's Ray cluster, and the error when one does not.

Every task of a multi-node job writes ``<job>/ray/node<rank>-<session>.json`` as it goes
(``head``; ``waiting-for-head``; ``joining`` once its ``ray start`` runs; ``failed`` with the
reason), on the job folder every node shares. The head reads them while it waits, so a failed
worker fails the job at once, and a node that never joins is named in the timeout's message with
what it was last doing — or that it never started at all (its Slurm task did not run).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rollcli.store.atomic import atomic_write_json

__all__ = ["write_status", "read_statuses", "join_report", "log_tail"]


def _status_path(ray_dir: Path, rank: int, session: str) -> Path:
    return ray_dir / f"node{rank}-{session}.json"


def write_status(ray_dir: Path, *, rank: int, host: str, session: str, stage: str, **info: Any):
    """Record that node ``rank`` reached ``stage`` (atomic; ``since`` is wall-clock seconds)."""
    ray_dir.mkdir(parents=True, exist_ok=True)
    record = {"rank": rank, "host": host, "stage": stage, "since": time.time(), **info}
    atomic_write_json(_status_path(ray_dir, rank, session), record)


def read_statuses(ray_dir: Path, session: str, ranks: Iterable[int]) -> dict[int, dict[str, Any]]:
    """The latest record of each of ``ranks`` that wrote one."""
    out: dict[int, dict[str, Any]] = {}
    for rank in ranks:
        try:
            out[rank] = json.loads(_status_path(ray_dir, rank, session).read_text("utf-8"))
        except (OSError, ValueError):
            continue
    return out


def log_tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of a log ('' when it cannot be read)."""
    try:
        text = path.read_text("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _describe(rank: int, host: str, record: Mapping[str, Any] | None, now: float) -> str:
    if record is None:
        return f"rank {rank} ({host}): no word from its task (did its Slurm task start?)"
    ago = max(0.0, now - float(record.get("since", now)))
    stage = record.get("stage")
    if stage == "failed":
        return str(record.get("reason") or f"rank {rank} ({host}) failed")
    if stage == "waiting-for-head":
        why = record.get("reason") or "the head has not written its address yet"
        return f"rank {rank} ({host}): waiting for the head for {ago:.0f}s: {why}"
    if stage == "joining":
        return (
            f"rank {rank} ({host}, {record.get('ip')}): its `ray start` has run for {ago:.0f}s "
            f"but the node never registered with the head at {record.get('head')}"
        )
    return f"rank {rank} ({host}): last stage '{stage}' {ago:.0f}s ago"


def join_report(
    *,
    hostnames: tuple[str, ...],
    joined: Mapping[int, Mapping[str, Any]],
    statuses: Mapping[int, Mapping[str, Any]],
    waited_s: float,
    ray_dir: Path,
    session: str,
) -> str:
    """The error of a cluster that is not complete: who joined, who did not and why."""
    now = time.time()
    have = ", ".join(f"{n['host']} {n['ip']}" for _, n in sorted(joined.items()))
    missing = [r for r in range(len(hostnames)) if r not in joined]
    lines = [
        f"the job's Ray cluster is incomplete after {waited_s:.0f}s: {len(joined)} of "
        f"{len(hostnames)} nodes joined ({have or 'none'}); missing:"
    ]
    lines += ["  " + _describe(r, hostnames[r], statuses.get(r), now) for r in missing]
    logs = [str(p) for r in missing if (p := ray_dir / f"worker{r}-{session}.log").exists()]
    if logs:
        lines.append("Ray's own logs: " + ", ".join(logs))
    lines.append(
        "(the wait is ROLLCLI_RAY_JOIN_TIMEOUT seconds; docs/slurm.md lists the ports that "
        "must be open between nodes)"
    )
    return "\n".join(lines)
