"""The tiny backend: generate rollouts, GRPO-update and evaluate a small transformer on CPU.

It implements :class:`rollcli.backends.api.BaseBackend`. Rollouts live in an in-memory store
keyed by int refs (a counter in the state). ``update`` shuffles the step's groups and splits
them, group-aligned, into ``num_minibatches`` mini-batches (rollcli/backends/minibatches.py);
before the first Adam step it computes every mini-batch's old log-probabilities with the current
policy (as verl does, so stale Pilot-Commit pilots get no importance correction), then each of
``ppo_epochs`` passes takes one Adam step per mini-batch on the clipped token-mean loss, every
mini-batch clipping against those old log-probabilities. Rows whose advantage is 0 are left out
of the forward pass but their tokens stay in their mini-batch's token-mean denominator, which
leaves loss and gradient unchanged (only when ``kl_coef`` is 0; with a KL term every row is
forwarded).

Determinism: torch runs single-threaded here (``num_threads``), sampling uses a generator
seeded from the run seed and saved in the state, evaluation uses its own generator, re-seeded
identically for every evaluation (common random numbers), so evaluating never perturbs
training; the mini-batch shuffle has a third generator. ``state_dict`` holds weights, Adam
state, generator states, the ref counter and the stored rollouts: a resumed run is bit-exact
on the same machine, torch version and thread count (see docs/tiny.md).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rollcli.allocators.api import Ask, Group, Outcome
from rollcli.backends.api import BaseBackend
from rollcli.backends.minibatches import split_minibatches
from rollcli.backends.shaping import shaping_enabled, training_rewards
from rollcli.backends.tiny.base import create_model, load_or_build_base, read_base_info
from rollcli.backends.tiny.config import TinyConfig
from rollcli.backends.tiny.grpo import group_advantages, policy_loss
from rollcli.backends.tiny.model import (
    pad_batch,
    response_logprobs,
    response_logprobs_entropy,
    sample,
)
from rollcli.backends.tiny.tasks import (
    grade,
    make_eval_set,
    make_train_pool,
    max_answer_len,
)
from rollcli.backends.zvp import rl_zvp_advantages

__all__ = ["TinyBackend", "config_from_mapping"]

log = logging.getLogger("rollcli.backends.tiny")


def config_from_mapping(mapping: Mapping[str, Any]) -> TinyConfig:
    """A :class:`TinyConfig` from a spec section; unknown keys raise ``ValueError`` naming them."""
    values = dict(mapping)
    kind = values.pop("kind", "tiny")
    if kind != "tiny":
        raise ValueError(f"the tiny backend got a config of kind '{kind}'")
    names = {f.name for f in dataclasses.fields(TinyConfig)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ValueError(
            f"tiny backend: unknown knob(s) {', '.join(unknown)}; valid: {', '.join(sorted(names))}"
        )
    if "adam_betas" in values:
        values["adam_betas"] = tuple(values["adam_betas"])
    if "task_mix" in values:
        values["task_mix"] = dict(values["task_mix"])
    return TinyConfig(**values)


class TinyBackend(BaseBackend):
    """A small GPT with a finite pool of character-task prompts and a held-out set."""

    kind = "tiny"

    def __init__(self, config: TinyConfig, *, seed: int, job_dir: Path | None = None) -> None:
        self.config = config
        self.seed = int(seed)
        self.job_dir = job_dir
        torch.set_num_threads(config.num_threads)
        self.pool = make_train_pool(
            config.task_mix,
            config.max_level,
            config.num_train_prompts,
            config.task_seed,
            config.tasks,
        )
        self.eval_set = make_eval_set(
            config.tasks,
            config.max_level,
            config.eval_prompts_per_level,
            config.task_seed,
            self.pool,
        )
        self.max_new_tokens = max_answer_len(config.max_level)
        base = load_or_build_base(config)
        self.model = create_model(config)
        self.model.load_state_dict(base)
        self.reference = None
        if config.kl_coef > 0:
            self.reference = create_model(config)
            self.reference.load_state_dict(base)
            self.reference.requires_grad_(False)
        self.optimizer = torch.optim.Adam(
            self.model.parameters(), lr=config.lr, betas=tuple(config.adam_betas)
        )
        self.generator = torch.Generator().manual_seed(_mix(self.seed, 0x5A3F))
        # shuffles each step's groups into mini-batches; its own stream, so the rollouts a run
        # samples do not depend on num_minibatches
        self._shuffle = np.random.default_rng(np.random.SeedSequence([self.seed, 0x3B1C]))
        self._version = 0
        self._next_ref = 0
        self._store: dict[int, tuple[int, tuple[int, ...]]] = {}
        self.base_info = read_base_info(config) or {}
        probe = self.base_info.get("probe")
        if probe:
            log.info(
                "tiny base model: sampled accuracy %.3f, zero-variance share of 8-rollout groups "
                "%.2f (all right %.2f, all wrong %.2f)",
                probe["accuracy"],
                probe["zero_var_frac"],
                probe["all_right_frac"],
                probe["all_wrong_frac"],
            )

    # -- protocol -----------------------------------------------------------------------------
    @property
    def num_prompts(self) -> int:
        return len(self.pool)

    @property
    def policy_version(self) -> int:
        return self._version

    def generate(self, ask: Ask) -> list[Outcome]:
        prompts: list[tuple[int, ...]] = []
        for item in ask.items:
            if not 0 <= item.prompt_id < len(self.pool):
                raise ValueError(
                    f"prompt id {item.prompt_id} is outside the pool of {len(self.pool)}"
                )
            prompts.extend([self.pool.prompts[item.prompt_id]] * item.num_rollouts)
        responses = sample(
            self.model,
            prompts,
            max_new_tokens=self.max_new_tokens,
            temperature=self.config.temperature,
            generator=self.generator,
        )
        outcomes, cursor = [], 0
        for item in ask.items:
            answer = self.pool.answers[item.prompt_id]
            chunk = responses[cursor : cursor + item.num_rollouts]
            cursor += item.num_rollouts
            refs = tuple(range(self._next_ref, self._next_ref + len(chunk)))
            self._next_ref += len(chunk)
            for ref, response in zip(refs, chunk, strict=True):
                self._store[ref] = (item.prompt_id, response)
            outcomes.append(
                Outcome(
                    prompt_id=item.prompt_id,
                    phase=item.phase,
                    rewards=np.asarray([grade(r, answer) for r in chunk], dtype=np.float64),
                    num_tokens=np.asarray([len(r) for r in chunk], dtype=np.int64),
                    policy_version=self._version,
                    refs=refs,
                )
            )
        return outcomes

    def _training_rewards(self, group: Group) -> np.ndarray:
        """The group's success rewards plus the configured shaping (rollcli.backends.shaping)."""
        cfg = self.config
        if not shaping_enabled(cfg.overlong_buffer_len, cfg.overlong_penalty_factor):
            return np.asarray(group.rewards, dtype=np.float64)
        lengths = [len(self._store[ref][1]) if ref in self._store else 0 for ref in group.refs]
        return training_rewards(
            group.rewards,
            np.asarray(lengths, dtype=np.int64),
            max_len=self.max_new_tokens,
            overlong_buffer_len=cfg.overlong_buffer_len,
            overlong_penalty_factor=cfg.overlong_penalty_factor,
        )

    def update(self, groups: list[Group]) -> dict[str, float]:
        cfg = self.config
        # the advantage uses the training reward (success + shaping), from each stored response
        shaped = [self._training_rewards(g) for g in groups]
        advantages = group_advantages(
            shaped,
            std_normalize=cfg.std_normalize,
            baselines=[g.baseline for g in groups],
        )
        # one (prompts, responses, advantages, all-token count, RL-ZVP signs) per group;
        # zero-advantage rows are not forwarded but their tokens stay in the token-mean
        # denominator. A row of a zero-variance group under RL-ZVP has sign +1 (right) or -1
        # (wrong): its token advantages come from the pre-update entropies (_minibatch).
        zvp = cfg.zero_variance_advantage == "rl_zvp"
        rows: list[tuple[list, list, list[float], int, list[int]]] = []
        zvp_rows = 0
        for group, adv, train in zip(groups, advantages, shaped, strict=True):
            flat = zvp and group.baseline is None and train.size >= 2 and np.ptp(train) == 0
            prompts, responses, adv_rows, tokens, signs = [], [], [], 0, []
            for ref, a, success in zip(group.refs, adv, group.rewards, strict=True):
                if ref not in self._store:
                    raise KeyError(
                        f"rollout ref {ref} is not stored (freed by retain() or never generated)"
                    )
                prompt_id, response = self._store[ref]
                tokens += len(response)
                sign = (1 if success > 0.5 else -1) if flat else 0
                if a != 0.0 or sign or cfg.kl_coef > 0:
                    prompts.append(self.pool.prompts[prompt_id])
                    responses.append(response)
                    adv_rows.append(float(a))
                    signs.append(sign)
            zvp_rows += sum(1 for x in signs if x)
            rows.append((prompts, responses, adv_rows, tokens, signs))
        # drawn on every update (k > 1), whatever the groups: one draw per step keeps resume simple
        chunks = split_minibatches([g.size for g in groups], cfg.num_minibatches, self._shuffle)
        self._version += 1
        num_tokens = sum(r[3] for r in rows)
        forwarded = [a for r in rows for a in r[2]]
        chunk_rollouts = [sum(groups[i].size for i in c) for c in chunks] or [0]
        metrics: dict[str, float] = {
            "num_rollouts": float(sum(g.size for g in groups)),
            "num_tokens": float(num_tokens),
            "rows_forwarded": float(len(forwarded)),
            "minibatches": float(len(chunks)),
            "minibatch_rollouts_min": float(min(chunk_rollouts)),
            "minibatch_rollouts_max": float(max(chunk_rollouts)),
        }
        if zvp:
            metrics["zvp_rows"] = float(zvp_rows)
        if shaping_enabled(cfg.overlong_buffer_len, cfg.overlong_penalty_factor) and shaped:
            metrics["shaped_reward_mean"] = float(np.concatenate(shaped).mean())
        if (
            not forwarded and not zvp_rows
        ) or num_tokens == 0:  # nothing to learn: no Adam step (same row keys)
            idle = {"pg_loss": 0.0, "clip_frac": 0.0, "ratio_mean": 1.0, "loss": 0.0}
            if cfg.kl_coef > 0:
                idle["kl"] = 0.0
            return {
                **metrics,
                **idle,
                "grad_norm": 0.0,
                "adv_abs_mean": 0.0,
                "optimizer_steps": 0.0,
                "zero_grad_steps": 0.0,
                "skipped": 1.0,
            }
        self.model.train()
        batches = [self._minibatch([rows[i] for i in chunk]) for chunk in chunks]
        sums: dict[str, float] = {}
        num_steps = cfg.ppo_epochs * len(batches)
        zero_grad_steps = 0
        for _ in range(cfg.ppo_epochs):
            for batch in batches:
                self.optimizer.zero_grad(set_to_none=True)
                if batch is None:
                    # a mini-batch without a non-zero advantage: a zero gradient; Adam still
                    # steps (along its momentum), as verl's optimiser does on such a batch
                    parts = {"pg_loss": 0.0, "clip_frac": 0.0, "ratio_mean": 1.0, "loss": 0.0}
                    if cfg.kl_coef > 0:
                        parts["kl"] = 0.0
                    for p in self.model.parameters():
                        p.grad = torch.zeros_like(p)
                    zero_grad_steps += 1
                else:
                    inputs, targets, mask, adv_t, old_logp, ref_logp, tokens = batch
                    logp = response_logprobs(self.model, inputs, targets, cfg.temperature)
                    loss, parts = policy_loss(
                        logp,
                        old_logp,
                        adv_t,
                        mask,
                        clip_eps=cfg.clip_eps,
                        num_tokens=float(tokens),
                        ref_logp=ref_logp,
                        kl_coef=cfg.kl_coef,
                    )
                    loss.backward()
                    parts["loss"] = float(loss.detach())
                grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
                self.optimizer.step()
                parts["grad_norm"] = float(grad_norm)
                for key, value in parts.items():
                    sums[key] = sums.get(key, 0.0) + value / num_steps
        metrics["adv_abs_mean"] = float(np.mean(np.abs(forwarded))) if forwarded else 0.0
        metrics["optimizer_steps"] = float(num_steps)
        metrics["zero_grad_steps"] = float(zero_grad_steps)
        return {**metrics, **sums, "skipped": 0.0}

    def _minibatch(
        self, rows: list[tuple[list, list, list[float], int, list[int]]]
    ) -> tuple | None:
        """Padded tensors of one mini-batch with the old (and reference) log-probs, computed with
        the policy before the update's first Adam step; None when no row is forwarded. With
        RL-ZVP rows the advantages are per token ([B, T]), from that same pass's entropies."""
        prompts = [p for r in rows for p in r[0]]
        if not prompts:
            return None
        responses = [x for r in rows for x in r[1]]
        adv_t = torch.tensor([a for r in rows for a in r[2]], dtype=torch.float32)
        signs = torch.tensor([x for r in rows for x in r[4]], dtype=torch.long)
        tokens = sum(r[3] for r in rows)
        inputs, targets, mask = pad_batch(prompts, responses)
        temperature = self.config.temperature
        with torch.no_grad():
            if bool(signs.any()):
                old_logp, entropy = response_logprobs_entropy(
                    self.model, inputs, targets, temperature
                )
                shaped = rl_zvp_advantages(signs > 0, entropy, mask, self.config.rl_zvp_alpha)
                per_token = adv_t.unsqueeze(1).expand_as(mask)
                adv_t = torch.where((signs != 0).unsqueeze(1), shaped, per_token)
            else:
                old_logp = response_logprobs(self.model, inputs, targets, temperature)
            ref_logp = None
            if self.reference is not None:
                ref_logp = response_logprobs(self.reference, inputs, targets, temperature)
        return inputs, targets, mask, adv_t, old_logp, ref_logp, tokens

    def evaluate(self) -> dict[str, float]:
        """Greedy accuracy, mean@k sampled accuracy, and per level / per task for the headline."""
        cfg = self.config
        ev = self.eval_set
        # Common random numbers: every evaluation of every run draws the same uniforms, so a
        # change in score reflects the policy, not the draw (see docs/tiny.md, Evaluation).
        gen = torch.Generator().manual_seed(_mix(cfg.task_seed, 0xE7A1))
        greedy = sample(
            self.model,
            ev.prompts,
            max_new_tokens=self.max_new_tokens,
            temperature=1.0,
            generator=gen,
            greedy=True,
        )
        greedy_ok = np.asarray([grade(r, a) for r, a in zip(greedy, ev.answers, strict=True)])
        out: dict[str, float] = {"greedy": float(greedy_ok.mean())}
        per_prompt = greedy_ok
        if cfg.eval_mode == "sampled":
            k = cfg.eval_samples
            temperature = cfg.eval_temperature or cfg.temperature
            prompts = [p for p in ev.prompts for _ in range(k)]
            sampled = sample(
                self.model,
                prompts,
                max_new_tokens=self.max_new_tokens,
                temperature=temperature,
                generator=gen,
            )
            answers = [a for a in ev.answers for _ in range(k)]
            ok = np.asarray([grade(r, a) for r, a in zip(sampled, answers, strict=True)])
            per_prompt = ok.reshape(-1, k).mean(axis=1)
            out[f"mean@{k}"] = float(per_prompt.mean())
        out["accuracy"] = float(per_prompt.mean())
        for level in range(1, cfg.max_level + 1):
            out[f"level{level}"] = float(per_prompt[ev.levels == level].mean())
        tasks = np.asarray(ev.tasks)
        for task in cfg.tasks:
            out[f"task_{task}"] = float(per_prompt[tasks == task].mean())
        return out

    def retain(self, refs: Iterable[Any]) -> None:
        keep = {int(r) for r in refs}
        self._store = {r: v for r, v in self._store.items() if r in keep}

    # -- state ------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "seed": self.seed,
            "policy_version": self._version,
            "next_ref": self._next_ref,
            "model": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
            "optimizer": copy.deepcopy(self.optimizer.state_dict()),
            "generator": self.generator.get_state().clone(),
            "shuffle": copy.deepcopy(self._shuffle.bit_generator.state),
            "store": [[r, p, list(t)] for r, (p, t) in sorted(self._store.items())],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("kind") != self.kind:
            raise ValueError(f"checkpoint is of backend '{state.get('kind')}', not 'tiny'")
        self.seed = int(state["seed"])
        self._version = int(state["policy_version"])
        self._next_ref = int(state["next_ref"])
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))
        self.generator.set_state(torch.as_tensor(state["generator"], dtype=torch.uint8).clone())
        if "shuffle" in state:  # checkpoints written before mini-batches have none
            self._shuffle.bit_generator.state = copy.deepcopy(state["shuffle"])
        self._store = {int(r): (int(p), tuple(int(x) for x in t)) for r, p, t in state["store"]}

    def close(self) -> None:
        self._store.clear()


def _mix(*values: int) -> int:
    """A 63-bit seed from several ints (numpy's SeedSequence), for torch generators."""
    return int(np.random.SeedSequence(list(values)).generate_state(2, np.uint64)[0] >> np.uint64(1))
