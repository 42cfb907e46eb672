"""Weights & Biases tracking of train and eval jobs.

``create_tracker(job_config, job_dir)`` returns a callable that the train loop calls with every
metrics row (docs/CONTRACTS.md §4) and a ``finish()``. Runs are grouped by experiment, typed by job
(train/eval), carry the resolved job config, and have a deterministic id (a hash of the experiment
and the job id: experiments that share a job, such as a common GRPO baseline, get a run each) with
``resume="allow"``, so a resumed job continues the same W&B run. Row keys reach W&B in namespaces
(:func:`wandb_key`: ``rollouts/cumulative`` for ``cum_rollouts``, ``reward/zero_var_frac``...);
``metrics.jsonl`` keeps its own names. Mode ``auto`` is online when an API key is configured
(``WANDB_API_KEY`` or a netrc entry for the W&B host) and the W&B host can be reached, and logs
nothing otherwise; ``offline`` logs to files for a later ``wandb sync``; ``disabled`` logs
nothing. W&B files live in ``<job>/wandb/`` and hold no link out of it. wandb is imported only
here and in :mod:`rollcli.analysis.wandb_results`, lazily.
"""

from __future__ import annotations

import hashlib
import math
import netrc
import os
import shutil
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
    "wandb_key",
    "init_run",
    "keep_inside",
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
    ``disabled`` (nothing is written: offline runs in every job folder cost CPU and disk that
    nobody asked for; ask with ``offline``), as it is where wandb is not installed (the light
    core: the `wandb` extra); other modes pass through."""
    mode = (mode or "auto").lower()
    if mode not in _MODES:
        raise ValueError(f"tracking.wandb.mode must be one of {', '.join(_MODES)}, got {mode!r}")
    if mode == "auto":
        from rollcli.extras import missing_modules

        if missing_modules("wandb"):
            return "disabled"
        return "online" if is_logged_in() and can_reach_wandb() else "disabled"
    return mode


def wandb_run_id(job_id: str, experiment: str) -> str:
    """The W&B run id of a job in an experiment: stable across machines, resumes and re-runs.

    Job ids leave the experiment out (two experiments with the same GRPO baseline share its job
    id), so the id hashes both: otherwise the second experiment would resume the first's run and
    its rows would be dropped from its own group."""
    return hashlib.sha256(f"rollcli-job:{experiment}/{job_id}".encode()).hexdigest()[:16]


def wandb_settings(job_config: Mapping[str, Any]) -> dict[str, Any]:
    return dict(((job_config.get("tracking") or {}).get("wandb")) or {})


# metrics.jsonl's top-level keys (docs/CONTRACTS.md §4) -> their W&B section/name; keys that
# already hold a "/" (eval/, time/, alloc/, train/) keep theirs
_WANDB_KEYS = {
    "cum_rollouts": "rollouts/cumulative",
    "step_rollouts": "rollouts/step",
    "cum_rollouts_trained": "rollouts/trained_cumulative",
    "rollouts_trained": "rollouts/trained",
    "cum_tokens": "tokens/cumulative",
    "step_tokens": "tokens/step",
    "reward_mean": "reward/mean",
    "reward_var": "reward/var_trained",
    "gen_reward_var": "reward/var_generated",
    "zero_var_frac": "reward/zero_var_frac",
    "prompts_trained": "pool/prompts_trained",
    "groups_informative": "pool/groups_informative",
    "evicted": "pool/evicted",
    "deferred": "pool/deferred",
    "epoch": "pool/epoch",
    "policy_version": "pool/policy_version",
    "wall_s": "time/wall_s",
}
_WANDB_PREFIXES = ("rollouts_", "tokens_")  # the breakdown: rollouts_decision -> rollouts/decision


def wandb_key(key: str) -> str:
    """The W&B name of a metrics-row key: every key lands in a section (``rollouts/``,
    ``tokens/``, ``reward/``, ``pool/``, ``time/``, ``eval/``, ``alloc/``, ``train/``; a key
    rollcli does not know goes to ``other/``)."""
    if "/" in key:
        return key
    if key in _WANDB_KEYS:
        return _WANDB_KEYS[key]
    for prefix in _WANDB_PREFIXES:
        if key.startswith(prefix):
            return f"{prefix[:-1]}/{key[len(prefix) :]}"
    return f"other/{key}"


def _loggable(row: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key == "step":  # the W&B step itself
            continue
        if isinstance(value, bool):
            out[wandb_key(key)] = int(value)
        elif isinstance(value, (int, float)):
            if isinstance(value, float) and not math.isfinite(value):
                continue
            out[wandb_key(key)] = value
        elif isinstance(value, str):
            out[wandb_key(key)] = value
    return out


def keep_inside(wandb_dir: str | Path) -> None:
    """Replace every symlink under ``wandb_dir`` by a copy of its file (or drop it when the
    file is gone): wandb-core links ``logs/debug-core.log`` to its own log under ``~/.cache``,
    and a run folder must hold its files, not point out of itself."""
    root = Path(wandb_dir)
    if not root.is_dir() or root.is_symlink():
        return
    # os.walk never descends through a link (Path.rglob does before Python 3.13)
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = Path(folder, name)
            if not path.is_symlink():
                continue
            target = path.resolve()
            path.unlink()
            if target.is_file():
                tmp = path.with_name(f".{path.name}.tmp")
                shutil.copyfile(target, tmp)
                os.replace(tmp, path)


class WandbTracker:
    """A live wandb run; every metrics row is logged at its ``step``."""

    def __init__(self, run: Any, mode: str, wandb_dir: Path | None = None) -> None:
        self.run = run
        self.mode = mode
        self.wandb_dir = wandb_dir  # <job>/wandb, cleaned of links out of it on finish
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
            if self.wandb_dir is not None:
                keep_inside(self.wandb_dir)
            self.run = None


def _init(wandb: Any, mode: str, kwargs: dict[str, Any]) -> Any:
    # symlink=False: no latest-run/debug.log links next to the runs
    settings = wandb.Settings(silent=True, console="off", x_disable_stats=True, symlink=False)
    return wandb.init(mode=mode, settings=settings, reinit="create_new", **kwargs)


def init_run(cfg: Mapping[str, Any], kwargs: dict[str, Any]) -> tuple[Any, str] | None:
    """Open a W&B run with the spec's ``tracking.wandb`` settings ``cfg`` and ``wandb.init``
    keyword arguments; returns ``(run, mode)``, or None when the mode logs nothing. The mode is
    resolved (an unknown one raises) before anything is created; in mode ``auto`` a failed
    online start logs nothing (with a note) instead of failing the job."""
    mode = resolve_mode(cfg.get("mode"))
    if mode == "disabled":
        return None
    import wandb

    Path(kwargs["dir"]).mkdir(parents=True, exist_ok=True)
    keep_inside(Path(kwargs["dir"]) / "wandb")  # a crashed earlier attempt's links
    try:
        return _init(wandb, mode, kwargs), mode
    except Exception as error:  # noqa: BLE001 - a network failure must not kill training
        if str(cfg.get("mode") or "auto").lower() != "auto":
            raise
        print(f"rollcli: W&B online init failed ({error}); logging nothing", file=sys.stderr)
        return None


def create_tracker(
    job_config: Mapping[str, Any], job_dir: str | Path
) -> NullTracker | WandbTracker:
    """The tracker of one job, from its resolved config (docs/CONTRACTS.md §3)."""
    cfg = wandb_settings(job_config)
    job = dict(job_config.get("job") or {})
    job_id = str(job.get("id") or Path(job_dir).name)
    job_type = str(job.get("type") or "train")
    base = f"-base{job['base_seed']}" if job.get("base_seed") is not None else ""
    name = f"{job.get('allocator', job_id)}{base}-seed{job.get('seed', 0)}"
    if job_type != "train":
        name = f"{job_type}-{name}"
    tags = [str(t) for t in (cfg.get("tags") or [])]
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
    opened = init_run(cfg, kwargs)
    if opened is None:
        return NullTracker()
    run, mode = opened
    run.define_metric("rollouts/cumulative")
    run.define_metric("eval/*", step_metric="rollouts/cumulative")
    return WandbTracker(run, mode, Path(job_dir) / "wandb")
