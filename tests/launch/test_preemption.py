"""Time limit and pre-emption on Slurm: the USR2 lead sized from measured step time, the
runner's checkpoint wait following it, ``launch.max_requeues`` reaching submitit, and the
expected loss per interruption that ``rollcli plan`` prints."""

from __future__ import annotations

import contextlib
import pickle
from pathlib import Path
from types import SimpleNamespace

import pytest

from rollcli.launch import slurm as slurm_module
from rollcli.launch.api import Job, Resources
from rollcli.launch.preemption import (
    DEFAULT_LEAD_S,
    PreemptionPlan,
    measured_step_seconds,
    plan_preemption,
    preemption_summary,
    signal_lead_s,
)
from rollcli.launch.slurm_runner import SlurmJobRunner
from rollcli.store.atomic import append_jsonl


def _rows(job_dir: Path, seconds: list[float]) -> None:
    rows = [{"step": 0, "eval/accuracy": 0.1}]  # the initial row has no step time
    for step, s in enumerate(seconds, start=1):
        rows.append(
            {
                "step": step,
                "time/generate_s": s * 0.7,
                "time/allocate_s": 0.0,
                "time/update_s": s * 0.3,
            }  # fmt: skip
        )
    job_dir.mkdir(parents=True, exist_ok=True)
    append_jsonl(job_dir / "metrics.jsonl", rows)


def test_step_time_is_the_90th_percentile_over_every_job(tmp_path):
    assert measured_step_seconds(tmp_path) == (None, 0)
    _rows(tmp_path / "jobs/a", [100.0] * 8)
    _rows(tmp_path / "jobs/b", [400.0, 200.0])
    step_s, n = measured_step_seconds(tmp_path)
    assert n == 10 and step_s == pytest.approx(200.0)


def test_signal_lead_covers_a_step_and_its_save():
    assert signal_lead_s({}, None, 86400) == DEFAULT_LEAD_S  # nothing measured: submitit's 90
    assert signal_lead_s({}, 300.0, 86400) == 300 + 120 + 30
    assert signal_lead_s({}, 5.0, 86400) == 5 + 120 + 30  # the save allowance stays
    assert signal_lead_s({}, 3000.0, 3600) == 1800  # at most half the time limit
    assert signal_lead_s({"signal_lead_s": 600}, 300.0, 86400) == 600  # the spec's own


def test_plan_shows_the_loss_per_interruption_and_the_requeues_needed(tmp_path):
    _rows(tmp_path / "jobs/a", [300.0] * 10)
    launch = {"time": "04:00:00", "max_requeues": 3}
    plan = plan_preemption(launch, checkpoint_every=5, steps=1000, run_dir=tmp_path)
    assert plan.lead_s == 450 and plan.covers_a_step
    text = "\n".join(preemption_summary(plan))
    assert "USR2 warning 450 s before the time limit" in text
    assert "the step in flight finishes and is saved (no loss)" in text
    assert "pre-emption without warning: up to 5 step(s) lost (~25.0 min" in text
    # 1000 x 300 s = 83.3 h over 4 h allocations (less the lead) -> 22 allocations
    assert "set launch.max_requeues >= 21" in text


def test_plan_without_a_measured_step_says_what_a_time_limit_costs():
    plan = PreemptionPlan(None, 0, 90, 2, 3, 86400, 100)
    text = "\n".join(preemption_summary(plan))
    assert "step time not measured yet" in text and "checkpoint.every=2" in text


def test_checkpoint_every_is_suggested_when_a_preemption_would_cost_over_half_an_hour():
    plan = PreemptionPlan(400.0, 50, 550, 10, 10, 86400, 100)  # 10 x 400 s = 66.7 min at risk
    text = "\n".join(preemption_summary(plan))
    assert "checkpoint.every: 4 keeps that under 30.0 min" in text
    quick = PreemptionPlan(400.0, 50, 550, 4, 10, 86400, 100)  # 26.7 min: fine as it is
    assert "keeps that under" not in "\n".join(preemption_summary(quick))


def test_short_warning_is_reported_as_a_loss():
    plan = PreemptionPlan(400.0, 50, 120, 4, 10, 86400, 100)  # a hand-set 120 s lead
    text = "\n".join(preemption_summary(plan))
    assert "shorter than a step + save: up to 4 step(s) lost" in text


def test_runner_waits_for_the_lead_and_keeps_it_across_requeues():
    runner = SlurmJobRunner("/x", requeue=True, checkpoint_wait_s=435.0)
    assert runner.fresh().checkpoint_wait_s == 435.0
    assert pickle.loads(pickle.dumps(runner)).checkpoint_wait_s == 435.0
    old = SlurmJobRunner("/x")  # runners pickled by an older rollcli keep the old wait
    del old.__dict__["checkpoint_wait_s"]
    assert pickle.loads(pickle.dumps(old)).checkpoint_wait_s == 75.0


class _FakeSubmitit:
    """submitit.SlurmExecutor's surface the executor uses, recording what it is given."""

    made: list[_FakeSubmitit] = []

    def __init__(self, folder, python, max_num_timeout):
        self.max_num_timeout, self.params, self.runners = max_num_timeout, {}, []
        _FakeSubmitit.made.append(self)

    def update_parameters(self, **params):
        self.params.update(params)

    @contextlib.contextmanager
    def batch(self):
        yield

    def submit(self, runner):
        self.runners.append(runner)
        index = len(self.runners) - 1
        paths = SimpleNamespace(stdout="/dev/null", stderr="/dev/null", submission_file="/x")
        return SimpleNamespace(job_id=f"77_{index}", paths=paths)


def test_submission_passes_max_requeues_and_the_measured_lead(tmp_path, monkeypatch):
    run_dir = tmp_path / "exp"
    _rows(run_dir / "jobs/old", [600.0] * 4)  # an earlier attempt measured 10-minute steps
    job_dir = run_dir / "jobs/j0"
    (job_dir / "logs").mkdir(parents=True)
    monkeypatch.setattr(slurm_module.submitit, "SlurmExecutor", _FakeSubmitit)
    monkeypatch.setattr(slurm_module, "read_max_array_size", lambda timeout: 1000)
    _FakeSubmitit.made.clear()
    launch = {"executor": "slurm", "time": "24:00:00", "max_requeues": 40}
    job = Job("j0", "train", job_dir, (), Resources(time="24:00:00"))
    slurm_module.SlurmExecutor(launch).submit([job], run_dir)
    (made,) = _FakeSubmitit.made
    assert made.max_num_timeout == 40
    assert made.params["signal_delay_s"] == 600 + 120 + 30
    assert made.runners[0].checkpoint_wait_s == 750 - 15


def test_slurm_task_runs_its_job_offline(tmp_path, monkeypatch):
    """Compute nodes often have no internet: the task sets HF offline mode before the job
    starts (models come from the prefetched cache), unless the user chose HF_HUB_OFFLINE=0."""
    import os

    import rollcli.jobs.entry as entry

    seen = {}

    def fake_run_job(job_dir, stop):
        seen.update({k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")})
        return 0

    monkeypatch.setattr(entry, "run_job", fake_run_job)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, "placeholder")  # registered for restore, then removed
        monkeypatch.delenv(name)
    monkeypatch.delenv("SLURM_JOB_NUM_NODES", raising=False)
    job_dir = tmp_path / "jobs/j0"
    job_dir.mkdir(parents=True)
    SlurmJobRunner(str(job_dir))()
    assert seen == {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE")
    SlurmJobRunner(str(job_dir))()
    assert seen == {"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": None}
