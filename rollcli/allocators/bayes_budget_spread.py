"""bayes_budget's diversity-aware value: prompt-specific saturation and the posterior baseline.

The sim's update model gives every prompt's gradient the same direction (one latent skill), so
concentrating a step's budget on two well-known prompts near ``p = 0.5`` costs nothing there; on a
real model (the tiny transformer) it does (docs/allocators/bayes_budget.md, "A diversity-aware
redesign"). The model used here: a prompt's expected gradient is a shared part, which moves the
held-out accuracy, plus a prompt-specific part of relative size ``rho``, which does not and does
not average out within the prompt's group. A group's signal ``S_i`` then carries a systematic
noise ``rho^2 S_i^2`` next to its sampling noise ``V_i``, and a step's value is

    J = sum_i S_i / sqrt(sum_i (V_i + rho^2 S_i^2)),

so a prompt's value saturates with its group size and the budget spreads over prompts.
``saturation_n`` sets ``rho^2 = 4 / saturation_n``: the group size at which, at ``p = 0.5``, the
prompt-specific noise equals the sampling noise (for std-normalised GRPO groups, ``S ~ n / 2``
and ``V ~ n``; for baseline groups ``S = n / 4`` and ``V ~ n / 4``). ``0`` is the sim's model.

With ``advantage: baseline`` every group trains on ``A = r - m`` with ``m`` the posterior mean
at the start of the step (SPO's advantage with this allocator's posterior), so any group size
trains, a single rollout included. Under ``p ~ Beta(a, b)`` (``c = a + b``) one such rollout has
the expected signal and noise, in the sim's logistic units,

    s = E[p (1 - p)] = a b / (c (c + 1)),   v = E[p (1 - p) + (p - m)^2] = s (1 + 1 / c),

linear in ``n``, so the best split under ``rho`` is a separable concave problem solved exactly
for a given ratio weight: the ``j``-th rollout of prompt ``i`` gains ``s_i - lam v_i - lam rho^2
s_i^2 (2 j - 1)``, and the budget goes to the largest gains (a threshold found by bisection),
with ``lam`` by minorise-maximise as in the oracle's search. numpy only, ``O(pool)`` per step.
"""

from __future__ import annotations

import numpy as np

__all__ = ["baseline_values", "rho_squared", "spread_baseline_counts"]


def rho_squared(saturation_n: float) -> float:
    """``rho^2`` of the saturation model for a ``saturation_n`` (0: no saturation)."""
    return 4.0 / saturation_n if saturation_n > 0 else 0.0


def baseline_values(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-rollout ``(s, v)`` of a posterior-baseline rollout under ``Beta(a, b)`` (docstring)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    c = a + b
    s = a * b / (c * (c + 1.0))
    return s, s * (1.0 + 1.0 / c)


def _objective(counts, s, v, rho2: float, carried) -> tuple[float, float, float]:
    sig = counts * s
    total_s = float(sig.sum())
    # the prompt-specific noise of (carried + n) rollouts less that of the carried ones
    own = rho2 * (s * s * counts * (counts + 2.0 * carried)).sum()
    total_v = float((counts * v).sum() + own)
    return (total_s / np.sqrt(total_v) if total_v > 0 else 0.0), total_s, total_v


def _counts_at(gain: np.ndarray, slope: np.ndarray, mu: float, n_max: int) -> np.ndarray:
    """Rollouts per prompt whose marginal gain ``gain - slope (2 j - 1)`` exceeds ``mu``."""
    flat = slope <= 0
    with np.errstate(divide="ignore", invalid="ignore"):
        n = np.ceil((gain - mu) / (2.0 * np.where(flat, 1.0, slope)) + 0.5) - 1.0
    n = np.where(flat, np.where(gain > mu, n_max, 0), n)
    return np.clip(n, 0, n_max).astype(np.int64)


def _fill(gain: np.ndarray, slope: np.ndarray, budget: int, n_max: int, tie: np.ndarray):
    """Exactly ``budget`` rollouts (or all ``n_max`` each if fewer fit) to the largest gains."""
    if gain.size * n_max <= budget:
        return np.full(gain.size, n_max, dtype=np.int64)
    counts = np.zeros(gain.size, dtype=np.int64)
    first = gain - slope
    if gain.size > budget:
        # a prompt gets a rollout only if its first marginal is among the budget largest, and
        # marginals fall with j: the search needs only those prompts (ties at the cut included)
        cut = np.partition(first, gain.size - budget)[gain.size - budget]
        on = np.flatnonzero(first >= cut)
        if on.size < gain.size:
            counts[on] = _fill(gain[on], slope[on], budget, n_max, tie[on])
            return counts
    top = float(gain.max() + 1.0)
    low = float(first.min() - slope.max() * 2 * n_max - 1.0)
    for _ in range(50):  # bisection on the threshold: counts fall as mu rises
        mid = 0.5 * (top + low)
        total = _counts_at(gain, slope, mid, n_max).sum()
        if total > budget:
            low = mid
        else:
            top = mid
            if total == budget:
                break
    counts = _counts_at(gain, slope, top, n_max)
    while (left := budget - int(counts.sum())) > 0:  # the rest: next marginals, best first
        nxt = np.where(counts < n_max, gain - slope * (2 * counts + 1), -np.inf)
        order = np.lexsort((tie, -nxt))[:left]
        counts[order[np.isfinite(nxt[order])]] += 1
    return counts


def spread_baseline_counts(
    s: np.ndarray,
    v: np.ndarray,
    budget: int,
    *,
    n_max: int,
    rho2: float,
    tie_key: np.ndarray,
    carried: np.ndarray | None = None,
    max_iters: int = 10,
) -> np.ndarray:
    """Rollouts per prompt maximising ``J`` for per-rollout values ``(s, v)`` (module docstring).

    Starts from one rollout each for the ``budget`` prompts of highest ``s`` and iterates
    ``lam = sum S / (2 sum V)``; returns the best allocation seen. Spends exactly ``budget``
    unless the prompts cannot hold it at ``n_max`` each. ``carried``: rollouts each prompt is
    counted to hold already in the saturation term (its recent training), so its ``j``-th new
    rollout gains as the ``(carried + j)``-th would; default none.
    """
    carried = np.zeros_like(s) if carried is None else np.asarray(carried, dtype=np.float64)
    counts = _fill(s, np.zeros_like(s), budget, 1, tie_key) if s.size > budget else None
    if counts is None:
        counts = _fill(s, rho2 * s * s, budget, n_max, tie_key)
    best, (best_j, total_s, total_v) = counts, _objective(counts, s, v, rho2, carried)
    for _ in range(max_iters):
        if total_v <= 0:
            break
        lam = total_s / (2.0 * total_v)
        slope = lam * rho2 * s * s
        new = _fill(s - lam * v - 2.0 * slope * carried, slope, budget, n_max, tie_key)
        if np.array_equal(new, counts):
            break
        counts = new
        value, total_s, total_v = _objective(counts, s, v, rho2, carried)
        if value > best_j:
            best, best_j = counts, value
    return best
