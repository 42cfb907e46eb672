"""The sim backend's prompts: difficulties, skill loadings and typical response lengths.

The training pool and the held-out set are drawn once from ``pool_seed`` (independently of the
run seed, like a fixed dataset), from the same distribution, so held-out accuracy measures what
the shared ability learned rather than memorised prompts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rollcli.backends.sim.config import SimConfig

__all__ = ["SimPool", "build_pool", "sigmoid", "logit"]

# Base success probabilities are clipped here before taking the logit (difficulty_dist=beta).
_P_CLIP = 1e-4


def sigmoid(x: np.ndarray | float) -> np.ndarray:
    """Logistic function without overflow warnings for large |x|."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))


def logit(p: np.ndarray) -> np.ndarray:
    return np.log(p) - np.log1p(-p)


@dataclass(frozen=True)
class SimPool:
    """Per-prompt constants of the training pool (``train_*``) and the held-out set (``eval_*``)."""

    train_difficulty: np.ndarray  # (num_train_prompts,)
    train_loadings: np.ndarray  # (num_train_prompts, num_skills), rows sum to 1
    eval_difficulty: np.ndarray  # (num_eval_prompts,)
    eval_loadings: np.ndarray  # (num_eval_prompts, num_skills)
    base_tokens: np.ndarray  # (num_train_prompts,) typical length of a correct response


def _difficulties(config: SimConfig, rng: np.random.Generator, n: int) -> np.ndarray:
    if config.difficulty_dist == "normal":
        return config.difficulty_mean + config.difficulty_std * rng.standard_normal(n)
    if config.difficulty_dist == "uniform":
        half = config.difficulty_std * np.sqrt(3.0)  # same standard deviation as "normal"
        return config.difficulty_mean + rng.uniform(-half, half, n)
    p0 = np.clip(rng.beta(config.beta_a, config.beta_b, n), _P_CLIP, 1 - _P_CLIP)
    return config.initial_ability - logit(p0)


def _loadings(config: SimConfig, rng: np.random.Generator, n: int) -> np.ndarray:
    if config.num_skills == 1:
        return np.ones((n, 1))
    return rng.dirichlet(np.full(config.num_skills, config.skill_concentration), n)


def build_pool(config: SimConfig) -> SimPool:
    """Draw the pool and the held-out set from ``config.pool_seed``."""
    rng = np.random.default_rng([config.pool_seed, 0x9001])
    n, m = config.num_train_prompts, config.num_eval_prompts
    train_difficulty = _difficulties(config, rng, n)
    train_loadings = _loadings(config, rng, n)
    eval_difficulty = _difficulties(config, rng, m)
    eval_loadings = _loadings(config, rng, m)
    spread = float(train_difficulty.std())
    z = (
        (train_difficulty - train_difficulty.mean()) / spread
        if spread > 0
        else 0.0 * train_difficulty
    )
    base_tokens = config.mean_tokens * np.exp(config.length_difficulty * z)
    return SimPool(
        train_difficulty=train_difficulty,
        train_loadings=train_loadings,
        eval_difficulty=eval_difficulty,
        eval_loadings=eval_loadings,
        base_tokens=base_tokens,
    )
