"""The sim backend: a Bernoulli policy over a latent ability, trained by the real GRPO estimator.

The policy answers training prompt ``i`` correctly with probability
``p_i = sigmoid(w_i . theta + u_i - d_i)``: ``theta`` is a vector of latent skills shared by every
prompt, ``w_i`` the prompt's skill loadings, ``d_i`` its difficulty (see
:mod:`rollcli.backends.sim.pool`) and ``u_i`` a per-prompt offset (memorisation) that starts at 0
and moves only when prompt ``i`` is trained. Held-out prompts have no offset: held-out accuracy
measures the shared abilities only. Generating samples binary rewards and response lengths;
updating applies the GRPO estimator to the sampled rewards, one optimiser step per mini-batch::

    A_j  = (r_j - mean_g) / (std_g + eps)          # group-normalised advantage (0 for singletons)
    g_b  = 1/N_b sum_{j in b} A_j * [(r_j - p_i) w_i + score_noise * xi_j]
    theta <- theta + Adam(g_b)                        # per mini-batch b (num_minibatches of them)
    u_i  <- u_i + prompt_lr * sum_{j of i in b} A_j * [(r_j - p_i) + prompt_noise * zeta_j]

``(r - p) w_i`` is the exact score ``d log P(r | theta) / d theta`` of the Bernoulli policy, so a
group whose rewards are all equal has zero advantage and teaches nothing, and an update on one
prompt moves every prompt that shares its skills. ``xi_j`` and ``zeta_j`` are fixed per rollout
at generation (the part of a response's gradient unrelated to correctness): zero-mean, so the
estimator stays unbiased, but they make the signal-to-noise ratio of a batch depend on how many
informative rollouts it holds. A group that carries a baseline ``b`` (``Group.baseline``,
Reinforce-Ada's global statistics) gets ``A_j = r_j - b`` instead. The step's groups are shuffled
with the backend's generator and
cut group-aligned into mini-batches (:func:`rollcli.backends.minibatches.split_minibatches`);
all of a step's rollouts come from one policy version. Everything is vectorised numpy and
deterministic under the seed.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from rollcli.allocators.api import Ask, Group, Outcome
from rollcli.backends.api import BaseBackend
from rollcli.backends.minibatches import split_minibatches
from rollcli.backends.shaping import shaping_enabled, training_rewards
from rollcli.backends.sim.config import SimConfig
from rollcli.backends.sim.pool import SimPool, build_pool, sigmoid
from rollcli.backends.sim.update import group_advantages, group_sums, noise_scale, with_baselines

__all__ = ["SimBackend", "sim_config_from_mapping"]

_STORE_FIELDS = ("refs", "prompt", "reward", "tokens", "noise", "prompt_noise")


def sim_config_from_mapping(mapping: Mapping[str, Any]) -> SimConfig:
    """A :class:`SimConfig` from a spec section; unknown keys fail with the list of valid ones."""
    values = dict(mapping)
    names = [f.name for f in dataclasses.fields(SimConfig)]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ValueError(
            f"sim backend has no knob {', '.join(repr(k) for k in unknown)}. "
            f"Valid: {', '.join(names)}."
        )
    return SimConfig(**values)


class SimBackend(BaseBackend):
    """An analytic policy with a finite training pool and a held-out set (see module docstring)."""

    kind = "sim"

    def __init__(self, config: SimConfig, *, seed: int) -> None:
        self.config = config
        self.seed = int(seed)
        self.pool: SimPool = build_pool(config)
        k = config.num_skills
        self.theta = np.full(k, float(config.initial_ability))
        self.offset = np.zeros(config.num_train_prompts)  # per-prompt logit offsets u_i
        self._m = np.zeros(k)
        self._v = np.zeros(k)
        self._t = 0
        self._version = 0
        self._next_ref = 0
        self.rng = np.random.default_rng([self.seed, 0x51B])
        self._store = _empty_store(k)

    # -- protocol -----------------------------------------------------------------------------
    @property
    def num_prompts(self) -> int:
        return self.config.num_train_prompts

    @property
    def policy_version(self) -> int:
        return self._version

    def success_probabilities(self, prompt_ids: np.ndarray) -> np.ndarray:
        ids = self._check_ids(np.asarray(prompt_ids, dtype=np.int64))
        return sigmoid(self._logits(ids))

    def generate(self, ask: Ask) -> list[Outcome]:
        items = ask.items
        if not items:
            return []
        ids = self._check_ids(np.array([i.prompt_id for i in items], dtype=np.int64))
        counts_list = [i.num_rollouts for i in items]
        counts = np.array(counts_list, dtype=np.int64)
        n = int(counts.sum())
        cfg = self.config
        per_rollout = np.repeat(np.arange(len(items)), counts)
        p = sigmoid(self._logits(ids))[per_rollout]
        rewards = (self.rng.random(n) < p).astype(np.float64)
        lengths = self.pool.base_tokens[ids][per_rollout]
        lengths = lengths * np.where(rewards > 0, 1.0, cfg.wrong_length_ratio)
        if cfg.length_sigma > 0:
            lengths = lengths * np.exp(cfg.length_sigma * self.rng.standard_normal(n))
        tokens = np.clip(np.rint(lengths), 1, cfg.max_tokens).astype(np.int64)
        k = cfg.num_skills
        # drawn flat and reshaped: the same numbers as standard_normal((n, k)), faster
        noise = (
            self.rng.standard_normal(n * k).reshape(n, k)
            if cfg.score_noise > 0
            else np.zeros((n, k))
        )
        # drawn last, and only when used, so prompt_noise=0 leaves every other draw as before
        prompt_noise = (
            self.rng.standard_normal(n) if cfg.prompt_lr > 0 and cfg.prompt_noise > 0 else None
        )
        first = self._next_ref
        self._next_ref = first + n
        self._append(
            refs=np.arange(first, first + n, dtype=np.int64),
            prompt=ids[per_rollout],
            reward=rewards,
            tokens=tokens,
            noise=noise,
            prompt_noise=np.zeros(n) if prompt_noise is None else prompt_noise,
        )

        # one Outcome per item: views into the step's arrays, refs sliced from one tuple
        all_refs = tuple(range(first, first + n))
        ends = list(itertools.accumulate(counts_list))
        starts = [0, *ends[:-1]]
        if counts_list.count(counts_list[0]) == len(counts_list):  # equal counts: row views
            per_item = counts_list[0]
            item_rewards = list(rewards.reshape(-1, per_item))
            item_tokens = list(tokens.reshape(-1, per_item))
        else:
            item_rewards = [rewards[a:b] for a, b in zip(starts, ends, strict=True)]
            item_tokens = [tokens[a:b] for a, b in zip(starts, ends, strict=True)]
        return Outcome.many(
            [i.prompt_id for i in items],
            [i.phase for i in items],
            item_rewards,
            item_tokens,
            self._version,
            [all_refs[a:b] for a, b in zip(starts, ends, strict=True)],
        )

    def update(self, groups: list[Group]) -> dict[str, float]:
        """One rollout step: ``num_minibatches`` optimiser steps on shuffled, group-aligned parts.

        Fewer groups than ``num_minibatches`` give one optimiser step per group; no groups give
        one step on a zero gradient (Adam's momentum still moves ``theta``). The metrics are
        means over the step's optimiser steps; ``noise_scale`` is ``B_noise`` over the
        mini-batch's rollouts (absent when no mini-batch had any signal).
        """
        cfg = self.config
        sizes = np.array([len(g.refs) for g in groups], dtype=np.int64)
        parts = split_minibatches(sizes, cfg.num_minibatches, self.rng) if groups else []
        k = cfg.num_skills
        if not parts:
            self._optimizer_step(np.zeros(k))
            self._version += 1
            return {
                "grad_norm": 0.0,
                "signal_norm": 0.0,
                "adv_abs_mean": 0.0,
                "informative_groups": 0.0,
                "true_signal": 0.0,
                "true_signal_informative": 0.0,
                "optimizer_steps": 1.0,
                "minibatch_rollouts": 0.0,
                "ability": float(self.theta.mean()),
            }
        total = int(sizes.sum())
        refs = np.fromiter(itertools.chain.from_iterable(g.refs for g in groups), np.int64, total)
        idx = self._lookup(refs)
        group_prompts = np.array([g.prompt_id for g in groups], dtype=np.int64)
        prompt = self._store["prompt"][idx]
        gid = np.repeat(np.arange(len(groups)), sizes)
        if not np.array_equal(prompt, group_prompts[gid]):
            bad = int(np.flatnonzero(prompt != group_prompts[gid])[0])
            raise ValueError(
                f"rollout {int(refs[bad])} was generated for prompt {int(prompt[bad])}, "
                f"not for the group's prompt {int(group_prompts[gid[bad]])}"
            )
        rewards = self._store["reward"][idx]
        shaped = training_rewards(
            rewards,
            self._store["tokens"][idx],
            max_len=cfg.max_tokens,
            overlong_buffer_len=cfg.overlong_buffer_len,
            overlong_penalty_factor=cfg.overlong_penalty_factor,
        )
        adv = group_advantages(shaped, gid, sizes, cfg.std_normalize, cfg.adv_eps)
        adv = with_baselines(adv, shaped, gid, groups)
        multi = k > 1
        sums = group_sums(
            adv=adv,
            rewards=rewards,
            p=sigmoid(self._logits(prompt)),
            loadings=self.pool.train_loadings[prompt] if multi else None,
            noise=self._store["noise"][idx],
            prompt_noise=self._store["prompt_noise"][idx] if cfg.prompt_lr > 0 else None,
            gid=gid,
            sizes=sizes,
            score_noise=cfg.score_noise,
            prompt_noise_scale=cfg.prompt_noise,
        )
        # the signal the step bought, by the true p before the update: sqrt(p(1-p)) per group
        p_groups = sigmoid(self._logits(group_prompts))
        group_std = np.sqrt(p_groups * (1.0 - p_groups))
        true_signal = float(group_std.sum())
        true_signal_informative = float(group_std[sums.abs_adv > 0].sum())
        grad_norms, signal_norms, scales, b_noises = [], [], [], []
        for part in parts:
            ids = group_prompts[part]
            p_now = sigmoid(self._logits(ids))
            group_signal = sums.adv_reward[part] - p_now * sums.adv[part]
            n_b = int(sums.size[part].sum())
            if multi:
                signal = (group_signal @ self.pool.train_loadings[ids]) / n_b
            else:
                signal = np.array([group_signal.sum() / n_b])
            grad = signal + sums.noise[part].sum(axis=0) / n_b
            b_noise = noise_scale(float(sums.sq_norm[part].sum()), grad, signal, n_b)
            if b_noise is not None:
                b_noises.append(b_noise)
                scales.append(b_noise / n_b)
            grad_norms.append(float(np.sqrt(grad @ grad)))
            signal_norms.append(float(np.sqrt(signal @ signal)))
            if cfg.prompt_lr > 0:
                # the prompt's own coordinate, at the same policy as the shared gradient
                np.add.at(
                    self.offset, ids, cfg.prompt_lr * (group_signal + sums.prompt_noise[part])
                )
            self._optimizer_step(grad)
        self._version += 1
        metrics = {
            "grad_norm": float(np.mean(grad_norms)),
            "signal_norm": float(np.mean(signal_norms)),
            "adv_abs_mean": float(sums.abs_adv.sum() / total),
            "informative_groups": float(np.count_nonzero(sums.abs_adv)),
            "true_signal": true_signal,
            "true_signal_informative": true_signal_informative,
            "optimizer_steps": float(len(parts)),
            "minibatch_rollouts": total / len(parts),
            "ability": float(self.theta.mean()),
        }
        if scales:
            metrics["b_noise"] = float(np.mean(b_noises))
            metrics["noise_scale"] = float(np.mean(scales))
        if shaping_enabled(cfg.overlong_buffer_len, cfg.overlong_penalty_factor):
            metrics["shaped_reward_mean"] = float(shaped.mean())
        return metrics

    def retain(self, refs: Iterable[Any]) -> None:
        keep_refs = np.fromiter((int(r) for r in refs), np.int64)
        keep = np.isin(self._store["refs"], keep_refs)
        if not keep.all():
            self._store = {name: arr[keep] for name, arr in self._store.items()}

    def evaluate(self) -> dict[str, float]:
        cfg = self.config
        p_eval = sigmoid(self.pool.eval_loadings @ self.theta - self.pool.eval_difficulty)
        p_pool = sigmoid(self._logits(np.arange(self.num_prompts)))
        expected = float(p_eval.mean())
        result = {
            "accuracy": expected,
            "expected_accuracy": expected,
            "pool_accuracy": float(p_pool.mean()),
            "pool_zero_var_8": float(np.mean(p_pool**8 + (1 - p_pool) ** 8)),
            "ability": float(self.theta.mean()),
            "prompt_offset": float(self.offset.mean()),
        }
        if cfg.eval_samples > 0:
            # An RNG of its own: evaluating (or how often) never changes training.
            rng = np.random.default_rng([self.seed, self._version, 0xE7A1])
            draws = rng.random((cfg.eval_samples, p_eval.size)) < p_eval
            result["accuracy"] = float(draws.mean())
        return result

    # -- state --------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "config": dataclasses.asdict(self.config),
            "seed": self.seed,
            "theta": self.theta.copy(),
            "prompt_offset": self.offset.copy(),
            "adam_m": self._m.copy(),
            "adam_v": self._v.copy(),
            "adam_t": self._t,
            "version": self._version,
            "next_ref": self._next_ref,
            "rng": self.rng.bit_generator.state,
            "store": {name: arr.copy() for name, arr in self._store.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("kind") != self.kind:
            raise ValueError(f"checkpoint is of backend '{state.get('kind')}', not 'sim'")
        if dict(state["config"]) != dataclasses.asdict(self.config):
            raise ValueError("checkpoint was written with a different sim config")
        k = self.config.num_skills
        self.seed = int(state["seed"])
        self.theta = np.array(state["theta"], dtype=np.float64).reshape(k)
        self.offset = np.array(state["prompt_offset"], dtype=np.float64).reshape(self.num_prompts)
        self._m = np.array(state["adam_m"], dtype=np.float64).reshape(k)
        self._v = np.array(state["adam_v"], dtype=np.float64).reshape(k)
        self._t = int(state["adam_t"])
        self._version = int(state["version"])
        self._next_ref = int(state["next_ref"])
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = state["rng"]
        store = state["store"]
        self._store = {
            "refs": np.array(store["refs"], dtype=np.int64),
            "prompt": np.array(store["prompt"], dtype=np.int64),
            "reward": np.array(store["reward"], dtype=np.float64),
            "tokens": np.array(store["tokens"], dtype=np.int64),
            "noise": np.array(store["noise"], dtype=np.float64).reshape(-1, k),
            "prompt_noise": np.array(store["prompt_noise"], dtype=np.float64),
        }

    @property
    def num_stored_rollouts(self) -> int:
        return int(self._store["refs"].size)

    # -- internals ----------------------------------------------------------------------------
    def _logits(self, ids: np.ndarray) -> np.ndarray:
        base = self.offset[ids] - self.pool.train_difficulty[ids]
        if self.config.num_skills == 1:
            return self.theta[0] + base
        return self.pool.train_loadings[ids] @ self.theta + base

    def _check_ids(self, ids: np.ndarray) -> np.ndarray:
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_prompts):
            bad = ids[(ids < 0) | (ids >= self.num_prompts)][0]
            raise ValueError(f"prompt id {int(bad)} is outside the pool 0..{self.num_prompts - 1}")
        return ids

    def _append(self, **new: np.ndarray) -> None:
        if self._store["refs"].size == 0:
            self._store = new
        else:
            self._store = {f: np.concatenate([self._store[f], new[f]]) for f in _STORE_FIELDS}

    def _lookup(self, refs: np.ndarray) -> np.ndarray:
        stored = self._store["refs"]  # ascending: refs come from a counter, retain keeps order
        if stored.size and int(stored[-1]) - int(stored[0]) == stored.size - 1:
            # unique, ascending and without gaps (the usual case): the index is an offset
            idx = refs - stored[0]
            found = (idx >= 0) & (idx < stored.size)
        else:
            idx = np.searchsorted(stored, refs)
            found = idx < stored.size
            found[found] = stored[idx[found]] == refs[found]
        if not found.all():
            missing = int(refs[~found][0])
            raise KeyError(f"rollout {missing} is unknown or was freed by retain()")
        return idx

    def _optimizer_step(self, grad: np.ndarray) -> None:
        cfg = self.config
        if cfg.optimizer == "sgd":
            self.theta = self.theta + cfg.lr * grad
            return
        self._t += 1
        b1, b2 = cfg.adam_beta1, cfg.adam_beta2
        self._m = b1 * self._m + (1 - b1) * grad
        self._v = b2 * self._v + (1 - b2) * grad * grad
        m_hat = self._m / (1 - b1**self._t)
        v_hat = self._v / (1 - b2**self._t)
        self.theta = self.theta + cfg.lr * m_hat / (np.sqrt(v_hat) + cfg.adam_eps)


def _empty_store(num_skills: int) -> dict[str, np.ndarray]:
    return {
        "refs": np.zeros(0, np.int64),
        "prompt": np.zeros(0, np.int64),
        "reward": np.zeros(0, np.float64),
        "tokens": np.zeros(0, np.int64),
        "noise": np.zeros((0, num_skills), np.float64),
        "prompt_noise": np.zeros(0, np.float64),
    }
