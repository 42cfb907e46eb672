"""The local executor through ``run_experiment``: runs, skips finished jobs, records failures,
respects the concurrency cap and dependency order."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pytest

from rollcli.launch.orchestrate import run_experiment
from rollcli.plan import build_plan
from rollcli.spec import load_spec
from rollcli.store.atomic import read_jsonl
from rollcli.store.layout import job_dir
from rollcli.store.state import read_state
from rollcli.testing.specs import write_sim_spec


def spec_maker(tmp_path: Path) -> Callable[..., Path]:
    """A function writing a small sim spec (grpo + pc, one seed) under ``tmp_path``."""
    return functools.partial(write_sim_spec, tmp_path)


@pytest.fixture
def sim_spec(tmp_path):
    return spec_maker(tmp_path)


def _run(spec_path: Path, run_dir: Path, overrides=(), **kwargs):
    spec = load_spec(spec_path, list(overrides))
    plan = build_plan(spec)
    return plan, run_experiment(spec, plan, run_dir, interval=0.1, **kwargs)


@pytest.mark.slow
def test_run_then_rerun_skips_finished_jobs(sim_spec, tmp_path):
    run_dir = tmp_path / "runs" / "launch-sim"
    seen_running: list[int] = []
    plan, result = _run(
        sim_spec(),
        run_dir,
        max_parallel=1,
        on_tick=lambda st: seen_running.append(sum(s == "running" for s in st.values())),
    )
    assert result.ok and not result.skipped
    assert set(result.statuses) == {j.id for j in plan}
    assert max(seen_running) <= 1  # --max-parallel 1
    train = plan.by_type("train")
    for job in train:
        rows = read_jsonl(job_dir(run_dir, job.id) / "metrics.jsonl")
        assert [r["step"] for r in rows] == list(range(7))
        state = read_state(job_dir(run_dir, job.id))
        assert state["status"] == "done" and state["attempts"] == 1
        assert state["executor"]["kind"] == "local" and state["executor"]["pid"]
    report = read_state(job_dir(run_dir, plan.by_type("report")[0].id))
    assert report["status"] == "done"
    assert report["started"] >= max(read_state(job_dir(run_dir, j.id))["finished"] for j in train)
    assert (run_dir / "report").is_dir()

    _, again = _run(sim_spec(), run_dir)
    assert sorted(again.skipped) == sorted(j.id for j in plan) and again.statuses == {}
    assert all(read_state(job_dir(run_dir, j.id))["attempts"] == 1 for j in plan)

    # a changed knob adds only the jobs whose config changed
    ticks: list[dict[str, str]] = []
    plan3, third = _run(sim_spec(), run_dir, ["allocators.pc.p_upper=0.8"], on_tick=ticks.append)
    new = {j.id for j in plan3} - {j.id for j in plan}
    assert {plan3.get(jid).allocator for jid in new} == {"pc", None}  # pc/0 and the report
    assert set(third.statuses) == new
    # the live view counts the skipped jobs as done from the first tick (issue 28: `0/21 done`)
    assert set(ticks[0]) == {j.id for j in plan3}
    assert all(ticks[0][jid] == "done" for jid in third.skipped)


@pytest.mark.slow
def test_failed_job_is_recorded_and_blocks_dependents(sim_spec, tmp_path):
    spec = load_spec(sim_spec("fails", steps=3))
    plan = build_plan(spec)
    run_dir = tmp_path / "runs" / "fails"
    grpo = plan.by_type("train")[0]
    # metrics.jsonl as a folder: the job fails at its first row
    (job_dir(run_dir, grpo.id) / "metrics.jsonl").mkdir(parents=True)
    result = run_experiment(spec, plan, run_dir, interval=0.1)
    assert result.failed == [grpo.id]
    state = read_state(job_dir(run_dir, grpo.id))
    assert state["status"] == "failed" and "IsADirectoryError" in state["error_tail"]
    report = plan.by_type("report")[0]
    assert result.statuses[report.id] == "cancelled"
    assert "dependency" in read_state(job_dir(run_dir, report.id))["error_tail"]
    assert result.statuses[plan.by_type("train")[1].id] == "done"
    assert "IsADirectoryError" in (job_dir(run_dir, grpo.id) / "logs" / "stderr.log").read_text()

    # fixed and rerun: the failed job and its dependents run again, attempts count up
    (job_dir(run_dir, grpo.id) / "metrics.jsonl").rmdir()
    again = run_experiment(spec, plan, run_dir, interval=0.1)
    assert again.ok and set(again.statuses) == {grpo.id, report.id}
    assert read_state(job_dir(run_dir, grpo.id))["attempts"] == 2
