"""Run folder layout: manifest, spec, job folders; idempotent preparation; job lookup."""

from __future__ import annotations

import pytest
import yaml

from rollcli.errors import StoreError
from rollcli.plan import build_plan
from rollcli.spec import load_spec
from rollcli.store.atomic import append_jsonl, read_json
from rollcli.store.layout import find_job, job_dir, load_manifest, prepare_run
from rollcli.store.state import read_state, set_status

SPEC = """\
name: layout
backend: {kind: sim, num_train_prompts: 256}
budget: {steps: 3, rollouts_per_step: 64}
allocators:
  grpo: {kind: uniform, n: 8}
  pc: {kind: pilot_commit, n_pilot: 4, n_commit: 12}
seeds: [0, 1]
"""


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return load_spec(path)


def test_prepare_run_writes_the_documented_layout(tmp_path, spec):
    plan = build_plan(spec)
    run = prepare_run(tmp_path / "runs" / "layout", spec.to_dict(), plan, ["rollcli", "run", "x"])
    manifest = read_json(run / "manifest.json")
    assert manifest["experiment"] == "layout"
    assert manifest["spec"] == spec.to_dict()
    assert manifest["command"] == "rollcli run x"
    assert manifest["packages"]["pydantic"] and manifest["packages"]["python"]
    assert "git_commit" in manifest and manifest["created"]
    assert [j["id"] for j in manifest["plan"]["jobs"]] == [j.id for j in plan]
    for key in ("id", "type", "allocator", "seed", "depends_on", "resources"):
        assert key in manifest["plan"]["jobs"][0]
    assert yaml.safe_load((run / "spec.yaml").read_text()) == spec.to_dict()
    for job in plan:
        folder = job_dir(run, job.id)
        assert yaml.safe_load((folder / "config.yaml").read_text()) == job.config
        assert read_state(folder)["status"] == "pending"
        for sub in ("checkpoints", "eval", "logs"):
            assert (folder / sub).is_dir()


def test_prepare_again_keeps_progress(tmp_path, spec):
    plan = build_plan(spec)
    run = tmp_path / "run"
    prepare_run(run, spec.to_dict(), plan, "first")
    first = plan.jobs[0]
    set_status(job_dir(run, first.id), "running")
    set_status(job_dir(run, first.id), "done")
    append_jsonl(job_dir(run, first.id) / "metrics.jsonl", [{"step": 0}])
    created = load_manifest(run)["created"]
    prepare_run(run, spec.to_dict(), plan, "second")
    assert read_state(job_dir(run, first.id))["status"] == "done"
    assert (job_dir(run, first.id) / "metrics.jsonl").read_text() == '{"step": 0}\n'
    manifest = load_manifest(run)
    assert manifest["created"] == created and manifest["command"] == "second"


def test_a_run_folder_of_another_experiment_is_refused(tmp_path, spec):
    plan = build_plan(spec)
    run = tmp_path / "run"
    prepare_run(run, spec.to_dict(), plan, "x")
    other = {**spec.to_dict(), "name": "other"}
    with pytest.raises(StoreError, match="holds experiment 'layout'"):
        prepare_run(run, other, plan, "x")


def test_load_manifest_errors(tmp_path):
    with pytest.raises(StoreError, match="no such run folder"):
        load_manifest(tmp_path / "nope")
    with pytest.raises(StoreError, match="not a run folder"):
        load_manifest(tmp_path)


def test_a_bare_experiment_name_suggests_its_run_folder(tmp_path, spec, monkeypatch):
    """Issue 28: `rollcli status quickstart` did not suggest runs/quickstart."""
    prepare_run(tmp_path / "runs" / "layout", spec.to_dict(), build_plan(spec), "x")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="layout: no such run folder; did you mean runs/layout"):
        load_manifest("layout")
    with pytest.raises(StoreError, match="start one with"):  # nothing under runs/ by that name
        load_manifest("other")


def test_find_job(tmp_path, spec):
    plan = build_plan(spec)
    manifest = {"plan": plan.to_manifest()}
    pc1 = next(j for j in plan if j.allocator == "pc" and j.seed == 1)
    assert find_job(manifest, "pc/1") == pc1.id
    assert find_job(manifest, pc1.id[:6]) == pc1.id
    assert find_job(manifest, "report") == plan.by_type("report")[0].id
    with pytest.raises(StoreError, match="Did you mean 'pc/1'"):
        find_job(manifest, "pc/11")


def test_files_follow_the_umask_not_mkstemp(tmp_path, spec):
    import os

    umask = os.umask(0o022)
    os.umask(umask)
    run = prepare_run(tmp_path / "run", spec.to_dict(), build_plan(spec), "x")
    for path in (run / "manifest.json", run / "spec.yaml"):
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask
