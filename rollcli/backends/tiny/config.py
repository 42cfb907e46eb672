"""Knobs of the ``tiny`` backend: tasks, model, base-model recipe, GRPO update and evaluation.

Importable without torch (the spec embeds :class:`TinyConfig` in its pydantic models). Every
field has a default that is the recommended CPU setting; ``__post_init__`` rejects bad values
with a message that names the knob. The fields that define the *base model* (tasks, model shape,
``base_*``) are hashed into its cache key by :meth:`TinyConfig.base_recipe`, so changing any of
them rebuilds the base model on first use.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from rollcli.backends.minibatches import check_num_minibatches
from rollcli.backends.shaping import SHAPING_KNOBS, check_shaping
from rollcli.backends.tiny.tasks import max_answer_len
from rollcli.backends.zvp import ZVP_KNOBS, check_zvp

__all__ = ["TinyConfig", "TASK_KINDS", "MAX_LEVEL"]

# Task families the backend knows (see rollcli/backends/tiny/tasks.py).
TASK_KINDS: tuple[str, ...] = ("add", "reverse")
# Levels are 1..MAX_LEVEL: operand digits for ``add``, 2 x level characters for ``reverse``.
MAX_LEVEL = 5


def _default_task_mix() -> dict[str, float]:
    return {"add": 0.75, "reverse": 0.25}


@dataclass(frozen=True)
class TinyConfig:
    """A small decoder-only transformer trained with GRPO on verifiable character tasks (CPU).

    Tasks: ``task_mix`` maps a task kind to its share of the training pool (levels are equally
    frequent within a task). The pool (``num_train_prompts``) and the held-out set
    (``eval_prompts_per_level`` per task and level) are drawn from ``task_seed``; every run seed
    sees the same tasks and the same base model — only sampling differs.

    Base model ("partly capable"): ``base_steps`` of supervised training on labels whose
    errors are injected with probability ``base_noise`` per error site (a carry for ``add``,
    an adjacent pair for ``reverse``), so the success rate of a prompt falls with its number of
    carries / length and spreads from 0 to 1 across prompts.

    Update: GRPO with group-normalised advantages (``std_normalize``: divide by the group's
    sample std; off = Dr.GRPO-style mean-centring only), token-mean loss, PPO clipping
    (``clip_eps``) against the log-probs of the policy at the start of the update, over
    ``ppo_epochs`` passes; each pass takes one Adam step per mini-batch (``num_minibatches``
    group-aligned chunks of the step's shuffled groups, see rollcli/backends/minibatches.py);
    optional KL to the base model (``kl_coef``, k3 estimator), global-norm gradient clipping.
    ``zero_variance_advantage: rl_zvp`` gives groups of equal rewards RL-ZVP's entropy-guided
    token advantage (scale ``rl_zvp_alpha``) instead of 0 (rollcli/backends/zvp.py).

    Evaluation: ``eval_mode`` picks the headline ``accuracy``: ``sampled`` = mean@k over
    ``eval_samples`` samples at ``eval_temperature`` (default: ``temperature``), or ``greedy``.
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    # added after specs were written: left out of dumped specs at their defaults (job ids)
    LATE_KNOBS: ClassVar[tuple[str, ...]] = (*SHAPING_KNOBS, *ZVP_KNOBS)

    kind: Literal["tiny"] = "tiny"
    # -- tasks ---------------------------------------------------------------------------
    task_mix: dict[str, float] = field(default_factory=_default_task_mix)
    max_level: int = MAX_LEVEL
    num_train_prompts: int = 2048
    eval_prompts_per_level: int = 40
    task_seed: int = 0
    # -- model ---------------------------------------------------------------------------
    d_model: int = 64
    num_layers: int = 2
    num_heads: int = 4
    # -- base model recipe ---------------------------------------------------------------
    base_steps: int = 1500
    base_batch_size: int = 64
    base_lr: float = 5e-3
    base_noise: float = 0.1
    base_seed: int = 0
    # -- GRPO update -----------------------------------------------------------------------
    lr: float = 3e-4
    clip_eps: float = 0.2
    ppo_epochs: int = 1
    num_minibatches: int = 4
    kl_coef: float = 0.0
    grad_clip: float = 1.0
    std_normalize: bool = True
    # zero-variance groups: GRPO's advantage 0, or RL-ZVP's entropy-guided one (rollcli.backends.zvp)
    zero_variance_advantage: Literal["zero", "rl_zvp"] = "zero"
    rl_zvp_alpha: float = 0.1
    # success vs training reward (rollcli.backends.shaping): DAPO's overlong penalty, off at 0;
    # L_max is the longest answer the generation allows (max_answer_len(max_level))
    overlong_buffer_len: int = 0
    overlong_penalty_factor: float = 1.0
    adam_betas: tuple[float, float] = (0.9, 0.999)
    temperature: float = 1.0
    # -- evaluation ------------------------------------------------------------------------
    eval_mode: Literal["sampled", "greedy"] = "sampled"
    eval_samples: int = 4
    eval_temperature: float | None = None
    # -- runtime ---------------------------------------------------------------------------
    cache_dir: str | None = None
    num_threads: int = 1

    def __post_init__(self) -> None:
        if not self.task_mix:
            raise ValueError("task_mix must name at least one task (valid: add, reverse)")
        for name, share in self.task_mix.items():
            if name not in TASK_KINDS:
                raise ValueError(
                    f"task_mix: unknown task '{name}'; valid tasks: {', '.join(TASK_KINDS)}"
                )
            if not share > 0:
                raise ValueError(f"task_mix: share of '{name}' must be > 0, got {share}")
        _check(
            1 <= self.max_level <= MAX_LEVEL, f"max_level must be in 1..{MAX_LEVEL}", self.max_level
        )
        _check(
            self.num_train_prompts >= 1, "num_train_prompts must be >= 1", self.num_train_prompts
        )
        _check(
            self.eval_prompts_per_level >= 1,
            "eval_prompts_per_level must be >= 1",
            self.eval_prompts_per_level,
        )
        _check(self.d_model >= 8, "d_model must be >= 8", self.d_model)
        _check(self.num_layers >= 1, "num_layers must be >= 1", self.num_layers)
        _check(self.num_heads >= 1, "num_heads must be >= 1", self.num_heads)
        if self.d_model % self.num_heads:
            raise ValueError(
                f"d_model={self.d_model} must be divisible by num_heads={self.num_heads}"
            )
        _check(self.base_steps >= 0, "base_steps must be >= 0", self.base_steps)
        _check(self.base_batch_size >= 1, "base_batch_size must be >= 1", self.base_batch_size)
        _check(self.base_lr > 0, "base_lr must be > 0", self.base_lr)
        _check(0.0 <= self.base_noise < 1.0, "base_noise must be in [0, 1)", self.base_noise)
        _check(self.lr > 0, "lr must be > 0", self.lr)
        _check(self.clip_eps > 0, "clip_eps must be > 0", self.clip_eps)
        _check(self.ppo_epochs >= 1, "ppo_epochs must be >= 1", self.ppo_epochs)
        check_num_minibatches(self.num_minibatches)
        _check(self.kl_coef >= 0, "kl_coef must be >= 0", self.kl_coef)
        _check(self.grad_clip > 0, "grad_clip must be > 0", self.grad_clip)
        check_zvp("tiny", self.zero_variance_advantage, self.rl_zvp_alpha)
        check_shaping(
            "tiny",
            max_answer_len(self.max_level),
            self.overlong_buffer_len,
            self.overlong_penalty_factor,
        )
        if len(self.adam_betas) != 2 or not all(0 <= b < 1 for b in self.adam_betas):
            raise ValueError(f"adam_betas must be two numbers in [0, 1), got {self.adam_betas}")
        _check(self.temperature > 0, "temperature must be > 0", self.temperature)
        if self.eval_mode not in ("sampled", "greedy"):
            raise ValueError(f"eval_mode must be 'sampled' or 'greedy', got {self.eval_mode!r}")
        _check(self.eval_samples >= 1, "eval_samples must be >= 1", self.eval_samples)
        if self.eval_temperature is not None:
            _check(self.eval_temperature > 0, "eval_temperature must be > 0", self.eval_temperature)
        _check(self.num_threads >= 1, "num_threads must be >= 1", self.num_threads)

    @property
    def tasks(self) -> tuple[str, ...]:
        """Task kinds in a fixed order (the order of :data:`TASK_KINDS`)."""
        return tuple(t for t in TASK_KINDS if t in self.task_mix)

    def base_recipe(self) -> dict[str, Any]:
        """Everything that determines the base model's weights (its cache key)."""
        return {
            "tasks": {t: float(self.task_mix[t]) for t in self.tasks},
            "max_level": self.max_level,
            "d_model": self.d_model,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "base_steps": self.base_steps,
            "base_batch_size": self.base_batch_size,
            "base_lr": self.base_lr,
            "base_noise": self.base_noise,
            "base_seed": self.base_seed,
        }

    def base_recipe_hash(self, extra: dict[str, Any] | None = None) -> str:
        """A short content hash of :meth:`base_recipe` (plus ``extra``, e.g. the torch version)."""
        payload = json.dumps({**self.base_recipe(), **(extra or {})}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _check(ok: bool, message: str, value: Any) -> None:
    if not ok:
        raise ValueError(f"{message}, got {value!r}")
