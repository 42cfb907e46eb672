"""Train jobs (``rollcli.jobs.train``): the config read once, verl handed to its own trainer."""

from __future__ import annotations

import sys
import threading
import types
from pathlib import Path

import pytest
import yaml

from rollcli.errors import StoreError
from rollcli.jobs.config import JobConfigError
from rollcli.jobs.train import run_train_job
from rollcli.testing.train_jobs import write_job


def test_verl_jobs_are_delegated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = write_job(tmp_path / "v", backend={"kind": "verl", "model": "x"})
    calls = []
    fake = types.ModuleType("rollcli.backends.verl")
    fake.run_train_job = lambda job_dir, job, stop=None, callbacks=(): calls.append(  # type: ignore[attr-defined]
        (job_dir, job["backend"], stop, tuple(callbacks))
    )
    monkeypatch.setitem(sys.modules, "rollcli.backends.verl", fake)
    stop, callback = threading.Event(), print
    run_train_job(job, stop=stop, callbacks=[callback])
    assert calls == [(job, {"kind": "verl", "model": "x"}, stop, (callback,))]
    assert not (job / "metrics.jsonl").exists()


def test_bad_configs_fail_clearly(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="missing job config"):
        run_train_job(tmp_path)
    (tmp_path / "config.yaml").write_text("job: {seed: 0}\n")
    with pytest.raises(JobConfigError, match="config.yaml: missing section 'backend'"):
        run_train_job(tmp_path)
    job = write_job(tmp_path / "b", steps=0)
    with pytest.raises(JobConfigError, match="budget.steps: must be >= 1, got 0"):
        run_train_job(job)
    job = write_job(tmp_path / "c", steps=2)
    config = yaml.safe_load((job / "config.yaml").read_text())
    config["checkpoint"]["every"] = "often"
    (job / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(JobConfigError, match="checkpoint.every: expected an integer"):
        run_train_job(job)
    (job / "config.yaml").write_text("job: {type: sweep}\n")
    with pytest.raises(JobConfigError, match="job.type: unknown job type 'sweep'"):
        run_train_job(job)
