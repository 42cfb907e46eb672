"""Spec sections -> verl Hydra overrides: golden files, and verl's own config composes them.

Golden files live in tests/golden/verl/; regenerate them with ROLLCLI_UPDATE_GOLDEN=1 after a
deliberate change and review the diff.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rollcli.backends.verl.overrides import VerlPaths, compile_overrides, render_value

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "verl"
PATHS = VerlPaths(
    model="/runs/x/jobs/abc/verl/model",
    train_files="/runs/x/jobs/abc/verl/data/train.parquet",
    val_files="/runs/x/jobs/abc/verl/data/val.parquet",
    checkpoints="/runs/x/jobs/abc/checkpoints",
)
needs_verl = pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs verl")


def pc_h200_job() -> dict:
    return {
        "experiment": "pc-1.5b-h200",
        "job": {"id": "abc", "type": "train", "allocator": "pc", "seed": 1},
        "backend": {
            "kind": "verl",
            "model": "Qwen/Qwen2.5-Math-1.5B",
            "max_prompt_len": 1024,
            "max_response_len": 8192,
            "logger": ["console"],
            "verl_overrides": {"actor_rollout_ref.actor.optim.weight_decay": 0.1},
        },
        "allocator": {"kind": "pilot_commit", "n_pilot": 32, "n_commit": 96},
        "budget": {"steps": 500, "rollouts_per_step": 16384},
        "eval": {"every": 5, "suite": ["aime24", "math500"], "temperature": 1.0, "top_p": 0.7},
        "checkpoint": {"every": 25},
        "tracking": {"wandb": {"project": "rollcli", "mode": "online"}},
        "launch": {"executor": "slurm", "nodes": 2, "gpus_per_node": 8},
    }


def cpu_job() -> dict:
    return {
        "experiment": "verl-cpu",
        "job": {"id": "def", "type": "train", "allocator": "grpo", "seed": 0},
        "backend": {
            "kind": "verl",
            "device": "cpu",
            "model": "tiny",
            "max_prompt_len": 384,
            "max_response_len": 16,
            "lr": 1.0e-4,
        },
        "allocator": {"kind": "uniform", "n": 4},
        "budget": {"steps": 3, "rollouts_per_step": 16},
        "eval": {"every": 2},
        "checkpoint": {"every": 1},
        "tracking": {"wandb": {"mode": "disabled"}},
    }


def check_golden(name: str, lines: list[str]) -> None:
    path = GOLDEN / name
    text = json.dumps(lines, indent=1) + "\n"
    if os.environ.get("ROLLCLI_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; create it with ROLLCLI_UPDATE_GOLDEN=1"
    assert text == path.read_text()


def test_pc_h200_overrides_golden():
    lines = compile_overrides(pc_h200_job(), PATHS)
    check_golden("pc_1.5b_h200.json", lines)
    assert "trainer.nnodes=2" in lines and "trainer.n_gpus_per_node=8" in lines
    assert "actor_rollout_ref.rollout.name='vllm'" in lines
    assert "trainer.logger=['console']" in lines  # W&B belongs to rollcli's tracker
    assert lines[-1] == "++actor_rollout_ref.actor.optim.weight_decay=0.1"  # free-form last


def test_cpu_overrides_golden():
    lines = compile_overrides(cpu_job(), PATHS)
    check_golden("verl_cpu.json", lines)
    assert "actor_rollout_ref.rollout.name='hf'" in lines
    assert "+ray_kwargs.ray_init.runtime_env.env_vars.OMP_NUM_THREADS='1'" in lines


def test_render_value_keeps_strings_strings():
    assert render_value("false") == "'false'"
    assert render_value("it's") == "'it\\'s'"
    assert render_value([1, "a", None, True]) == "[1,'a',null,true]"


def test_unknown_backend_knob_is_named():
    job = cpu_job()
    job["backend"]["max_respons_len"] = 3
    with pytest.raises(ValueError, match="max_respons_len"):
        compile_overrides(job, PATHS)


@needs_verl
def test_overrides_compose_with_verls_config():
    from rollcli.backends.verl.runner import compose_config

    config = compose_config(compile_overrides(pc_h200_job(), PATHS))
    assert config.trainer.nnodes == 2 and config.trainer.n_gpus_per_node == 8
    assert config.actor_rollout_ref.actor.optim.lr == 1e-6
    assert config.actor_rollout_ref.actor.optim.weight_decay == 0.1
    assert config.data.max_response_length == 8192
    assert config.reward.custom_reward_function.reward_kwargs.mode == "math"
    assert config.actor_rollout_ref.rollout.val_kwargs.top_p == 0.7
    cpu = compose_config(compile_overrides(cpu_job(), PATHS))
    assert cpu.ray_kwargs.ray_init.runtime_env.env_vars.OMP_NUM_THREADS == "1"
    assert cpu.actor_rollout_ref.rollout.name == "hf" and cpu.trainer.device == "cpu"


@needs_verl
@pytest.mark.slow
def test_main_ppo_cfg_job_accepts_the_overrides():
    """verl's own entry point (`--cfg job`) composes and prints the generated config."""
    lines = compile_overrides(pc_h200_job(), PATHS)
    result = subprocess.run(
        [sys.executable, "-m", "verl.trainer.main_ppo", "--cfg", "job", *lines],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"path: {PATHS.model}" in result.stdout
    assert "  nnodes: 2" in result.stdout and "  n_gpus_per_node: 8" in result.stdout


@needs_verl
def test_paths_with_quotes_and_spaces_survive_composition(tmp_path):
    from rollcli.backends.verl.runner import compose_config, job_overrides

    job_dir = tmp_path / "it's a job"
    paths = VerlPaths(
        model=str(job_dir / "model"),
        train_files=str(job_dir / "t.parquet"),
        val_files=str(job_dir / "v.parquet"),
        checkpoints=str(job_dir / "checkpoints"),
    )
    config = compose_config(job_overrides(job_dir, cpu_job(), paths))
    assert config.rollcli.job_dir == str(job_dir.resolve())
    assert config.actor_rollout_ref.model.path == str(job_dir / "model")
    assert config.trainer.test_freq == -1 and config.trainer.val_before_train is False  # no suite


def test_eval_jobs_keep_every_checkpoint():
    """Eval jobs run after training and evaluate every checkpoint: verl must not rotate them out."""
    job = pc_h200_job()
    kept = [line for line in compile_overrides(job, PATHS) if "max_actor_ckpt_to_keep" in line]
    assert kept == ["trainer.max_actor_ckpt_to_keep=2"]
    job["eval"] = {**job["eval"], "jobs": True}
    kept = [line for line in compile_overrides(job, PATHS) if "max_actor_ckpt_to_keep" in line]
    assert kept == ["trainer.max_actor_ckpt_to_keep=null"]


def vllm_cpu_job() -> dict:
    job = cpu_job()
    job["backend"]["rollout_engine"] = "vllm"
    return job


def test_vllm_on_cpu_overrides():
    """vLLM's CPU build through verl's server: no sleep mode, fp32, a small sync bucket, the
    engine's log-probs, vLLM's CPU settings in every Ray actor; the hf path is unchanged."""
    lines = compile_overrides(vllm_cpu_job(), PATHS)
    for line in (
        "actor_rollout_ref.rollout.name='vllm'",
        "+actor_rollout_ref.rollout.enable_sleep_mode=false",
        "actor_rollout_ref.rollout.dtype='float32'",
        "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=64",
        "actor_rollout_ref.rollout.calculate_log_probs=true",
        "actor_rollout_ref.rollout.enforce_eager=true",
        "+ray_kwargs.ray_init.runtime_env.env_vars.VLLM_CPU_OMP_THREADS_BIND='nobind'",
        "+ray_kwargs.ray_init.runtime_env.env_vars.VLLM_CPU_KVCACHE_SPACE='1'",
        "+ray_kwargs.ray_init.runtime_env.env_vars.VLLM_TARGET_DEVICE='cpu'",
    ):
        assert line in lines, line
    hf = compile_overrides(cpu_job(), PATHS)
    assert not [line for line in hf if "VLLM" in line or "enable_sleep_mode" in line]


def test_vllm_on_cpu_is_one_node():
    from rollcli.backends.verl.cpu_settings import cpu_overrides

    with pytest.raises(ValueError, match="one node"):
        cpu_overrides(multinode=True, rollout_engine="vllm")


@needs_verl
def test_vllm_on_cpu_overrides_compose_with_verls_config():
    from rollcli.backends.verl.runner import compose_config

    config = compose_config(compile_overrides(vllm_cpu_job(), PATHS))
    rollout = config.actor_rollout_ref.rollout
    assert rollout.name == "vllm" and rollout.enable_sleep_mode is False
    assert rollout.checkpoint_engine.update_weights_bucket_megabytes == 64
    assert rollout.dtype == "float32" and rollout.free_cache_engine is False
