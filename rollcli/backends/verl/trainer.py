"""rollcli's allocators inside verl's trainer: a ``RayPPOTrainer`` whose ``fit()`` runs ask/tell.

The pattern of verl-recipe's DAPO trainer (a subclass with its own ``fit()``), pinned to
verl 0.9.1's legacy trainer (REFERENCE.md §5). ``fit()`` runs rollcli's one step routine,
:class:`rollcli.train.loop.TrainLoop`, over :class:`~rollcli.backends.verl.steps.VerlStepBackend`
(this trainer's calls behind the backend protocol), with the step and checkpoint cadence of
:func:`rollcli.train.drive.drive_loop`, so its metrics rows are built by the code that builds
sim's and tiny's. One training step::

    allocator.start_step(step)
    while (ask := allocator.ask()) is not None:       # one verl generation call per ask
        rows = dataset[ask.prompt_ids].sample_level_repeat(per-prompt counts)
        out  = async_rollout_manager.generate_sequences(rows)   # rewards come back in rm_scores
        allocator.tell(outcomes with refs into the rollout store)
    groups = allocator.train_groups()
    batch  = store.select(refs of every group), one uid per group (pilot + commit together)
    old log-probs (current policy; checked against the engine's, agreement.py) -> GRPO advantages over each group (or r - baseline for a
    group that carries one) -> num_minibatches optimiser steps on the padded rows
    checkpoint_manager.update_weights(step)           # rollout servers get the new weights

Groups of one rollout are not trained unless they carry a baseline (GRPO would use the raw
reward as its advantage: there is no baseline). Batches are padded with zero-mask rows so that
``num_minibatches`` equal mini-batches, each a multiple of the data-parallel size, hold them. Each step appends its CONTRACTS §4 metrics row to ``metrics.jsonl`` and logs
it through verl's tracker. The allocator, the retained rollouts and the counters are saved in
verl's checkpoint folder (``global_step_N/rollcli/``) and restored on resume. Runs in verl's
task-runner actor; imported only there.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from verl import DataProto
from verl.protocol import pad_dataproto_to_divisor, unpad_dataproto
from verl.trainer.ppo.ray_trainer import RayPPOTrainer, compute_response_mask
from verl.utils import tensordict_utils as tu
from verl.utils.metric import reduce_metrics
from verl.utils.py_functional import rename_dict
from verl.workers.utils.padding import left_right_2_no_padding

from rollcli.allocators import Group, Outcome, create_allocator
from rollcli.backends.minibatches import row_minibatches
from rollcli.backends.verl.advantages import (
    BASELINE_KEY,
    apply_rl_zvp,
    baseline_column,
    compute_group_advantages,
    shaped_token_rewards,
)
from rollcli.backends.verl.agreement import VERSION_KEY, rollout_agreement
from rollcli.backends.verl.checkpoint_rotation import prune_step_folders
from rollcli.backends.verl.overrides import verl_config_from_mapping
from rollcli.backends.verl.rewards import FORMAT_KEY, PASSED_KEY, TIMEOUT_KEY
from rollcli.backends.verl.rollouts import RolloutStore, pad_for_training
from rollcli.backends.verl.runner import stop_file
from rollcli.backends.verl.steps import VerlStepBackend
from rollcli.store.atomic import append_jsonl, atomic_write_json, read_json
from rollcli.store.folders import JobFolder
from rollcli.train.drive import drive_loop
from rollcli.train.loop import TrainLoop

__all__ = ["RollcliPPOTrainer"]
_REF_KEY = "rollcli_ref"  # traced runs only: each trained row's rollout ref


class RollcliPPOTrainer(RayPPOTrainer):
    """verl's legacy PPO trainer driven by a rollcli allocator (see the module docstring)."""

    def __init__(self, *args: Any, job_dir: str | Path, job: Mapping[str, Any], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.job_dir = Path(job_dir)
        self.job = job
        self.backend_config = verl_config_from_mapping(job["backend"])
        budget = job["budget"]
        self.allocator = create_allocator(
            job["allocator"],
            num_prompts=len(self.train_dataset),
            rollouts_per_step=int(budget["rollouts_per_step"]),
            seed=int((job.get("job") or {}).get("seed", 0)),
        )
        self.store = RolloutStore()
        self.policy_version = 0
        self.reward_timeouts = 0  # this step's rollouts whose grading hit its deadline
        self.loop: TrainLoop | None = None  # built by fit(), when verl knows its step count
        from verl.utils.dataset.rl_dataset import collate_fn

        self._collate = collate_fn

    # -- the loop ---------------------------------------------------------------------------
    def fit(self) -> None:
        from omegaconf import OmegaConf
        from verl.utils.tracking import Tracking

        tracker = Tracking(
            project_name=self.config.trainer.project_name,
            experiment_name=self.config.trainer.experiment_name,
            default_backend=self.config.trainer.logger,
            config=OmegaConf.to_container(self.config, resolve=True),
        )
        test_freq = int(self.config.trainer.test_freq)
        self.loop = TrainLoop(
            VerlStepBackend(self, trace=self.backend_config.trace_groups),
            self.allocator,
            num_steps=int(self.total_training_steps),
            eval_every=test_freq if test_freq > 0 else None,  # -1: no validation set to run
            evaluate_initial=bool(self.config.trainer.get("val_before_train", True)),
        )
        self.global_steps = 0
        self._load_checkpoint()
        self.checkpoint_manager.update_weights(self.global_steps)
        metrics = JobFolder(self.job_dir).metrics

        def emit(row: dict[str, Any]) -> None:
            if row["step"] > 0:
                row["reward/timeouts"] = self.reward_timeouts
            append_jsonl(metrics, [row])
            tracker.log(data={k: v for k, v in row.items() if k != "step"}, step=row["step"])

        stopped = drive_loop(
            self.loop,
            emit=emit,
            save=self._save_checkpoint,
            save_every=max(int(self.config.trainer.save_freq), 0),
            should_stop=stop_file(self.job_dir).exists,
            fresh=self.global_steps == 0,
        )
        if stopped:
            print(f"rollcli: stop requested, checkpointed at step {self.loop.step}")

    # -- the calls of one step (VerlStepBackend makes them) -----------------------------------
    def _prompt_batch(self, prompt_ids: list[int], uids: list[str]) -> DataProto:
        batch = DataProto.from_single_dict(
            self._collate([self.train_dataset[p] for p in prompt_ids])
        )
        batch.non_tensor_batch["uid"] = np.array(uids, dtype=object)
        batch.non_tensor_batch["rollcli_prompt"] = np.array(prompt_ids, dtype=np.int64)
        return batch

    def generate_rows(self, batch: DataProto, counts: list[int], meta: dict[str, Any]) -> DataProto:
        """Repeat each prompt row ``counts[i]`` times, generate, return rows with outputs joined."""
        batch = batch.sample_level_repeat(counts)
        prompt_ids = batch.non_tensor_batch["rollcli_prompt"].copy()
        gen = self._get_gen_batch(batch)  # moves every non-reward key into the generation batch
        gen.meta_info = {
            "eos_token_id": self.tokenizer.eos_token_id,
            "pad_token_id": self.tokenizer.pad_token_id,
            **meta,
        }
        divisor = int(self.config.actor_rollout_ref.rollout.agent.num_workers)
        padded, pad = pad_dataproto_to_divisor(gen, divisor)
        out = unpad_dataproto(self.async_rollout_manager.generate_sequences(padded), pad_size=pad)
        out.meta_info.pop("timing", None)
        batch = batch.union(out)
        batch.non_tensor_batch["rollcli_prompt"] = prompt_ids
        if "response_mask" not in batch.batch.keys():  # noqa: SIM118 - TensorDict
            batch.batch["response_mask"] = compute_response_mask(batch)
        return batch

    def generate_outcomes(self, ask: Any, step: int) -> list[Outcome]:
        """One verl generation call for the ask; outcomes with refs into the rollout store."""
        # one uid per prompt and step; groups get their own uid at training time anyway
        uids = [f"p{item.prompt_id}s{step}" for item in ask.items]
        batch = self._prompt_batch(ask.prompt_ids, uids)
        counts = [item.num_rollouts for item in ask.items]
        batch = self.generate_rows(batch, counts, {"global_steps": step, "validate": False})
        rewards = batch.batch["rm_scores"].sum(-1).float().numpy().astype(float)
        tokens = batch.batch["response_mask"].sum(-1).numpy().astype(np.int64)
        flags = batch.non_tensor_batch.get(TIMEOUT_KEY)  # graders past their deadline (score 0)
        if flags is not None:
            self.reward_timeouts += int(np.asarray(flags, dtype=float).sum())
        batch.non_tensor_batch[VERSION_KEY] = np.full(len(batch), self.policy_version, np.int64)
        refs = self.store.add(batch)
        outcomes, pos = [], 0
        for item, n in zip(ask.items, counts, strict=True):
            sl = slice(pos, pos + n)
            outcomes.append(
                Outcome(
                    prompt_id=item.prompt_id,
                    phase=item.phase,
                    rewards=rewards[sl].copy(),
                    num_tokens=tokens[sl].copy(),
                    policy_version=self.policy_version,
                    refs=tuple(refs[sl]),
                )
            )
            pos += n
        return outcomes

    def train_on(self, groups: list[Group], step: int) -> tuple[dict[str, float], dict[str, Any]]:
        """GRPO update on the groups (one uid each; singletons without a baseline skipped);
        returns the update's metrics and what was trained (for the trace)."""
        trainable = [g for g in groups if g.size >= 2 or (g.size and g.baseline is not None)]
        metrics: dict[str, float] = {"singleton_groups": float(len(groups) - len(trainable))}
        if not trainable:
            return metrics, {"rows": 0}
        refs = [int(r) for g in trainable for r in g.refs]
        batch = self.store.select(refs)
        uids = [f"g{step}x{i}" for i, g in enumerate(trainable) for _ in range(g.size)]
        batch.non_tensor_batch["uid"] = np.array(uids, dtype=object)
        batch.non_tensor_batch[BASELINE_KEY] = baseline_column(
            [g.baseline for g in trainable], [g.size for g in trainable]
        )
        scores = batch.batch["rm_scores"]
        expected = np.concatenate([np.asarray(g.rewards, float) for g in trainable])
        if not np.allclose(scores.sum(-1).float().numpy(), expected):
            raise RuntimeError("the allocator's group rewards do not match the stored rollouts")
        trained = {
            "rows": len(refs),
            "uids": uids,
            "prompts": batch.non_tensor_batch["rollcli_prompt"].tolist(),
            "rewards": scores.sum(-1).float().tolist(),
            "refs": refs,
        }
        # success stays in the scores (what the allocator read); the advantage uses the shaped
        rewards = shaped_token_rewards(
            scores,
            batch.batch["response_mask"],
            self.backend_config,
            batch.non_tensor_batch.get(FORMAT_KEY),
            batch.non_tensor_batch.get(PASSED_KEY),
        )
        if rewards is not scores:
            trained["train_rewards"] = rewards.sum(-1).float().tolist()
            metrics["shaped_reward_mean"] = float(np.mean(trained["train_rewards"]))
        batch.batch["token_level_scores"] = scores
        batch.batch["token_level_rewards"] = rewards
        if self.backend_config.trace_groups:  # to find each row's advantage after reordering
            batch.non_tensor_batch[_REF_KEY] = np.array(refs, dtype=np.int64)
        cfg = self.backend_config
        dp = self._get_dp_size(self.actor_rollout_wg, "actor")
        unit = dp if cfg.use_dynamic_bsz else dp * cfg.ppo_micro_batch_size_per_gpu
        parts, mini, padded = row_minibatches(len(batch), cfg.num_minibatches, unit)
        batch, pad = pad_for_training(batch, padded)
        metrics["pad_rows"] = float(pad)
        metrics["minibatches"] = float(parts)
        trained["minibatch_rows"] = mini
        batch.meta_info = {"temperature": self.config.actor_rollout_ref.rollout.temperature}
        if self.config.trainer.balance_batch and dp > 1:
            self._balance_batch(batch, metrics={})
        batch.meta_info["global_token_num"] = batch.batch["attention_mask"].sum(-1).tolist()
        batch.meta_info["images_seqlens"] = []
        old_log_prob, _ = self._compute_old_log_prob(batch)
        entropys = old_log_prob.batch.pop("entropys")  # RL-ZVP's H_t (the old pass's)
        batch = batch.union(old_log_prob)
        # the engine's log-probs against the actor's: the last weight sync, checked
        metrics.update(rollout_agreement(batch, self.policy_version))
        if self.use_reference_policy:
            batch = batch.union(self._compute_ref_log_prob(batch))
        batch = compute_group_advantages(batch, self.config.algorithm)
        if cfg.zero_variance_advantage == "rl_zvp":
            metrics["zvp_rows"] = float(apply_rl_zvp(batch, entropys, cfg.rl_zvp_alpha))
        if self.backend_config.trace_groups:
            trained["advantages"] = _traced_advantages(batch, refs)
        metrics.update(self._update_actor_minibatches(batch, mini))
        trained["optimizer_steps"] = metrics.get("optimizer_steps")
        self.policy_version += 1
        return metrics, trained

    def _update_actor_minibatches(self, batch: DataProto, mini: int) -> dict[str, float]:
        """verl's ``_update_actor`` with the mini-batch size of *this* step (rows); the returned
        ``optimizer_steps`` counts the optimiser steps verl took (one grad norm each)."""
        actor = self.config.actor_rollout_ref.actor
        batch.meta_info["multi_turn"] = self.config.actor_rollout_ref.rollout.multi_turn.enable
        td = left_right_2_no_padding(batch.to_tensordict())
        tu.assign_non_tensor(
            td,
            calculate_entropy=bool(actor.calculate_entropy or actor.entropy_coeff != 0.0),
            distillation_use_topk=False,
            distillation_only=False,
            global_batch_size=mini,
            mini_batch_size=mini,
            epochs=actor.ppo_epochs,
            seed=actor.data_loader_seed,
            dataloader_kwargs={"shuffle": actor.shuffle},
            compute_loss=True,
        )
        output = rename_dict(tu.get(self.actor_rollout_wg.update_actor(td), "metrics"), "actor/")
        output.pop("actor/mfu", None)
        norms = output.get("actor/grad_norm", [])
        steps = len(norms) if isinstance(norms, list) else 1
        reduced = {k.removeprefix("actor/"): float(v) for k, v in reduce_metrics(output).items()}
        return {**reduced, "optimizer_steps": float(steps)}

    # -- checkpoints ------------------------------------------------------------------------
    def _state_folder(self) -> Path:
        root = Path(self.config.trainer.default_local_dir)
        return root / f"global_step_{self.global_steps}" / "rollcli"

    def _save_checkpoint(self) -> None:
        folder = self._state_folder()
        self.store.save(folder)
        state = {
            "step": self.global_steps,
            "allocator": self.allocator.state_dict(),
            "policy_version": self.policy_version,
            "wall_s": self.loop.wall_s if self.loop is not None else 0.0,
        }
        atomic_write_json(folder / "state.json", state)
        super()._save_checkpoint()  # writes latest_checkpointed_iteration.txt last
        # verl rotated only actor/ (and only this attempt's): rotate whole step folders
        keep = self.config.trainer.get("max_actor_ckpt_to_keep", None)
        prune_step_folders(Path(self.config.trainer.default_local_dir), keep)

    def _load_checkpoint(self):
        result = super()._load_checkpoint()
        if self.global_steps > 0:
            folder = self._state_folder()
            if not (folder / "state.json").is_file():
                raise RuntimeError(f"verl checkpoint {folder.parent} has no rollcli state")
            state = read_json(folder / "state.json")
            self.allocator.load_state_dict(state["allocator"])
            self.store.load(folder)
            self.policy_version = int(state["policy_version"])
            if self.loop is not None:
                self.loop.load_state_dict({"step": self.global_steps, "wall_s": state["wall_s"]})
        return result


def _traced_advantages(batch: DataProto, refs: list[int]) -> list[float]:
    """The advantage each trained rollout got (one value over its response tokens), in ``refs``
    order; padding rows (no response tokens) are left out, and so is a response of no tokens
    (it trains on nothing: 0.0)."""
    mask = batch.batch["response_mask"].float()
    tokens = mask.sum(-1)
    per_row = (batch.batch["advantages"].float() * mask).sum(-1) / tokens.clamp_min(1.0)
    by_ref = {}
    for ref, n, value in zip(
        batch.non_tensor_batch[_REF_KEY].tolist(), tokens.tolist(), per_row.tolist(), strict=True
    ):
        if n > 0:
            by_ref.setdefault(int(ref), value)
    return [by_ref.get(r, 0.0) for r in refs]
