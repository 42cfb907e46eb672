"""The verl specs in experiments/: they plan, their jobs compile to verl overrides, and the CPU one
runs through ``rollcli run`` and ``rollcli report`` for real (verl's trainer, tiny model)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rollcli.backends.verl.overrides import VerlPaths, compile_overrides, verl_config_from_mapping

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "golden"
H200 = ["pc-1.5b-h200", "vigor-3b-h200", "compare-h200", "vigor-code-h200"]
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


def _check_golden(path: Path, text: str) -> None:
    """``text`` against its golden file (ROLLCLI_UPDATE_GOLDEN=1 rewrites it: review the diff)."""
    if os.environ.get("ROLLCLI_UPDATE_GOLDEN") == "1":
        path.write_text(text, "utf-8")
    assert path.exists(), f"missing golden file {path}; create it with ROLLCLI_UPDATE_GOLDEN=1"
    assert text == path.read_text("utf-8"), f"{path.name} differs from its golden file"


def compiled(name: str) -> dict[str, dict]:
    """Per allocator (first seed): the verl overrides its train job compiles to, and the reward
    settings rollcli's trainer applies itself (the success vs training reward split)."""
    out = {}
    for job in plan(name).by_type("train"):
        if job.allocator in out:
            continue
        backend = verl_config_from_mapping(job.config["backend"])
        out[job.allocator] = {
            "overrides": compile_overrides(job.config, PATHS),
            "rollcli": {
                "allocator": job.config["allocator"],
                "num_minibatches": backend.num_minibatches,
                "overlong_buffer_len": backend.overlong_buffer_len,
                "overlong_penalty_factor": backend.overlong_penalty_factor,
                "format_score": backend.format_score,
                "reward": backend.reward,
                "reward_deadline_s": backend.reward_deadline_s,
            },
        }
    return out


@pytest.mark.parametrize("name", H200)
def test_h200_spec_compiles_to_its_golden_overrides(name):
    got = compiled(name)
    _check_golden(GOLDEN / "verl" / f"{name}.json", json.dumps(got, indent=1) + "\n")


@pytest.mark.parametrize("name", ["pc-1.5b-h200", "compare-h200"])
def test_pilot_commit_specs_carry_the_official_1p5b_settings(name):
    """databricks/pilot-commit @ 8ca7605, train_scripts/{grpo,pc,dapo}_qwen2.5-1.5b_*.sh: the
    "GRPO" baseline is DAPO without dynamic sampling; every arm shares these settings."""
    for allocator, job in compiled(name).items():
        lines = set(job["overrides"])
        for line in (
            "data.max_prompt_length=2048",
            "data.max_response_length=8192",
            "actor_rollout_ref.actor.clip_ratio_low=0.2",
            "actor_rollout_ref.actor.clip_ratio_high=0.28",
            "actor_rollout_ref.actor.loss_agg_mode='token-mean'",
            "actor_rollout_ref.actor.use_kl_loss=false",
            "algorithm.use_kl_in_reward=false",
            "actor_rollout_ref.actor.optim.lr=1e-06",
            "actor_rollout_ref.actor.grad_clip=1.0",
            "actor_rollout_ref.actor.entropy_coeff=0.0",
            "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=10240",
            "actor_rollout_ref.rollout.max_num_batched_tokens=10240",
            "actor_rollout_ref.rollout.temperature=1.0",
            "actor_rollout_ref.rollout.top_p=1.0",
            "actor_rollout_ref.rollout.val_kwargs.temperature=1.0",
            "actor_rollout_ref.rollout.val_kwargs.top_p=0.7",
            "++actor_rollout_ref.actor.optim.lr_warmup_steps=10",
            "++actor_rollout_ref.actor.optim.weight_decay=0.1",
            "++actor_rollout_ref.actor.clip_ratio_c=10.0",
            "++actor_rollout_ref.rollout.max_num_seqs=1024",
            "trainer.nnodes=2",
            "trainer.n_gpus_per_node=8",
            "trainer.test_freq=5",
            "trainer.total_training_steps=1000",
        ):
            assert line in lines, (allocator, line)
        own = job["rollcli"]
        assert (own["overlong_buffer_len"], own["overlong_penalty_factor"]) == (4096, 1.0)
        assert own["num_minibatches"] == 4  # 128 prompts / mini-batch 32
        if allocator == "grpo":  # no dynamic sampling: 128 prompts x 128 rollouts
            assert (own["allocator"]["kind"], own["allocator"]["n"]) == ("uniform", 128)
        if allocator == "dapo":  # filter groups on accuracy, gen batch 3 x 128, 10 batches
            alloc = own["allocator"]
            assert (alloc["n"], alloc["gen_batch_factor"], alloc["max_gen_batches"]) == (128, 3, 10)


@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs the verl extra")
def test_the_published_overrides_are_verl_config_keys():
    """verl's own config composes the spec's overrides and holds the published values; a
    ``++`` key verl does not have would be added silently, so each must be in verl's defaults."""
    from omegaconf import OmegaConf

    from rollcli.backends.verl.runner import compose_config

    job = compiled("pc-1.5b-h200")["grpo"]
    defaults = compose_config([])
    missing = object()
    for line in job["overrides"]:
        if line.startswith("++"):
            key = line[2:].split("=", 1)[0]
            assert OmegaConf.select(defaults, key, default=missing) is not missing, key
    config = compose_config(job["overrides"])
    actor = config.actor_rollout_ref.actor
    assert (actor.optim.lr_warmup_steps, actor.optim.weight_decay) == (10, 0.1)
    assert actor.clip_ratio_c == 10.0 and actor.fsdp_config.optimizer_offload is False
    assert config.actor_rollout_ref.rollout.max_num_seqs == 1024
    assert config.actor_rollout_ref.rollout.enable_chunked_prefill is True
    code = compose_config(compiled("vigor-code-h200")["vigor"]["overrides"])
    assert code.reward.custom_reward_function.reward_kwargs.mode == "code"
    assert code.reward.custom_reward_function.reward_kwargs.deadline_s == 60.0


