"""Compile a job's spec sections into verl Hydra overrides (a pure function, golden-tested).

Input: the job config of CONTRACTS §3 (``backend`` = :class:`~rollcli.backends.verl.config.VerlConfig`
fields, ``allocator``, ``budget``, ``eval``, ``checkpoint``, ``tracking``, optionally ``launch``)
and the resolved paths of the job (model folder, parquet files, checkpoint folder). Output: an
ordered list of ``key=value`` strings for ``verl.trainer.main_ppo`` (legacy trainer).

What the allocator decides is *not* compiled into verl's batch knobs: rollcli's trainer builds
each generation round from the allocator's ask and trains on its groups, so ``data.train_batch_size``,
``actor.ppo_mini_batch_size`` and ``rollout.n`` are nominal values that only satisfy verl's
config checks (one prompt per data-parallel rank). ``verl_overrides`` come last as ``++key=value``
(add or replace), so they win over everything compiled here. W&B is *not* added to verl's
loggers: rollcli's own tracker (``rollcli.analysis.tracking``, fed every metrics row) owns the
job's W&B run, with a deterministic id that survives resumes; ``backend.logger`` lists verl's
extra sinks (console by default; a ``wandb`` entry there would make a second run).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from rollcli.backends.verl.config import VerlConfig

__all__ = [
    "REWARD_WORKERS_PER_NODE",
    "VerlPaths",
    "compile_overrides",
    "render_value",
    "sandbox_workers_per_process",
    "verl_config_from_mapping",
]


@dataclass(frozen=True)
class VerlPaths:
    """Where a job's verl inputs and outputs live (absolute paths as strings)."""

    model: str
    train_files: str
    val_files: str
    checkpoints: str
    tokenizer: str | None = None


def verl_config_from_mapping(section: Mapping[str, Any]) -> VerlConfig:
    """The backend section as a :class:`VerlConfig` (unknown keys name the valid ones)."""
    names = {f.name for f in fields(VerlConfig)}
    for old in set(section) & set(VerlConfig.RENAMED_KNOBS):
        raise ValueError(f"verl backend: {VerlConfig.RENAMED_KNOBS[old]}")
    unknown = sorted(set(section) - names)
    if unknown:
        raise ValueError(
            f"verl backend has no knob(s) {', '.join(unknown)}; valid: {', '.join(sorted(names))}"
        )
    values = dict(section)
    if "logger" in values and isinstance(values["logger"], list):
        values["logger"] = tuple(values["logger"])
    return VerlConfig(**values)


def render_value(value: Any) -> str:
    """A Hydra override value: strings are always quoted so ``'false'`` or ``'1'`` stay strings."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(render_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{render_value(v)}" for k, v in value.items()) + "}"
    text = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


def _cluster(backend: VerlConfig, launch: Mapping[str, Any]) -> tuple[int, int]:
    nnodes = backend.nnodes or int(launch.get("nodes", 1) or 1)
    if backend.device == "cpu":
        # one FSDP worker per node, on the one fake GPU Ray is told the node has (REFERENCE §5);
        # on several nodes that GPU is the job's: the Ray bootstrap declares launch.gpus_per_node
        if nnodes > 1 and int(launch.get("gpus_per_node", 0) or 0) != 1:
            raise ValueError(
                "backend.device 'cpu' on launch.nodes > 1 needs launch.gpus_per_node: 1 (each "
                "node's one fake GPU, which Ray schedules verl's worker on), got "
                f"{launch.get('gpus_per_node', 0)}"
            )
        return nnodes, 1
    gpus = backend.gpus_per_node or int(launch.get("gpus_per_node", 1) or 1)
    return nnodes, gpus


# verl's reward loop: this many reward-worker processes per node (verl's default total is 8)
REWARD_WORKERS_PER_NODE = 8


def sandbox_workers_per_process(cpus_per_node: int, gpus_per_node: int) -> int:
    """Code-sandbox workers in each reward-worker process: the node's CPUs less two per GPU (its
    FSDP worker and vLLM engine) and four for the driver and Ray, shared by the node's
    :data:`REWARD_WORKERS_PER_NODE` reward workers (at least one each)."""
    free = cpus_per_node - 2 * gpus_per_node - 4
    return max(1, free // REWARD_WORKERS_PER_NODE)


def _sandbox_workers(launch: Mapping[str, Any], nnodes: int, gpus: int) -> dict[str, Any]:
    """``reward: code`` on GPUs: reward workers on every node, each with a sandbox pool sized
    from the node's CPUs (``launch.cpus_per_task``: one task per node)."""
    cpus = int(launch.get("cpus_per_task", 1) or 1)
    return {
        "reward.num_workers": REWARD_WORKERS_PER_NODE * nnodes,
        "+reward.custom_reward_function.reward_kwargs.sandbox_workers": (
            sandbox_workers_per_process(cpus, gpus)
        ),
    }


