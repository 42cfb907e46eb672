"""The verl specs in experiments/: they plan, their jobs compile to verl overrides, and the CPU one
runs through ``rollcli run`` and ``rollcli report`` for real (verl's trainer, tiny model)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rollcli.backends.verl.overrides import VerlPaths, compile_overrides

ROOT = Path(__file__).resolve().parents[3]
H200 = ["pc-1.5b-h200", "vigor-3b-h200", "compare-h200"]
ROLLCLI = [sys.executable, "-c", "from rollcli.cli.app import main; main()"]
PATHS = VerlPaths(model="m", train_files="t.parquet", val_files="v.parquet", checkpoints="ckpt")


def plan(name: str):
    from rollcli.plan import build_plan
    from rollcli.spec import load_spec

    return build_plan(load_spec(ROOT / "experiments" / f"{name}.yaml"))


@pytest.mark.parametrize("name", [*H200, "verl-cpu", "verl-code-cpu"])
def test_spec_plans_and_every_train_job_compiles(name):
    built = plan(name)
    trains = built.by_type("train")
    assert trains and len({job.id for job in built}) == len(built.jobs)
    for job in trains:
        lines = compile_overrides(job.config, PATHS)
        assert f"trainer.total_training_steps={job.config['budget']['steps']}" in lines
        if name in H200:
            assert job.resources.gpus_per_node == 8
            nodes = job.config["launch"]["nodes"]
            assert f"trainer.nnodes={nodes}" in lines and "trainer.n_gpus_per_node=8" in lines
            assert "actor_rollout_ref.rollout.name='vllm'" in lines


def test_pc_spec_is_the_published_setting():
    job = next(j for j in plan("pc-1.5b-h200").by_type("train") if j.allocator == "pc")
    alloc = job.config["allocator"]
    assert (alloc["n_pilot"], alloc["n_commit"], alloc["p_lower"], alloc["p_upper"]) == (
        32,
        96,
        0.125,
        0.75,
    )
    assert alloc["pilot_batch_factor"] == 3 and alloc["replay"]["max_age"] == 5
    assert job.config["budget"]["rollouts_per_step"] == 128 * 128
    assert job.config["eval"]["samples"]["aime24"] == 32


def test_h200_specs_render_sbatch():
    for name in H200:
        out = subprocess.run(
            [*ROLLCLI, "plan", f"experiments/{name}.yaml", "--sbatch"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert "#SBATCH --gpus-per-node=8" in out.stdout


@pytest.mark.verl
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs the verl extra")
def test_verl_cpu_spec_runs_and_reports(tmp_path, check_consistency):

    runs = tmp_path / "runs"
    result = subprocess.run(
        [*ROLLCLI, "run", "experiments/verl-cpu.yaml", "--runs-dir", str(runs)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    run_dir = runs / "verl-cpu"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    trains = [j for j in manifest["plan"]["jobs"] if j["type"] == "train"]
    assert {j["allocator"] for j in trains} == {"grpo", "pc"}
    for job in trains:
        metrics = check_consistency(run_dir / "jobs" / job["id"], eval_steps={3}, initial_eval=True)
        assert [m["step"] for m in metrics] == [1, 2, 3]
        assert "eval/accuracy" in metrics[-1] and "eval/math500" in metrics[-1]
        if job["allocator"] == "grpo":
            assert [m["cum_rollouts"] for m in metrics] == [16, 32, 48]
    # the trained checkpoint exports to a Hugging Face folder whose weights moved off the start
    import torch
    from transformers import AutoModelForCausalLM

    from rollcli.backends.verl.export import export_hf

    grpo = run_dir / "jobs" / next(j["id"] for j in trains if j["allocator"] == "grpo")
    exported = AutoModelForCausalLM.from_pretrained(export_hf(grpo, tmp_path / "hf"))
    initial = AutoModelForCausalLM.from_pretrained(grpo / "verl" / "model")
    moved = [
        not torch.equal(a, b)
        for a, b in zip(exported.state_dict().values(), initial.state_dict().values(), strict=True)
    ]
    assert any(moved)
    report = subprocess.run(
        [*ROLLCLI, "report", str(run_dir)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert report.returncode == 0, report.stderr[-2000:]
    assert (run_dir / "report" / "report.md").is_file()


@pytest.mark.verl
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs the verl extra")
def test_verl_code_cpu_spec_trains_on_the_code_reward(tmp_path, check_consistency):
    """The code reward through ``rollcli run`` (GRPO and VIGOR, 3 steps): every response graded
    in the sandbox pool, none past its deadline; all groups are all-wrong for the allocators
    (the tiny model writes no program) and still train on the overlong-shaped reward."""
    runs = tmp_path / "runs"
    result = subprocess.run(
        [*ROLLCLI, "run", "experiments/verl-code-cpu.yaml", "--runs-dir", str(runs)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    run_dir = runs / "verl-code-cpu"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    trains = [j for j in manifest["plan"]["jobs"] if j["type"] == "train"]
    assert {j["allocator"] for j in trains} == {"grpo", "vigor"}
    for job in trains:
        metrics = check_consistency(run_dir / "jobs" / job["id"], eval_steps={3}, initial_eval=True)
        assert [m["reward/timeouts"] for m in metrics] == [0, 0, 0]
        assert all(m["reward_mean"] == 0.0 and m["zero_var_frac"] == 1.0 for m in metrics)
        assert all(
            m["train/shaped_reward_mean"] < 0 for m in metrics if "train/shaped_reward_mean" in m
        )
        if job["allocator"] == "grpo":  # uniform trains every group: the shaping moves it
            assert any(m["train/pg_loss"] != 0.0 for m in metrics)
