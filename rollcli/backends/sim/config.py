"""Knobs of the ``sim`` backend: the prompt pool, the latent-ability policy, its update and lengths.

Importable without numpy or torch (the spec embeds :class:`SimConfig` in its pydantic models).
Every field has a default that is the calibrated default scenario (see ``docs/sim.md``);
``__post_init__`` rejects bad values with a message that names the knob.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from rollcli.backends.shaping import SHAPING_KNOBS, check_shaping

__all__ = ["SimConfig"]


@dataclass(frozen=True)
class SimConfig:
    """An analytic policy: ``p_i = sigmoid(w_i . theta - d_i)``, trained by the GRPO estimator.

    Pool: ``num_train_prompts`` training prompts and ``num_eval_prompts`` held-out prompts, drawn
    from ``pool_seed`` (every run seed sees the same pool; only sampling differs). Difficulties
    ``d_i`` follow ``difficulty_dist``: ``normal`` / ``uniform`` on the logit scale with
    ``difficulty_mean`` and ``difficulty_std``, or ``beta``: the base model's success
    probability is ``Beta(beta_a, beta_b)`` and ``d_i = initial_ability - logit(p_i)``.

    Skills: ``num_skills`` latent abilities ``theta`` (all start at ``initial_ability``); each
    prompt loads on them with weights ``w_i ~ Dirichlet(skill_concentration)`` (sum 1), so
    learning one prompt transfers to others in proportion to their shared skills.

    Update: ``num_minibatches`` optimiser steps per rollout step (the step's groups shuffled and
    cut group-aligned into that many parts of as equal rollout counts as possible), each on the
    group-normalised advantage times the Bernoulli score ``(r - p) w_i``, plus per-rollout score
    noise of scale ``score_noise`` (the part of a sampled response's gradient unrelated to its
    correctness; zero-mean, so the estimator stays unbiased; it is what makes larger, more
    informative batches worth more). ``optimizer`` is ``adam`` (as verl) or ``sgd``; the loss is
    the mean over the mini-batch's rollouts.

    Per-prompt learning: each training prompt's logit has an offset ``u_i`` (0 at the start) that
    moves only when the prompt is trained, by ``prompt_lr`` times its group's summed advantage-
    weighted score ``sum_j A_j (r_j - p_i)``, plus per-rollout noise of scale ``prompt_noise``.
    Held-out prompts have no offset. ``prompt_lr = 0`` turns it off.

    Lengths: a correct response has ``mean_tokens`` tokens times a per-prompt factor
    ``exp(length_difficulty * z_i)`` (``z_i`` the standardised difficulty) times log-normal noise
    ``length_sigma``; a wrong one is ``wrong_length_ratio`` times longer; clipped to ``max_tokens``.

    Rewards: the sampled success (0/1) is what the allocators read; the advantage uses the
    training reward, the success plus DAPO's overlong penalty when ``overlong_buffer_len`` > 0
    (:mod:`rollcli.backends.shaping`, ``L_max`` = ``max_tokens``). The Bernoulli score keeps
    the success ``r``.

    Evaluation: ``accuracy`` is the expected accuracy over the held-out prompts, or with
    ``eval_samples > 0`` the sampled mean@k (k = ``eval_samples``) from an RNG that depends only
    on the seed and the policy version, so evaluating never changes training.
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    # added after specs were written: left out of dumped specs at their defaults (job ids)
    LATE_KNOBS: ClassVar[tuple[str, ...]] = SHAPING_KNOBS
    # the spec asks: allocators that need the true success probabilities (oracles) run here
    knows_success_probabilities: ClassVar[bool] = True

    kind: Literal["sim"] = "sim"
    # -- pool -------------------------------------------------------------------------------
    num_train_prompts: int = 4096
    num_eval_prompts: int = 1024
    pool_seed: int = 0
    difficulty_dist: Literal["normal", "uniform", "beta"] = "normal"
    difficulty_mean: float = 1.0
    difficulty_std: float = 3.0
    beta_a: float = 0.4
    beta_b: float = 0.6
    # -- policy -----------------------------------------------------------------------------
    num_skills: int = 1
    skill_concentration: float = 1.0
    initial_ability: float = 0.0
    # -- update -----------------------------------------------------------------------------
    optimizer: Literal["adam", "sgd"] = "adam"
    lr: float = 0.003
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    score_noise: float = 10.0
    std_normalize: bool = True
    adv_eps: float = 1e-6
    num_minibatches: int = 4
    # -- per-prompt learning ----------------------------------------------------------------
    prompt_lr: float = 0.07
    prompt_noise: float = 3.0
    # -- response lengths -------------------------------------------------------------------
    mean_tokens: float = 1500.0
    wrong_length_ratio: float = 1.6
    length_sigma: float = 0.3
    length_difficulty: float = 0.2
    max_tokens: int = 8192
    # success vs training reward (rollcli.backends.shaping): DAPO's overlong penalty, off at 0
    overlong_buffer_len: int = 0
    overlong_penalty_factor: float = 1.0
    # -- evaluation -------------------------------------------------------------------------
    eval_samples: int = 0

    def __post_init__(self) -> None:
        def check(ok: bool, knob: str, message: str) -> None:
            if not ok:
                raise ValueError(f"sim backend: {knob} {message}, got {getattr(self, knob)!r}")

        check(self.kind == "sim", "kind", "must be 'sim'")
        check(self.num_train_prompts >= 1, "num_train_prompts", "must be >= 1")
        check(self.num_eval_prompts >= 1, "num_eval_prompts", "must be >= 1")
        check(
            self.difficulty_dist in ("normal", "uniform", "beta"),
            "difficulty_dist",
            "must be one of normal, uniform, beta",
        )
        check(math.isfinite(self.difficulty_mean), "difficulty_mean", "must be finite")
        check(self.difficulty_std >= 0, "difficulty_std", "must be >= 0")
        check(self.beta_a > 0, "beta_a", "must be > 0")
        check(self.beta_b > 0, "beta_b", "must be > 0")
        check(self.num_skills >= 1, "num_skills", "must be >= 1")
        check(self.skill_concentration > 0, "skill_concentration", "must be > 0")
        check(math.isfinite(self.initial_ability), "initial_ability", "must be finite")
        check(self.optimizer in ("adam", "sgd"), "optimizer", "must be adam or sgd")
        check(self.lr > 0, "lr", "must be > 0")
        check(0 <= self.adam_beta1 < 1, "adam_beta1", "must be in [0, 1)")
        check(0 <= self.adam_beta2 < 1, "adam_beta2", "must be in [0, 1)")
        check(self.adam_eps > 0, "adam_eps", "must be > 0")
        check(self.score_noise >= 0, "score_noise", "must be >= 0")
        check(self.adv_eps > 0, "adv_eps", "must be > 0")
        check(
            isinstance(self.num_minibatches, int)
            and not isinstance(self.num_minibatches, bool)
            and self.num_minibatches >= 1,
            "num_minibatches",
            "must be an integer >= 1",
        )
        check(self.prompt_lr >= 0, "prompt_lr", "must be >= 0")
        check(self.prompt_noise >= 0, "prompt_noise", "must be >= 0")
        check(self.mean_tokens >= 1, "mean_tokens", "must be >= 1")
        check(self.wrong_length_ratio > 0, "wrong_length_ratio", "must be > 0")
        check(self.length_sigma >= 0, "length_sigma", "must be >= 0")
        check(math.isfinite(self.length_difficulty), "length_difficulty", "must be finite")
        check(self.max_tokens >= 1, "max_tokens", "must be >= 1")
        check_shaping(
            "sim", self.max_tokens, self.overlong_buffer_len, self.overlong_penalty_factor
        )
        check(self.eval_samples >= 0, "eval_samples", "must be >= 0")
