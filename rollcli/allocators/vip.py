"""VIP: a GP predicts each prompt's success probability; a convex program sizes its group.

VIP (Variance-Informed Predictive allocation, Nguyen et al., arXiv 2602.01601, ICLR 2026). First
built from what could be read of the paper (its abstract and introduction in the arXiv HTML v1,
and two third-party reviews that transcribe its method's equations); the official code's release
(HieuNT91/VIP at bcc8a258, found later in the code index: its newest snapshot holds a README only)
is what ``preset: paper`` follows (docs/allocators.md lists every difference):

* a latent ``g_t(x_q) ~ GP(m_t, K)`` over prompt embeddings ``x_q`` with an RBF kernel, success
  probability ``p_q = sigmoid(g_t(x_q))``; after each step the posterior *mean* ``m_{t+1}`` is
  updated recursively from the observed latents ``g_hat_q = logit(clip(R_bar_q + 1/2, eps,
  1 - eps))`` of the step's prompts (``R_bar_q + 1/2`` is the success share with the paper's
  +-1/2 rewards);
* the per-prompt gradient variance with ``n`` rollouts is ``(n - 1) / n^2 * 4 s^2 p (1 - p)`` for
  Dr. GRPO and ``1 / (n - 1) * 4 s^2 p (1 - p)`` for RLOO;
* the step's rollouts ``n_q`` minimise the summed predicted variance under a hard budget.

rollcli's rule:

1. ``B = rollouts_per_step // n_mean`` prompts in epoch order; budget ``C = B * n_mean``.
2. **Features.** The allocator protocol hands an allocator prompt ids, not prompt features or
   embeddings (no backend has a features channel), so the kernel is over the prompt *index*:
   ``K(q, q') = kernel_self * [q == q'] + kernel_shared``, a per-prompt effect plus one effect
   shared by all prompts (the policy's overall drift). With features the paper's RBF would take
   their place; the update below is the same GP algebra either way.
3. **Prediction.** ``p_hat_q = sigmoid(m(q))``, ``m(q) = prior_mean + shared + offset_q``.
4. **Allocation.** ``w_q = p_hat_q (1 - p_hat_q)``; minimise ``sum_q w_q h(n_q)`` subject to
   ``sum_q n_q = C`` and ``n_min <= n_q <= n_max`` (integers), with ``h(n) = 1 / (n - 1)``
   (``estimator="rloo"``) or ``(n - 1) / n^2`` (``"dr_grpo"``; the constant ``4 s^2`` does not
   move the minimiser). ``h`` is convex on the integers for RLOO, so giving the ``C - B * n_min``
   rollouts above the floor one at a time to the largest decrease ``w_q (h(n) - h(n + 1))`` is
   exact (ties: the earlier prompt). Dr. GRPO's ``h`` is not convex between 2 and 3: its steps are
   replaced by their decreasing (pool-adjacent-violators) envelope before the greedy.
5. **Update** (after the step's outcomes): ``g_hat_q = logit(clip(s_q, clip_eps, 1 - clip_eps))``
   with ``s_q`` the success share (reward > 0.5); the GP regression of the residuals ``r = g_hat -
   m(X)`` with noise ``noise`` moves the mean: ``m += K(., X) (K(X, X) + noise I)^-1 r``. With
   the kernel of 2 this is closed form in ``O(B)`` (Sherman-Morrison): ``alpha = (r - c sum(r) /
   (a + B c)) / a``, ``a = kernel_self + noise``, ``c = kernel_shared``; ``offset_X += kernel_self
   * alpha`` and ``shared += c * sum(alpha)``. The covariance is not carried over (the paper's
   recursion is on the mean), so old evidence is overwritten at a fixed rate.

Every asked prompt's rollouts train as one group.

The official release (``src/vip/allocation/bernoulli_allocation.py``, ``Allocator(rule="vip")``)
allocates differently, and ``preset: paper`` follows it: objective ``sum_q p_q (1 - p_q) / n_q``
(``estimator="inverse_n"``), predictions ``>= 0.8`` treated as 1 (``high_clamp``) and clipped to
``[1e-6, 1 - 1e-6]``, and ``solver="slsqp"``: SciPy's SLSQP from the uniform split (an inexact
continuous optimum), each count floored, counts below 4 set to 0 (that prompt is not asked), then
the rollouts left one at a time to the largest decrease of the summed objective, ties to the
*later* prompt (``argsort(...)[::-1]``), skipping prompts at ``n_max``. Its GP: prior logit -5,
clip 1e-6, a 1e-4 jitter (a trained prompt's mean becomes what it just showed), over embedding
distances rollcli does not have (the index kernel with ``kernel_shared = 0`` here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from rollcli.allocators._common import check_group_sizes, greedy_counts
from rollcli.allocators._one_ask import OneAskStep
from rollcli.allocators.api import AskItem, Group, Outcome
from rollcli.allocators.registry import register_allocator

__all__ = [
    "VipConfig",
    "VipAllocator",
    "variance_factor",
    "vip_counts",
    "vip_mean_update",
]


@dataclass(frozen=True)
class VipConfig:
    """VIP. The defaults are rollcli's first reading (GRPO's n = 8 on average, moved within
    [2, 16], the exact optimum of the RLOO variance); ``preset: paper`` is the official release."""

    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}
    # added after specs were written: left out of dumped specs at their defaults (job ids)
    LATE_KNOBS: ClassVar[tuple[str, ...]] = ("solver", "high_clamp")

    kind: Literal["vip"] = "vip"
    n_mean: int = 8
    n_min: int = 2
    n_max: int = 16
    estimator: Literal["rloo", "dr_grpo", "inverse_n"] = "rloo"
    solver: Literal["exact", "slsqp"] = "exact"
    high_clamp: float | None = None  # predictions at or above it count as 1 (the release: 0.8)
    prior_mean: float = 0.0
    kernel_self: float = 1.0
    kernel_shared: float = 0.05
    noise: float = 1.0
    clip_eps: float = 0.05

    def __post_init__(self) -> None:
        check_group_sizes(self.n_min, self.n_max)
        if not self.n_min <= self.n_mean <= self.n_max:
            raise ValueError(
                f"n_mean must be in [n_min={self.n_min}, n_max={self.n_max}], got {self.n_mean}"
            )
        if not math.isfinite(self.prior_mean):
            raise ValueError(f"prior_mean must be finite, got {self.prior_mean}")
        for knob in ("kernel_self", "noise"):
            value = getattr(self, knob)
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{knob} must be a finite number > 0, got {value}")
        if not (math.isfinite(self.kernel_shared) and self.kernel_shared >= 0.0):
            raise ValueError(
                f"kernel_shared must be a finite number >= 0, got {self.kernel_shared}"
            )
        if not 0.0 < self.clip_eps < 0.5:
            raise ValueError(f"clip_eps must be in (0, 0.5), got {self.clip_eps}")
        if self.high_clamp is not None and not 0.0 < self.high_clamp <= 1.0:
            raise ValueError(f"high_clamp must be in (0, 1] or null, got {self.high_clamp}")
        if self.solver == "slsqp" and self.estimator != "inverse_n":
            raise ValueError(
                "solver: slsqp is the official release's solver of its objective: it needs "
                f"estimator: inverse_n, got {self.estimator!r}"
            )


def variance_factor(n: np.ndarray, estimator: str) -> np.ndarray:
    """``h(n)``: the group-size factor of a prompt's gradient variance (``n >= 2``)."""
    n = np.asarray(n, dtype=np.float64)
    if estimator == "rloo":
        return 1.0 / (n - 1.0)
    if estimator == "inverse_n":  # the official release's objective, sum p (1 - p) / n
        return 1.0 / n
    return (n - 1.0) / (n * n)


