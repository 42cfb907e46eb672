"""Weights & Biases tracking of train and eval jobs.

``create_tracker(job_config, job_dir)`` returns a callable that the train loop calls with every
metrics row (docs/CONTRACTS.md §4) and a ``finish()``. Runs are grouped by experiment, typed by job
(train/eval), carry the resolved job config, and have a deterministic id (a hash of the experiment
and the job id: experiments that share a job, such as a common GRPO baseline, get a run each) with
``resume="allow"``, so a resumed job continues the same W&B run. Mode ``auto`` is online when an API
key is configured (``WANDB_API_KEY`` or a netrc entry for the W&B host) and the W&B host can be
reached, and offline otherwise;
``disabled`` logs nothing. W&B files live in ``<job>/wandb/``. wandb is imported only here, lazily.
"""

from __future__ import annotations

import hashlib
import math
import netrc
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

__all__ = [
    "Tracker",
    "NullTracker",
    "WandbTracker",
    "create_tracker",
    "resolve_mode",
    "can_reach_wandb",
    "is_logged_in",
    "wandb_run_id",
    "wandb_settings",
]

_MODES = ("auto", "online", "offline", "disabled")


class Tracker(Protocol):
    def __call__(self, row: dict[str, Any]) -> None: ...
    def finish(self) -> None: ...


class NullTracker:
    """Tracking switched off: accepts rows and does nothing."""

    mode = "disabled"
    run = None

    def __call__(self, row: dict[str, Any]) -> None:
        return None

    def finish(self) -> None:
        return None


def _api_host() -> str:
    base = os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai"
    return urlparse(base).hostname or "api.wandb.ai"


def is_logged_in() -> bool:
    """True when W&B has an API key: ``WANDB_API_KEY``, or a netrc entry for the W&B host."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    path = os.environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    try:
        return netrc.netrc(path).authenticators(_api_host()) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def can_reach_wandb(timeout_s: float = 3.0) -> bool:
    """True when a TCP connection to the W&B host's port 443 opens (compute nodes of many
    clusters have no internet: an online run there retries for minutes, then fails)."""
    import socket

    try:
        with socket.create_connection((_api_host(), 443), timeout=timeout_s):
            return True
    except OSError:
        return False


def resolve_mode(mode: str | None) -> str:
    """``auto`` -> ``online`` where W&B has a login AND the network reaches it, else
    ``offline`` (sync later with ``wandb sync``); other modes pass through."""
    mode = (mode or "auto").lower()
    if mode not in _MODES:
        raise ValueError(f"tracking.wandb.mode must be one of {', '.join(_MODES)}, got {mode!r}")
    if mode == "auto":
        return "online" if is_logged_in() and can_reach_wandb() else "offline"
    return mode


def wandb_run_id(job_id: str, experiment: str) -> str:
    """The W&B run id of a job in an experiment: stable across machines, resumes and re-runs.

    Job ids leave the experiment out (two experiments with the same GRPO baseline share its job
    id), so the id hashes both: otherwise the second experiment would resume the first's run and
    its rows would be dropped from its own group."""
    return hashlib.sha256(f"rollcli-job:{experiment}/{job_id}".encode()).hexdigest()[:16]


def wandb_settings(job_config: Mapping[str, Any]) -> dict[str, Any]:
    return dict(((job_config.get("tracking") or {}).get("wandb")) or {})


def _loggable(row: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in row.items():
        if isinstance(value, bool):
            out[key] = int(value)
        elif isinstance(value, (int, float)):
            if isinstance(value, float) and not math.isfinite(value):
                continue
            out[key] = value
        elif isinstance(value, str):
            out[key] = value
    return out


class WandbTracker:
    """A live wandb run; every metrics row is logged at its ``step``."""

    def __init__(self, run: Any, mode: str) -> None:
        self.run = run
        self.mode = mode
        # a resumed online run already holds steps < run.step; W&B rejects going back
        self._next_step = int(getattr(run, "step", 0) or 0)

    def __call__(self, row: dict[str, Any]) -> None:
        step = int(row.get("step", self._next_step))
        if step < self._next_step:
            return
        self.run.log(_loggable(row), step=step)
        self._next_step = step + 1

    def finish(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None


def _init(wandb: Any, mode: str, kwargs: dict[str, Any]) -> Any:
    settings = wandb.Settings(silent=True, console="off", x_disable_stats=True)
    return wandb.init(mode=mode, settings=settings, reinit="create_new", **kwargs)


def create_tracker(
    job_config: Mapping[str, Any], job_dir: str | Path
) -> NullTracker | WandbTracker:
    """The tracker of one job, from its resolved config (docs/CONTRACTS.md §3)."""
    cfg = wandb_settings(job_config)
    mode = resolve_mode(cfg.get("mode"))
    if mode == "disabled":
        return NullTracker()
    import wandb

    job = dict(job_config.get("job") or {})
    job_id = str(job.get("id") or Path(job_dir).name)
    job_type = str(job.get("type") or "train")
    base = f"-base{job['base_seed']}" if job.get("base_seed") is not None else ""
    name = f"{job.get('allocator', job_id)}{base}-seed{job.get('seed', 0)}"
    if job_type != "train":
        name = f"{job_type}-{name}"
    tags = [str(t) for t in (cfg.get("tags") or [])]
    job_dir = Path(job_dir)
    job_dir.mkdir(parents=True, exist_ok=True)
    experiment = str(job_config.get("experiment") or "rollcli")
    kwargs = dict(
        project=str(cfg.get("project") or "rollcli"),
        entity=cfg.get("entity") or None,
        group=str(cfg.get("group") or experiment),
        job_type=job_type,
        name=name,
        tags=tags or None,
        config=dict(job_config),
        id=wandb_run_id(job_id, experiment),
        resume="allow",
        dir=str(job_dir),
    )
    try:
        run = _init(wandb, mode, kwargs)
    except Exception as error:  # noqa: BLE001 - a network failure must not kill training
        if mode != "online" or cfg.get("mode") == "online":
            raise
        print(
            f"rollcli: W&B online init failed ({error}); logging offline to {job_dir}/wandb",
            file=sys.stderr,
        )
        mode = "offline"
        run = _init(wandb, mode, kwargs)
    run.define_metric("cum_rollouts")
    run.define_metric("eval/*", step_metric="cum_rollouts")
    return WandbTracker(run, mode)
