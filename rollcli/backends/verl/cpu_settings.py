"""The environment and verl overrides of the CPU path (no torch or verl import: specs compile them).

:mod:`rollcli.backends.verl.cpu_support` is the module verl loads in every process when these
settings are active (``VERL_USE_EXTERNAL_MODULES``); the values follow REFERENCE.md §5.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MODULE", "cpu_environment", "cpu_overrides"]

MODULE = "rollcli.backends.verl.cpu_support"


def cpu_environment() -> dict[str, str]:
    """Environment variables for the driver and (through Ray's runtime env) every verl process."""
    return {
        "VERL_USE_EXTERNAL_MODULES": MODULE,
        "VERL_PLATFORM": "cpu",
        "VERL_ENGINE_DEVICE": "cuda",  # verl registers its FSDP engine under the cuda key only
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
        "RAY_DEDUP_LOGS": "0",
    }


def cpu_overrides(num_cpus: int = 8, *, multinode: bool = False) -> dict[str, Any]:
    """verl overrides of the CPU path: fp32 eager FSDP2 on gloo, hf rollouts, fake GPUs for Ray.

    One node: a private local Ray cluster with one fake GPU. ``multinode``: the job's Ray
    cluster (``RAY_ADDRESS``, started by rollcli.launch.ray_bootstrap with the fake GPUs), which
    ``ray.init`` must join without resource arguments; ``trainer.nnodes`` is then the caller's.
    """
    env = cpu_environment()
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
