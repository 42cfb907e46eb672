"""The sim backend: a Bernoulli policy over a latent ability, trained by the real GRPO estimator.

The policy answers prompt ``i`` correctly with probability ``p_i = sigmoid(w_i . theta - d_i)``:
``theta`` is a vector of latent skills shared by every prompt, ``w_i`` the prompt's skill loadings
and ``d_i`` its difficulty (see :mod:`rollcli.backends.sim.pool`). Generating samples binary
rewards and response lengths; updating applies the GRPO estimator to the sampled rewards::

    A_j  = (r_j - mean_g) / (std_g + eps)          # group-normalised advantage (0 for singletons)
    g    = 1/N sum_j A_j * [(r_j - p_i) w_i + score_noise * xi_j]
    theta <- theta + Adam(g)                          # gradient ascent on expected reward

``(r - p) w_i`` is the exact score ``d log P(r | theta) / d theta`` of the Bernoulli policy, so a
group whose rewards are all equal has zero advantage and teaches nothing, and an update on one
prompt moves every prompt that shares its skills. ``xi_j`` is fixed per rollout at generation
(the part of a response's gradient unrelated to correctness): zero-mean, so the estimator stays
unbiased, but it makes the signal-to-noise ratio of a batch depend on how many informative
rollouts it holds. A group that carries a baseline ``b`` (``Group.baseline``, Reinforce-Ada's
global statistics) gets ``A_j = r_j - b`` instead. Everything is vectorised numpy and
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
from rollcli.backends.sim.config import SimConfig
from rollcli.backends.sim.pool import SimPool, build_pool, sigmoid

__all__ = ["SimBackend", "sim_config_from_mapping"]

_STORE_FIELDS = ("refs", "prompt", "reward", "tokens", "noise")


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
        first = self._next_ref
        self._next_ref = first + n
        self._append(
            refs=np.arange(first, first + n, dtype=np.int64),
            prompt=ids[per_rollout],
            reward=rewards,
            tokens=tokens,
            noise=noise,
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
        return list(
            map(
                Outcome,
                [i.prompt_id for i in items],
                [i.phase for i in items],
                item_rewards,
                item_tokens,
                itertools.repeat(self._version),
                [all_refs[a:b] for a, b in zip(starts, ends, strict=True)],
            )
        )

    def update(self, groups: list[Group]) -> dict[str, float]:
        cfg = self.config
        sizes = np.array([len(g.refs) for g in groups], dtype=np.int64)
        total = int(sizes.sum())
        k = cfg.num_skills
        grad = np.zeros(k)
        signal = np.zeros(k)
        adv_abs = 0.0
        informative = 0
        if total:
            refs = np.fromiter(
                itertools.chain.from_iterable(g.refs for g in groups), np.int64, total
            )
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
            adv = _group_advantages(rewards, gid, sizes, cfg.std_normalize, cfg.adv_eps)
            adv = _with_baselines(adv, rewards, gid, groups)
            p = sigmoid(self._logits(prompt))
            coef = adv * (rewards - p)
            if k == 1:
                signal[0] = coef.sum()
            else:
                signal = coef @ self.pool.train_loadings[prompt]
            grad = signal.copy()
            if cfg.score_noise > 0:
                grad += cfg.score_noise * (adv @ self._store["noise"][idx])
            grad /= total
            signal /= total
            adv_abs = float(np.abs(adv).mean())
            informative = int(np.count_nonzero(np.bincount(gid, np.abs(adv), len(groups))))
        self._optimizer_step(grad)
        self._version += 1
        return {
            "grad_norm": float(np.linalg.norm(grad)),
            "signal_norm": float(np.linalg.norm(signal)),
            "adv_abs_mean": adv_abs,
            "informative_groups": float(informative),
            "ability": float(self.theta.mean()),
        }

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
        }

    @property
    def num_stored_rollouts(self) -> int:
        return int(self._store["refs"].size)

    # -- internals ----------------------------------------------------------------------------
    def _logits(self, ids: np.ndarray) -> np.ndarray:
        if self.config.num_skills == 1:
            return self.theta[0] - self.pool.train_difficulty[ids]
        return self.pool.train_loadings[ids] @ self.theta - self.pool.train_difficulty[ids]

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
    }


def _with_baselines(
    adv: np.ndarray, rewards: np.ndarray, gid: np.ndarray, groups: list[Group]
) -> np.ndarray:
    """Rows of groups that carry a baseline get ``reward - baseline``, no std division."""
    baselines = [g.baseline for g in groups]
    if baselines.count(None) == len(baselines):
        return adv
    base = np.array([np.nan if b is None else b for b in baselines])[gid]
    return np.where(np.isnan(base), adv, rewards - base)


def _group_advantages(
    rewards: np.ndarray, gid: np.ndarray, sizes: np.ndarray, std_normalize: bool, eps: float
) -> np.ndarray:
    """GRPO advantages: reward minus its group mean, over the group's sample std (ddof=1, as verl).

    A group of one rollout has no baseline: its advantage is 0 (it is mean-centred to 0).
    """
    num_groups = sizes.size
    mean = np.bincount(gid, rewards, num_groups) / np.maximum(sizes, 1)
    centred = rewards - mean[gid]
    if not std_normalize:
        return centred
    sq = np.bincount(gid, centred * centred, num_groups)
    std = np.sqrt(sq / np.maximum(sizes - 1, 1))
    return centred / (std[gid] + eps)