def _decreasing_envelope(d: np.ndarray) -> np.ndarray:
    """Pool adjacent violators: the closest non-increasing sequence (block means)."""
    blocks: list[list[float]] = []  # [sum, count]
    for value in d.tolist():
        blocks.append([value, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] < blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    return np.concatenate([np.full(int(c), s / c) for s, c in blocks]) if blocks else d


def vip_counts(
    weights: np.ndarray, budget: int, *, n_min: int, n_max: int, estimator: str
) -> np.ndarray:
    """Integer ``n_q`` minimising ``sum_q w_q h(n_q)`` with ``sum_q n_q = budget`` (clipped to
    what ``[n_min, n_max]`` allows) and ``n_min <= n_q <= n_max``: the floor, then the rest one
    rollout at a time to the largest decrease (stable: ties go to the earlier prompt)."""
    w = np.asarray(weights, dtype=np.float64)
    num = len(w)
    counts = np.full(num, n_min, dtype=np.int64)
    depth = n_max - n_min
    extra = min(max(budget - num * n_min, 0), num * depth)
    if num == 0 or depth == 0 or extra == 0:
        return counts
    levels = np.arange(n_min, n_max + 1)
    h = variance_factor(levels, estimator)
    steps = _decreasing_envelope(h[:-1] - h[1:])
    return counts + greedy_counts(w[:, None] * steps[None, :], extra)


# the official release floors its continuous counts and zeroes those below this (hard-coded)
RELEASE_MIN_KEPT = 4


def release_counts(p: np.ndarray, budget_per_prompt: int, *, n_min: int, n_max: int) -> np.ndarray:
    """The official release's counts (``Allocator(rule="vip").allocate``, HieuNT91/VIP at
    bcc8a258) for already clamped and clipped predictions ``p``: SLSQP on ``sum p(1-p)/n`` from
    the uniform split under ``sum n = budget`` and ``[n_min, n_max]``, floor, zero below 4, then
    the rest one at a time to the largest decrease of the objective (ties: the later prompt),
    computed as the official does (full sums, so its floating-point ties are the same)."""
    from scipy.optimize import minimize

    q = np.asarray(p, dtype=np.float64)
    total = budget_per_prompt * len(q)
    if len(q) == 0:
        return np.zeros(0, dtype=np.int64)
    if q.sum() <= 1e-6:  # the official fail-safe
        return np.full(len(q), budget_per_prompt, dtype=np.int64)
    weights = q * (1 - q)

    def objective(n: np.ndarray) -> float:
        return np.sum(weights / n)

    res = minimize(
        objective,
        np.ones(len(q)) * (total / len(q)),
        method="SLSQP",
        bounds=[(n_min, n_max)] * len(q),
        constraints=[{"type": "eq", "fun": lambda n: np.sum(n) - total}],
    )
    counts = np.floor(res.x).astype(np.int64)
    counts[counts < RELEASE_MIN_KEPT] = 0
    eye = np.eye(len(q), dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(max(total - int(counts.sum()), 0)):
            gains = objective(counts) - np.sum(weights / (counts[None, :] + eye), axis=1)
            for idx in np.argsort(gains)[::-1]:
                if counts[idx] < n_max:
                    counts[idx] += 1
                    break
    return counts


def vip_mean_update(
    residuals: np.ndarray, *, kernel_self: float, kernel_shared: float, noise: float
) -> tuple[np.ndarray, float]:
    """GP mean update from the batch residuals ``r``: ``(per-prompt shift, shared shift)``.

    ``alpha = (K_XX + noise I)^-1 r`` for ``K_XX = kernel_self I + kernel_shared 11^T`` in closed
    form; a batch prompt's mean moves by ``kernel_self * alpha_q + kernel_shared * sum(alpha)``,
    every other prompt's by the shared part ``kernel_shared * sum(alpha)``.
    """
    r = np.asarray(residuals, dtype=np.float64)
    a = kernel_self + noise
    total = float(r.sum())
    alpha = (r - kernel_shared * total / (a + len(r) * kernel_shared)) / a
    return kernel_self * alpha, kernel_shared * float(alpha.sum())


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p) - np.log1p(-p)


@register_allocator
class VipAllocator(OneAskStep):
    """Per-prompt rollout counts minimising the GP-predicted gradient variance under a hard budget."""

    config_class = VipConfig
    presets = {
        # the official release (HieuNT91/VIP at bcc8a258): run_vip.sh's budget 8 a prompt within
        # [4, 16], Allocator(rule="vip") and its rounding, GPR(prior_value=-5, 1e-4 jitter,
        # clip 1e-6); no prompt embeddings here, so no prompt borrows another's evidence
        "paper": {
            "n_mean": 8,
            "n_min": 4,
            "n_max": 16,
            "estimator": "inverse_n",
            "solver": "slsqp",
            "high_clamp": 0.8,
            "prior_mean": -5.0,
            "kernel_self": 1.0,
            "kernel_shared": 0.0,
            "noise": 1e-4,
            "clip_eps": 1e-6,
        },
    }
    state_arrays = ("offset",)

    def __init__(self, config: VipConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.batch_prompts = self.prompts_per_step(config.n_mean, f"n_mean={config.n_mean}")
        self.offset = np.zeros(self.source.num_prompts)
        self.shared = 0.0
        self._last = {"mean_n": 0.0, "max_n": 0.0, "min_n": 0.0, "pred_p": 0.0,
                      "variance_ratio": 1.0}  # fmt: skip

    @property
    def max_step_rollouts(self) -> int:
        """Exactly the budget ``B * n_mean`` (the bounds may leave part unspent)."""
        return self.batch_prompts * self.config.n_mean

    @property
    def min_step_rollouts(self) -> int:
        return min(self.batch_prompts, self.source.num_active) * self.config.n_min

    def latent_mean(self, prompt_ids: Any) -> np.ndarray:
        """``m(q)``: the GP's posterior mean of each prompt's success logit."""
        ids = np.asarray(prompt_ids, dtype=np.int64)
        return self.config.prior_mean + self.shared + self.offset[ids]

    def predicted_p(self, prompt_ids: Any) -> np.ndarray:
        """``p_hat_q = sigmoid(m(q))``."""
        return 1.0 / (1.0 + np.exp(-self.latent_mean(prompt_ids)))

    def _step_items(self) -> list[AskItem]:
        cfg = self.config
        prompts = np.asarray(self.source.take(self.batch_prompts), dtype=np.int64)
        if prompts.size == 0:
            return []
        p = self.predicted_p(prompts)
        if cfg.high_clamp is not None:
            p = np.where(p >= cfg.high_clamp, 1.0, p)
        if cfg.solver == "slsqp":
            p = np.clip(p, 1e-6, 1 - 1e-6)  # the release's clip (for its log rules)
            counts = release_counts(p, cfg.n_mean, n_min=cfg.n_min, n_max=cfg.n_max)
        else:
            counts = vip_counts(p * (1.0 - p), len(prompts) * cfg.n_mean, n_min=cfg.n_min,
                                n_max=cfg.n_max, estimator=cfg.estimator)  # fmt: skip
        w = p * (1.0 - p)
        kept = counts > 0  # the release's zeroed prompts are not asked
        prompts, counts, w = prompts[kept], counts[kept], w[kept]
        if prompts.size == 0:
            return []
        uniform = float((w * variance_factor(np.full(len(w), cfg.n_mean), cfg.estimator)).sum())
        chosen = float((w * variance_factor(counts, cfg.estimator)).sum())
        self._last = {
            "mean_n": float(counts.mean()),
            "max_n": float(counts.max()),
            "min_n": float(counts.min()),
            "pred_p": float(p.mean()),
            "variance_ratio": chosen / uniform if uniform > 0.0 else 1.0,
        }
        return [AskItem(int(q), int(k)) for q, k in zip(prompts, counts, strict=True)]

    def _tell(self, outcomes: list[Outcome]) -> None:
        if not outcomes:
            return
        cfg = self.config
        ids = np.fromiter((o.prompt_id for o in outcomes), np.int64, len(outcomes))
        share = np.fromiter(
            (np.count_nonzero(o.rewards > 0.5) / o.num_rollouts for o in outcomes),
            np.float64,
            len(outcomes),
        )
        observed = _logit(np.clip(share, cfg.clip_eps, 1.0 - cfg.clip_eps))
        own, common = vip_mean_update(observed - self.latent_mean(ids),
                                      kernel_self=cfg.kernel_self,
                                      kernel_shared=cfg.kernel_shared, noise=cfg.noise)  # fmt: skip
        np.add.at(self.offset, ids, own)
        self.shared += common
        self._groups += [Group(o.prompt_id, o.refs, o.rewards) for o in outcomes]

    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "shared": self.shared}

    def _load_state(self, state: dict[str, Any]) -> None:
        super()._load_state(state)
        self.shared = float(state["shared"])