def test_vigor_code_spec_trains_on_code_and_validates_on_livecodebench():
    got = compiled("vigor-code-h200")
    assert set(got) == {"grpo", "vigor"}
    for job in got.values():
        assert job["rollcli"]["reward"] == "code"
        assert "+reward.custom_reward_function.reward_kwargs.mode='code'" in job["overrides"]
        assert "actor_rollout_ref.rollout.val_kwargs.n=1" in job["overrides"]
    train = plan("vigor-code-h200").by_type("train")[0]
    assert train.config["backend"]["model"] == "Qwen/Qwen3-8B"
    assert train.config["eval"]["suite"] == ["livecodebench"]
    assert train.config["eval"]["livecodebench"] == {"path": "data/livecodebench", "version": "v6"}
    assert got["vigor"]["rollcli"]["allocator"]["m0"] == 2  # G = 8 over T = 4 rounds


def test_vigor_code_spec_renders_its_golden_sbatch():
    """The scripts `rollcli run` submits for experiments/vigor-code-h200.yaml (fixed run folder
    and interpreter; the jobs themselves travel pickled by submitit, their configs above)."""
    from rollcli.launch.orchestrate import plan_jobs
    from rollcli.launch.sbatch import render_plan_scripts

    run = Path("/runs/vigor-code-h200")
    scripts = render_plan_scripts(
        plan_jobs(plan("vigor-code-h200"), run),
        run_dir=run,
        experiment=run.name,
        max_array_size=1001,
        array_parallelism=6,
        python="/opt/rollcli/bin/python",
    )
    assert [(g.name, g.size) for g, _ in scripts] == [("train-0", 6), ("report-0", 1)]
    text = "".join(f"# ===== {g.name}: {g.size} job(s)\n{t}" for g, t in scripts)
    assert "#SBATCH --gpus-per-node=8" in text and "#SBATCH --array=0-5%6" in text
    _check_golden(GOLDEN / "sbatch" / "vigor_code_h200.sh", text)


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
@pytest.mark.timeout(1500)  # verl jobs on 2 shared cores: over 600 s, as the CLI timeout allows
def test_verl_cpu_spec_runs_and_reports(tmp_path, check_consistency, run_train_jobs):
    runs = tmp_path / "runs"
    jobs = run_train_jobs(ROOT / "experiments" / "verl-cpu.yaml", runs, timeout=1200)
    run_dir = runs / "verl-cpu"
    assert set(jobs) == {"grpo", "pc"}
    for allocator, job_dir in jobs.items():
        metrics = check_consistency(job_dir, eval_steps={3}, initial_eval=True)
        assert [m["step"] for m in metrics] == [1, 2, 3]
        assert "eval/accuracy" in metrics[-1] and "eval/math500" in metrics[-1]
        if allocator == "grpo":
            assert [m["cum_rollouts"] for m in metrics] == [16, 32, 48]
    # the trained checkpoint exports to a Hugging Face folder whose weights moved off the start
    import torch
    from transformers import AutoModelForCausalLM

    from rollcli.backends.verl.export import export_hf

    grpo = jobs["grpo"]
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
@pytest.mark.timeout(1500)  # verl jobs on 2 shared cores: over 600 s, as the CLI timeout allows
def test_verl_code_cpu_spec_trains_on_the_code_reward(
    tmp_path, check_consistency, run_train_jobs, trace
):
    """The code reward through ``rollcli run`` (GRPO and VIGOR, 3 steps): every response graded
    in the sandbox pool, none past its deadline; all groups are all-wrong for the allocators
    (the tiny model writes no program) and still train on the overlong-shaped reward: a group's
    advantages are nonzero exactly where its shaped rewards differ, and the policy loss is
    nonzero exactly in the steps that have such a group. (Whether a random tiny model stops
    before the 12-token limit, and so whether any group differs, is up to sampling.)"""
    jobs = run_train_jobs(ROOT / "experiments" / "verl-code-cpu.yaml", tmp_path / "runs", 1500)
    assert set(jobs) == {"grpo", "vigor"}
    for job_dir in jobs.values():
        metrics = check_consistency(job_dir, eval_steps={3}, initial_eval=True)
        assert [m["reward/timeouts"] for m in metrics] == [0, 0, 0]
        assert all(m["reward_mean"] == 0.0 and m["zero_var_frac"] == 1.0 for m in metrics)
        assert all(
            m["train/shaped_reward_mean"] < 0 for m in metrics if "train/shaped_reward_mean" in m
        )
        loss_by_step = {m["step"]: m["train/pg_loss"] for m in metrics if "train/pg_loss" in m}
        for row in trace(job_dir):
            trained = row["trained"]
            by_group: dict[str, list[tuple[float, float]]] = {}
            for uid, shaped, advantage in zip(
                trained["uids"], trained["train_rewards"], trained["advantages"], strict=True
            ):
                by_group.setdefault(uid, []).append((shaped, advantage))
            any_moved = False
            for pairs in by_group.values():
                shaped = [s for s, _ in pairs]
                moved = max(shaped) - min(shaped) > 1e-6
                assert moved == any(abs(a) > 1e-6 for _, a in pairs), pairs
                any_moved |= moved
            assert (loss_by_step[row["step"]] != 0.0) == any_moved, row["step"]
