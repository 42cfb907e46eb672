"""verl's task runner for rollcli jobs: the stock legacy runner, building a RollcliPPOTrainer.

``verl.trainer.main_ppo.run_ppo(config, task_runner_class=RollcliTaskRunner)`` starts this Ray
actor; it registers the actor/rollout workers and resource pools exactly as verl's
``main_ppo_v0.TaskRunner`` does, then builds :class:`~rollcli.backends.verl.trainer.RollcliPPOTrainer`
for the job named by ``config.rollcli.job_dir``, records where its workers run
(``verl/workers.json``) and runs its ``fit()``.
"""

from __future__ import annotations

from pathlib import Path

import ray
from omegaconf import OmegaConf, open_dict
from verl.trainer.main_ppo_v0 import BaseTaskRunner

__all__ = ["RollcliTaskRunner"]


@ray.remote(num_cpus=1)
class RollcliTaskRunner(BaseTaskRunner):
    """Set up verl's workers and datasets, then train with rollcli's allocator."""

    def run(self, config) -> None:
        from verl.trainer.ppo.utils import create_rl_dataset, need_critic, need_reference_policy
        from verl.utils.config import omega_conf_to_dataclass, validate_config
        from verl.utils.dataset.rl_dataset import collate_fn
        from verl.workers.config import HFModelConfig

        from rollcli.backends.verl.runner import load_job
        from rollcli.backends.verl.trainer import RollcliPPOTrainer

        OmegaConf.resolve(config)
        job_dir = Path(config.rollcli.job_dir)
        with open_dict(config):
            del config["rollcli"]
        job = load_job(job_dir)

        self.add_actor_rollout_worker(config)
        self.add_critic_worker(config)
        self.add_reward_model_resource_pool(config)
        validate_config(
            config=config,
            use_reference_policy=need_reference_policy(config),
            use_critic=need_critic(config),
        )
        model_config: HFModelConfig = omega_conf_to_dataclass(config.actor_rollout_ref.model)
        tokenizer, processor = model_config.tokenizer, model_config.processor
        resource_pool_manager = self.init_resource_pool_mgr(config)
        train_dataset = create_rl_dataset(
            config.data.train_files, config.data, tokenizer, processor, is_train=True
        )
        val_dataset = create_rl_dataset(
            config.data.val_files, config.data, tokenizer, processor, is_train=False
        )
        from verl.single_controller.ray import RayWorkerGroup

        trainer = RollcliPPOTrainer(
            config=config,
            tokenizer=tokenizer,
            processor=processor,
            role_worker_mapping=self.role_worker_mapping,
            resource_pool_manager=resource_pool_manager,
            ray_worker_group_cls=RayWorkerGroup,
            train_dataset=train_dataset,
            val_dataset=val_dataset,
            collate_fn=collate_fn,
            job_dir=job_dir,
            job=job,
        )
        try:
            trainer.init_workers()
            _record_placement(trainer.actor_rollout_wg.workers, job_dir)
            trainer.fit()
        finally:
            _release(resource_pool_manager)


def _where(actor: object) -> dict:
    """Run inside a worker actor (``__ray_call__``): the host, address and process it runs in."""
    import os
    import socket

    return {
        "host": socket.gethostname(),
        "ip": ray.util.get_node_ip_address(),
        "node_id": ray.get_runtime_context().get_node_id(),
        "pid": os.getpid(),
        "rank": int(os.environ.get("RANK", "-1")),
        "world_size": int(os.environ.get("WORLD_SIZE", "-1")),
        "master": f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}",
    }


def _record_placement(workers, job_dir: Path) -> None:
    """``<job>/verl/workers.json``: where each actor/rollout worker runs (one per GPU; on
    several nodes, the proof that the job spans them)."""
    from rollcli.store.atomic import atomic_write_json

    rows = ray.get([worker.__ray_call__.remote(_where) for worker in workers], timeout=120)
    atomic_write_json(job_dir / "verl" / "workers.json", {"actor_rollout": rows})


def _release(resource_pool_manager) -> None:
    """Remove the job's placement groups (and with them its worker actors).

    Ray ties placement groups to the *driver*, not to this actor: without this, a second job in
    the same process would find every GPU still reserved by the first.
    """
    from ray.util.placement_group import remove_placement_group

    for pool in resource_pool_manager.resource_pool_dict.values():
        for pg in getattr(pool, "pgs", None) or []:
            try:
                remove_placement_group(pg)
            except Exception as error:  # already gone: nothing to release
                print(f"rollcli: could not remove placement group: {error}")
