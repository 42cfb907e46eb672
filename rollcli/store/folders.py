"""The run folder and the job folder as objects: the one place that names their files.

::

    runs/<experiment>/             RunFolder
      manifest.json  spec.yaml  .lock  sweep.json  report/  slurm/
      jobs/<id>/                   JobFolder
        config.yaml  state.json  metrics.jsonl  checkpoints/  eval/  logs/{stdout,stderr}.log
        .cancel-requested  .state.lock  verl/

Every package that reads or writes these files asks these objects for their paths (docs/
CONTRACTS.md §5), so a file name is spelled once. They only name paths and read the job config;
what is inside each file belongs to its writer (``store.state``, ``store.layout``, the train loop).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcli.errors import StoreError

__all__ = ["JobFolder", "RunFolder", "JOB_SUBDIRS"]

JOB_SUBDIRS = ("checkpoints", "eval", "logs")


@dataclass(frozen=True)
class JobFolder:
    """``runs/<experiment>/jobs/<id>/``: one job's files."""

    path: Path

    def __init__(self, path: str | os.PathLike[str]) -> None:
        object.__setattr__(self, "path", Path(path))

    def __fspath__(self) -> str:
        return str(self.path)

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def run(self) -> RunFolder:
        """The run folder this job belongs to."""
        return RunFolder(self.path.parent.parent)

    def sibling(self, job_id: str) -> JobFolder:
        """Another job of the same run (an eval job's train job)."""
        return JobFolder(self.path.parent / job_id)

    # -- files ----------------------------------------------------------------------------
    @property
    def config(self) -> Path:
        """``config.yaml``: written by the plan, read by the job (CONTRACTS §3)."""
        return self.path / "config.yaml"

    @property
    def state(self) -> Path:
        """``state.json``: status, attempts, executor handle (``rollcli.store.state``)."""
        return self.path / "state.json"

    @property
    def state_lock(self) -> Path:
        return self.path / ".state.lock"

    @property
    def metrics(self) -> Path:
        """``metrics.jsonl``: one row per step (CONTRACTS §4), append-only."""
        return self.path / "metrics.jsonl"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def eval(self) -> Path:
        """Per-sample evaluation results."""
        return self.path / "eval"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def stdout_log(self) -> Path:
        return self.logs / "stdout.log"

    @property
    def stderr_log(self) -> Path:
        return self.logs / "stderr.log"

    def log(self, stream: str) -> Path:
        """``logs/<stream>.log`` for ``stdout`` or ``stderr``."""
        if stream not in ("stdout", "stderr"):
            raise ValueError(f"no log stream '{stream}' (valid: stdout, stderr)")
        return self.logs / f"{stream}.log"

    @property
    def cancel_request(self) -> Path:
        """Left by ``rollcli cancel`` for a Slurm task, so it does not requeue itself."""
        return self.path / ".cancel-requested"

    @property
    def verl(self) -> Path:
        """The verl backend's own files (data parquets, overrides, stop file, trace)."""
        return self.path / "verl"

    # -- reading --------------------------------------------------------------------------
    def read_config(self) -> dict[str, Any]:
        """``config.yaml`` as a mapping; a clear error when it is missing or not a mapping."""
        import yaml

        try:
            text = self.config.read_text("utf-8")
        except FileNotFoundError:
            raise StoreError(
                f"{self.config}: missing job config (is {self.path} a job folder? "
                "rerun `rollcli run SPEC` to write it)"
            ) from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise StoreError(f"{self.config}: not valid YAML ({error})") from None
        if not isinstance(data, dict):
            raise StoreError(f"{self.config}: expected a mapping, found {type(data).__name__}")
        return data

    def make(self) -> JobFolder:
        """Create the folder and its subfolders (idempotent)."""
        for sub in JOB_SUBDIRS:
            (self.path / sub).mkdir(parents=True, exist_ok=True)
        return self


@dataclass(frozen=True)
class RunFolder:
    """``runs/<experiment>/``: the manifest, the resolved spec, the lock and the job folders."""

    path: Path

    def __init__(self, path: str | os.PathLike[str]) -> None:
        object.__setattr__(self, "path", Path(path))

    def __fspath__(self) -> str:
        return str(self.path)

    @property
    def manifest(self) -> Path:
        return self.path / "manifest.json"

    @property
    def spec(self) -> Path:
        """``spec.yaml``: the resolved spec."""
        return self.path / "spec.yaml"

    @property
    def lock(self) -> Path:
        """Held by the orchestrating ``rollcli run``."""
        return self.path / ".lock"

    @property
    def sweep(self) -> Path:
        """``sweep.json``: a sweep's points and the job ids that answer each."""
        return self.path / "sweep.json"

    @property
    def variant(self) -> Path:
        """``variant.json``: the folder this variant differs from, and how (store/variants.py)."""
        return self.path / "variant.json"

    @property
    def is_sweep(self) -> bool:
        return self.sweep.is_file()

    @property
    def report(self) -> Path:
        """Written by ``rollcli report`` (and the ablation of ``rollcli sweep``)."""
        return self.path / "report"

    @property
    def slurm(self) -> Path:
        """submitit's scripts, pickles and task logs."""
        return self.path / "slurm"

    @property
    def jobs(self) -> Path:
        return self.path / "jobs"

    def job(self, job_id: str) -> JobFolder:
        return JobFolder(self.jobs / job_id)

    def job_folders(self) -> list[JobFolder]:
        """Every job folder present, in name order."""
        if not self.jobs.is_dir():
            return []
        return [JobFolder(p) for p in sorted(self.jobs.iterdir()) if p.is_dir()]
