"""The job graph: one train job per allocator x seed, eval jobs for verl, one report job; ids are
content hashes of the job config, stable across processes and independent of tracking."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rollcli.plan import HASH_EXCLUDED, build_plan, job_id
from rollcli.spec import load_spec

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "plan"


def test_train_jobs_report_job_and_config_contract():
    spec = load_spec(GOLDEN / "sim.yaml")
    plan = build_plan(spec)
    train = plan.by_type("train")
    assert [(j.allocator, j.seed) for j in train] == [
        (a, s) for a in ("grpo", "dapo", "pc") for s in (0, 1)
    ]
    (report,) = plan.by_type("report")
    assert set(report.depends_on) == {j.id for j in train}
    assert plan.jobs[-1] is report
    config = train[0].config
    # docs/CONTRACTS.md §3
    assert list(config) == [
        "experiment",
        "job",
        "backend",
        "allocator",
        "budget",
        "eval",
        "checkpoint",
        "tracking",
    ]
    assert config["job"] == {"id": train[0].id, "type": "train", "allocator": "grpo", "seed": 0}
    assert config["allocator"] == {"kind": "uniform", "n": 8}
    assert config["backend"]["kind"] == "sim" and "lr" in config["backend"]  # fully resolved
    assert config["budget"] == {"steps": 10, "rollouts_per_step": 128}
    assert train[0].expected_rollouts == 10 * 128
    assert train[0].expected_tokens == round(10 * 128 * spec.backend.mean_tokens)
    json.dumps(plan.to_manifest())


def test_ids_are_hashes_of_the_config():
    plan = build_plan(load_spec(GOLDEN / "verl.yaml"))
    ids = [job.id for job in plan]
    assert len(set(ids)) == len(ids)
    for job in plan:
        assert job_id(job.config) == job.id
        assert len(job.id) == 10


def test_ids_ignore_tracking_and_checkpoint_but_not_knobs():
    base = {j.id for j in build_plan(load_spec(GOLDEN / "sim.yaml"))}
    same = build_plan(
        load_spec(
            GOLDEN / "sim.yaml",
            ["tracking.wandb.mode=offline", "checkpoint.every=3", "name=renamed"],
        )
    )
    assert {j.id for j in same.by_type("train")} <= base
    assert set(HASH_EXCLUDED) == {"experiment", "tracking", "checkpoint", "launch"}
    changed = build_plan(load_spec(GOLDEN / "sim.yaml", ["allocators.pc.p_upper=0.8"]))
    moved = {(j.allocator, j.seed) for j in changed.by_type("train") if j.id not in base}
    assert moved == {("pc", 0), ("pc", 1)}  # only pc's jobs change


def test_ids_are_stable_across_processes():
    code = (
        "import sys; from rollcli.spec import load_spec; from rollcli.plan import build_plan;"
        f"print(' '.join(j.id for j in build_plan(load_spec({str(GOLDEN / 'sim.yaml')!r}))))"
    )
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        outputs.add(out)
    assert len(outputs) == 1
    assert outputs.pop().split() == [j.id for j in build_plan(load_spec(GOLDEN / "sim.yaml"))]


def test_eval_jobs_only_for_verl_with_eval_jobs():
    plan = build_plan(load_spec(GOLDEN / "verl.yaml"))
    evals = plan.by_type("eval")
    train = {j.id: j for j in plan.by_type("train")}
    assert len(evals) == len(train) == 4
    for job in evals:
        (dep,) = job.depends_on
        assert job.config["job"]["train_job"] == dep and dep in train
        assert (job.allocator, job.seed) == (train[dep].allocator, train[dep].seed)
    report = plan.by_type("report")[0]
    assert set(report.depends_on) == set(train) | {j.id for j in evals}
    assert train[next(iter(train))].resources.nodes == 2
    assert evals[0].resources.nodes == 1 and evals[0].resources.gpus_per_node == 8
    assert train[next(iter(train))].config["launch"] == {
        "nodes": 2,
        "gpus_per_node": 8,
        "cpus_per_task": 1,  # sizes the code-sandbox pools (issue 24); the spec names none
    }
    no_eval = build_plan(load_spec(GOLDEN / "verl.yaml", ["eval.jobs=false"]))
    assert not no_eval.by_type("eval")


def test_large_plan_is_fast():
    import time

    seeds = ",".join(str(s) for s in range(100))
    spec = load_spec(GOLDEN / "sim.yaml", [f"seeds=[{seeds}]"])
    start = time.perf_counter()
    plan = build_plan(spec)
    elapsed = time.perf_counter() - start
    assert len(plan.by_type("train")) == 300
    assert elapsed < 1.0


TINY_SPEC = """\
name: bases
backend: {kind: tiny, max_level: 2}
budget: {steps: 3, rollouts_per_step: 16}
allocators:
  grpo: {kind: uniform, n: 4}
seeds: [0, 1]
"""


def test_base_seeds_multiply_train_jobs_and_set_each_jobs_base_seed(tmp_path):
    path = tmp_path / "bases.yaml"
    path.write_text(TINY_SPEC + "base_seeds: [0, 2, 5]\n")
    spec = load_spec(path)
    train = build_plan(spec).by_type("train")
    assert [(j.base_seed, j.seed) for j in train] == [(b, s) for b in (0, 2, 5) for s in (0, 1)]
    for job in train:
        assert job.config["backend"]["base_seed"] == job.base_seed
        assert job.config["job"]["base_seed"] == job.base_seed
        assert job.summary()["base_seed"] == job.base_seed
    assert len({j.id for j in train}) == 6
    # without base_seeds: the spec's own base_seed, no base_seed key anywhere, the same ids as
    # before the axis existed (tests/golden/plan/job_ids.json pins the shipped specs')
    path.write_text(TINY_SPEC)
    plain = build_plan(load_spec(path)).by_type("train")
    assert [j.base_seed for j in plain] == [None, None]
    assert "base_seed" not in plain[0].config["job"] and "base_seed" not in plain[0].summary()
    assert "base_seeds" not in load_spec(path).to_dict()
    # base model 0 with seed 0 is the plain run's job 0 but a different job (its id names the axis)
    assert train[0].config["backend"] == plain[0].config["backend"]
    assert train[0].id != plain[0].id


def test_base_seeds_need_a_backend_with_a_base_model_and_distinct_values(tmp_path):
    import pytest

    from rollcli.errors import SpecError

    path = tmp_path / "bases.yaml"
    path.write_text(TINY_SPEC + "base_seeds: [1, 1]\n")
    with pytest.raises(
        SpecError, match=r"bases.yaml:\d+:\d+: base_seeds: base seed 1 is listed twice"
    ):
        load_spec(path)
    sim = TINY_SPEC.replace("{kind: tiny, max_level: 2}", "{kind: sim}") + "base_seeds: [0, 1]\n"
    path.write_text(sim)
    with pytest.raises(SpecError, match="base_seeds: the sim backend has no base_seed"):
        load_spec(path)