def compile_overrides(job: Mapping[str, Any], paths: VerlPaths) -> list[str]:
    """verl overrides for one train job (see the module docstring)."""
    backend = verl_config_from_mapping(job["backend"])
    budget = job.get("budget") or {}
    evaluation = job.get("eval") or {}
    checkpoint = job.get("checkpoint") or {}
    tracking = job.get("tracking") or {}
    launch = job.get("launch") or {}
    meta = job.get("job") or {}
    nnodes, gpus = _cluster(backend, launch)
    world = nnodes * gpus
    seq_len = backend.max_prompt_len + backend.max_response_len
    max_tokens = backend.ppo_max_token_len_per_gpu or 2 * seq_len
    test_freq = backend.test_freq or int(evaluation.get("every", 0) or 0) or -1
    save_freq = backend.save_freq or int(checkpoint.get("every", 0) or 0) or -1
    wandb = (tracking.get("wandb") or {}) if isinstance(tracking, Mapping) else {}
    project = wandb.get("project") or "rollcli"
    experiment = (
        "-".join(
            str(p)
            for p in (job.get("experiment"), meta.get("allocator"), meta.get("seed"))
            if p is not None
        )
        or "rollcli"
    )
    seed = backend.seed if backend.seed is not None else int(meta.get("seed", 0) or 0)
    use_kl = backend.kl_coef > 0

    o: dict[str, Any] = {
        # model
        "actor_rollout_ref.model.path": paths.model,
        "actor_rollout_ref.model.tokenizer_path": paths.tokenizer or paths.model,
        # data
        "data.train_files": paths.train_files,
        "data.val_files": paths.val_files,
        "data.max_prompt_length": backend.max_prompt_len,
        "data.max_response_length": backend.max_response_len,
        "data.filter_overlong_prompts": True,
        "data.truncation": "error",
        "data.train_batch_size": world,
        "data.train_max_samples": backend.train_max_samples or -1,
        "data.val_max_samples": -1,
        "data.shuffle": False,
        "data.validation_shuffle": False,
        "data.seed": seed,
        # algorithm: GRPO on the allocator's groups
        "algorithm.adv_estimator": "grpo",
        "algorithm.norm_adv_by_std_in_grpo": backend.norm_adv_by_std,
        "algorithm.use_kl_in_reward": False,
        # actor
        "actor_rollout_ref.actor.strategy": backend.strategy,
        "actor_rollout_ref.ref.strategy": backend.strategy,
        "actor_rollout_ref.actor.optim.lr": backend.lr,
        "actor_rollout_ref.actor.ppo_mini_batch_size": world,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": backend.ppo_micro_batch_size_per_gpu,
        "actor_rollout_ref.actor.use_dynamic_bsz": backend.use_dynamic_bsz,
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": max_tokens,
        "actor_rollout_ref.actor.ppo_epochs": backend.ppo_epochs,
        "actor_rollout_ref.actor.clip_ratio_low": backend.clip_ratio_low,
        "actor_rollout_ref.actor.clip_ratio_high": backend.clip_ratio_high,
        "actor_rollout_ref.actor.loss_agg_mode": backend.loss_agg_mode,
        "actor_rollout_ref.actor.entropy_coeff": backend.entropy_coeff,
        "actor_rollout_ref.actor.grad_clip": backend.grad_clip,
        "actor_rollout_ref.actor.use_kl_loss": use_kl,
        "actor_rollout_ref.actor.kl_loss_coef": backend.kl_coef,
        "actor_rollout_ref.actor.shuffle": False,
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz": backend.use_dynamic_bsz,
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": max_tokens,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": backend.ppo_micro_batch_size_per_gpu,
        "actor_rollout_ref.ref.log_prob_use_dynamic_bsz": backend.use_dynamic_bsz,
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu": max_tokens,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": backend.ppo_micro_batch_size_per_gpu,
        # rollout
        "actor_rollout_ref.rollout.name": backend.rollout_engine,
        "actor_rollout_ref.rollout.n": 1,
        "actor_rollout_ref.rollout.temperature": backend.temperature,
        "actor_rollout_ref.rollout.top_p": backend.top_p,
        "actor_rollout_ref.rollout.tensor_model_parallel_size": backend.tensor_parallel,
        "actor_rollout_ref.rollout.gpu_memory_utilization": backend.gpu_memory_utilization,
        "actor_rollout_ref.rollout.max_num_batched_tokens": max(8192, seq_len),
        "actor_rollout_ref.rollout.val_kwargs.n": 1,
        "actor_rollout_ref.rollout.val_kwargs.do_sample": True,
        "actor_rollout_ref.rollout.val_kwargs.temperature": float(
            evaluation.get("temperature", backend.temperature)
        ),
        "actor_rollout_ref.rollout.val_kwargs.top_p": float(evaluation.get("top_p", backend.top_p)),
        # cluster, cadence, checkpoints, logging
        "trainer.use_v1": False,
        "trainer.nnodes": nnodes,
        "trainer.n_gpus_per_node": gpus,
        "trainer.total_training_steps": int(budget.get("steps", 1)),
        "trainer.total_epochs": 1_000_000,
        "trainer.test_freq": test_freq,
        "trainer.save_freq": save_freq,
        "trainer.val_before_train": backend.val_before_train,
        "trainer.default_local_dir": paths.checkpoints,
        "trainer.resume_mode": "auto",
        # eval jobs evaluate every saved checkpoint after training: keep them all
        "trainer.max_actor_ckpt_to_keep": None
        if evaluation.get("jobs")
        else backend.max_ckpt_to_keep,
        "trainer.project_name": project,
        "trainer.experiment_name": experiment,
        "trainer.logger": list(backend.logger),
        "trainer.critic_warmup": 0,
    }
    from rollcli.backends.verl.rewards import reward_function_config

    o.update(
        reward_function_config(
            backend.reward, backend.reward_deadline_s, all_tests=backend.code_partial_credit > 0
        )
    )
    if backend.rollout_engine == "vllm":
        # vLLM's context otherwise defaults to the model's (4,096 for a stock Qwen2.5-Math-1.5B),
        # silently capping responses below max_response_len; verl refuses a value the model's
        # max_position_embeddings cannot hold, at start
        o["actor_rollout_ref.rollout.max_model_len"] = seq_len
    if backend.reward == "code" and backend.device == "cuda":
        o.update(_sandbox_workers(launch, nnodes, gpus))
    if backend.device == "cpu":
        from rollcli.backends.verl.cpu_settings import cpu_overrides

        o.update(cpu_overrides(multinode=nnodes > 1, rollout_engine=backend.rollout_engine))
    if nnodes == 1:
        # a private Ray cluster: without an address ray.init() joins whatever cluster
        # /tmp/ray/ray_current_cluster names, alive or not (a stale file hangs it for ever);
        # multi-node jobs get the bootstrap's head address at job start (runner.job_overrides)
        o.setdefault("+ray_kwargs.ray_init.address", "local")
    from rollcli.backends.verl.gpu_stack import attention_implementation

    o["+actor_rollout_ref.model.override_config.attn_implementation"] = attention_implementation(
        backend.device, backend.attention
    )
    lines = [f"{key}={render_value(value)}" for key, value in o.items()]
    for key, value in backend.verl_overrides.items():
        lines.append(f"++{key.lstrip('+')}={render_value(value)}")
    return lines


def overrides_json(lines: list[str]) -> str:
    """The overrides as a JSON list (the form stored beside a job for humans and golden tests)."""
    return json.dumps(lines, indent=1) + "\n"
