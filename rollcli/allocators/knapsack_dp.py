"""Knapsack RL's budget allocation, computed fast and exactly as the official DP computes it.

Knapsack RL (liziniu/KnapsackRL, ``verl/trainer/ppo/exploration_utils.py``) gives each prompt of
a batch a number of rollouts: ``min_n`` to every prompt whose success rate ``p`` is in (0, 1),
``negative_n`` / ``positive_n`` to those at 0 / 1, the default ``n`` to prompts without enough
history; then an exact 0/1 DP hands out the rest, ``k`` in ``[1, max_n - min_n]`` extra rollouts
per prompt with ``0 < p < 1``, maximising ``sum (1 - p^N - (1-p)^N) * p * (1-p)^2`` at
``N = min_n + k``. :func:`knapsack_budget` is the whole rule, :func:`solve_dp` the DP.

**The same answer, not just the same value.** The official DP fills a table over every item and
every budget ``w`` with ``max_n - min_n`` candidates each (~2e8 at 512 prompts x 4,096
rollouts), and its answer among equally good allocations (identical ``p`` are the rule) is
decided by float rounding of its running sums and by "first maximum wins". :func:`solve_dp`
evaluates exactly the same float sums in the same order, but only for candidates that can be
on the official path:

* Lagrangian bound: for any ``lam``, ``V(A) <= L(lam) = lam * W + sum_i max_k (g_i(k) - lam k)``
  and ``L(lam) - V(A) = sum_i loss_i(k_i)`` with every ``loss_i >= 0``. The official answer is a
  float maximum, so its exact value is within ``2 * delta`` (the float error bound of a sum of
  ``n`` gains) of any allocation ``A_g`` we build, and every one of its ``k_i`` has
  ``loss_i(k_i) <= L(lam) - V(A_g) + 2 delta``. With ``lam`` the ``W``-th largest marginal gain,
  ``L(lam) - V(A_g)`` is ~0, so each item keeps one to a few candidates (more where ties are).
* The DP restricted to those candidates, and to the band of budgets that can still reach ``W``,
  reproduces the official table on its path: restricted values are never above the official
  ones, the official path's values are attained, and "first maximum" picks the same ``k``.

No assumption on the gains (concavity, monotonicity) enters the proof; floating-point error in
the bound itself is covered by generous margins (a wider window only costs time).

**Arithmetic.** The official code has two code paths that round gains differently: a numba
kernel (used when numba is importable and ``items * budget * (max_n - min_n) > 50,000``) that
computes ``p ** N`` in float32 by repeated squaring and the rest in float64, and a numpy loop
that, under the ``numpy<2`` the repo pins, computes every gain in float64 with the C library's
``pow``. Both start from ``p`` rounded to float32 (the official stores success rates in a
float32 array). ``arithmetic="numpy"`` reproduces the second, ``"numba"`` the first (with the
size switch). Both were checked against the official file run under numpy 1.26 and numba 0.60
(``tests/fixtures/knapsack_official.json``).

Pure Python + numpy.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = [
    "Arithmetic",
    "KnapsackResult",
    "full_dp",
    "gain_table",
    "knapsack_budget",
    "solve_dp",
    "spread",
]

Arithmetic = Literal["numpy", "numba"]

_U = 2.0**-53  # unit roundoff of float64
_NUMBA_MIN_WORK = 50_000  # the official switches to its numba kernel above this n * W * K


# -- gains -------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _numpy_pow_is_libm() -> bool:
    """Whether ``np.power`` on float64 arrays rounds as the C library's ``pow`` does here.

    numpy calls ``pow`` element by element unless it has a SIMD kernel for the CPU (AVX-512
    builds use their own, which may differ in the last bit). Checked once on a probe grid;
    where it differs the gains are computed with Python floats (the C ``pow``), only slower.
    """
    base = np.linspace(1e-3, 1 - 1e-3, 257)
    exps = np.arange(2, 131)
    fast = np.power(base[:, None], exps[None, :].astype(np.float64))
    slow = np.array([[float(x) ** int(e) for e in exps] for x in base.tolist()])
    return bool(np.array_equal(fast, slow))


def _gains_numpy(p32: np.ndarray, min_n: int, num_extra: int) -> np.ndarray:
    """The official numpy loop's gains under numpy<2: float64 from float32 ``p``, C ``pow``."""
    sr = np.asarray(p32, dtype=np.float32).astype(np.float64)[:, None]
    q = 1 - sr
    n_exp = (np.arange(1, num_extra + 1) + min_n).astype(np.float64)[None, :]
    if _numpy_pow_is_libm():
        p_pow, q_pow = np.power(sr, n_exp), np.power(q, n_exp)
    else:
        p_pow = np.array(
            [[x**e for e in range(min_n + 1, min_n + num_extra + 1)] for x in sr[:, 0].tolist()]
        )
        q_pow = np.array(
            [[x**e for e in range(min_n + 1, min_n + num_extra + 1)] for x in q[:, 0].tolist()]
        )
    g = (1 - p_pow - q_pow) * sr * (q * q)  # the official's order: ((1 - a - b) * p) * q^2
    g[(sr[:, 0] == 0) | (sr[:, 0] == 1)] = 0.0
    return g


def _powi(base: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """``base ** exponent`` as numba lowers float ** int: squaring, low bit first, base's dtype."""
    result = np.ones_like(base)
    a = base.copy()
    e = exponent.astype(np.int64).copy()
    while np.any(e):
        odd = (e & 1).astype(bool)
        result = np.where(odd, result * a, result)
        e >>= 1
        a = a * a
    return result


def _gains_numba(p32: np.ndarray, min_n: int, num_extra: int) -> np.ndarray:
    """The official numba kernel's gains (rows: items, columns k = 1..num_extra)."""
    p32 = np.asarray(p32, dtype=np.float32)
    n_exp = np.arange(1, num_extra + 1, dtype=np.int64) + min_n
    base32 = np.broadcast_to(p32[:, None], (p32.size, num_extra)).copy()
    exps = np.broadcast_to(n_exp[None, :], base32.shape)
    p_pow = _powi(base32, exps).astype(np.float64)  # float32 ** int64 -> float32 in numba
    p64 = p32.astype(np.float64)[:, None]
    q = 1 - p64  # int - float32 -> float64
    q_pow = _powi(np.broadcast_to(q, base32.shape).copy(), exps)
    q2 = _powi(q, np.full_like(q, 2, dtype=np.int64))
    g = (1 - p_pow - q_pow) * p64 * q2
    g[(p32 == 0) | (p32 == 1)] = 0.0
    return g


def gain_table(
    p32: np.ndarray, *, min_n: int, num_extra: int, arithmetic: Arithmetic = "numpy"
) -> np.ndarray:
    """Gains ``g[i, k]`` of giving item ``i`` ``k`` extra rollouts (column 0 is 0), as float64.

    ``p32`` are the items' success rates rounded to float32; ``arithmetic`` picks which official
    code path's rounding to reproduce (module docstring).
    """
    p32 = np.asarray(p32, dtype=np.float32)
    table = np.zeros((p32.size, num_extra + 1))
    if p32.size == 0 or num_extra == 0:
        return table
    values, inverse = np.unique(p32, return_inverse=True)
    gains = _gains_numba if arithmetic == "numba" else _gains_numpy
    table[:, 1:] = gains(values, min_n, num_extra)[inverse.reshape(-1)]
    return table


# -- the DP ------------------------------------------------------------------------------------


def spread(total: int, num: int) -> np.ndarray:
    """``total`` split in ``num`` equal shares, the first ``total % num`` one larger (official)."""
    out = np.full(num, total // num, dtype=np.int64)
    out[: total % num] += 1
    return out


def _windows(g: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """Per item, the smallest interval of k that must hold the official DP's choice."""
    n, width = g.shape
    num_extra = width - 1
    marginals = np.diff(g, axis=1)
    flat = marginals.ravel()
    top = np.argpartition(flat, flat.size - budget)[flat.size - budget :]
    lam = float(flat[top].min())
    counts = np.bincount(top // num_extra, minlength=n)  # a feasible allocation A_g, sum = budget
    ks = np.arange(width, dtype=np.float64)
    v = g - lam * ks
    phi = v.max(axis=1)
    upper = float(phi.sum()) + lam * budget  # L(lam) >= the value of every allocation
    value_g = float(g[np.arange(n), counts].sum())
    vmax = float(g.max(axis=1).sum())
    gamma = n * _U / (1 - n * _U)
    delta = gamma * vmax  # |float sum of an allocation's gains - exact sum|
    margin = (
        16 * _U * (n + width + 8) * (vmax + abs(lam) * (budget + width) + float(np.abs(phi).sum()))
    )
    tau = (upper - value_g) + 2 * delta + 3 * margin
    keep = (phi[:, None] - v) <= tau
    lo = keep.argmax(axis=1)
    hi = num_extra - keep[:, ::-1].argmax(axis=1)
    return lo.astype(np.int64), hi.astype(np.int64)


def _banded_dp(g: np.ndarray, budget: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The official DP over candidates ``lo[i]..hi[i]`` and the budgets that can reach ``budget``.

    Row ``i`` holds the official ``dp[i][w]`` for ``w`` in its band: ``dp[i-1][w-k] + g_i(k)``
    in float64, the first maximum over ascending ``k`` (``k = 0`` copies ``dp[i-1][w]``, which
    ``+ 0.0`` reproduces). A run of rows with one candidate each is one sequential
    ``np.add.accumulate`` (the same additions in the same order). Returns the backtracked extra
    rollouts per item.
    """
    n = g.shape[0]
    lo_prefix = np.concatenate([[0], np.cumsum(lo)])
    hi_prefix = np.concatenate([[0], np.cumsum(hi)])
    left = np.maximum(lo_prefix, budget - (hi_prefix[-1] - hi_prefix))
    right = np.minimum(hi_prefix, budget - (lo_prefix[-1] - lo_prefix))
    if np.any(left > right):
        raise AssertionError("knapsack DP: the candidate windows cannot reach the budget")
    fixed = lo == hi
    prev = np.zeros(1)  # row 0: dp[0][0] = 0, band [0, 0]
    choices: dict[int, np.ndarray] = {}  # row -> k per band position (rows with a choice)
    i = 1
    while i <= n:
        if fixed[i - 1]:
            j = i
            while j < n and fixed[j]:
                j += 1
            # rows i..j take k = lo: row j's band at w reads row i-1 at w - (sum of those k)
            shift = int(lo_prefix[j] - lo_prefix[i - 1])
            start = int(left[j]) - shift - int(left[i - 1])
            lanes = prev[start : start + int(right[j] - left[j]) + 1]
            steps = np.empty((j - i + 2, lanes.size))
            steps[0] = lanes
            steps[1:] = g[np.arange(i - 1, j), lo[i - 1 : j]][:, None]
            prev = np.add.accumulate(steps, axis=0)[-1]
            i = j + 1
            continue
        a, b = int(lo[i - 1]), int(hi[i - 1])
        lo_w, hi_w = int(left[i]), int(right[i])
        x0 = lo_w - b  # candidates read row i-1 at x = w - k in [lo_w - b, hi_w - a]
        padded = np.full(hi_w - a - x0 + 1, -np.inf)
        offset = int(left[i - 1]) - x0
        padded[offset : offset + prev.size] = prev
        size = hi_w - lo_w + 1
        h = b - a + 1
        best = padded[h - 1 : h - 1 + size] + g[i - 1, a]
        best_k = np.full(size, a, dtype=np.int64)
        for t in range(1, h):
            cand = padded[h - 1 - t : h - 1 - t + size] + g[i - 1, a + t]
            better = cand > best  # strict: the first maximum wins, as in the official
            best = np.where(better, cand, best)
            best_k[better] = a + t
        prev = best
        choices[i] = best_k
        i += 1
    extra = lo.astype(np.int64).copy()
    w = budget
    for i in range(n, 0, -1):
        if i in choices:
            extra[i - 1] = choices[i][w - int(left[i])]
        w -= int(extra[i - 1])
    return extra


def full_dp(g: np.ndarray, budget: int) -> np.ndarray:
    """The official recursion in full: every item, budget and candidate, first maximum wins.

    ``g`` is a :func:`gain_table`; returns the backtracked extra rollouts for a budget the items
    can absorb. Vectorised per item but ~items x budget x max_n work: for checking
    :func:`solve_dp` in tests and benchmarks, not for use.
    """
    n, width = g.shape
    prev = np.full(budget + 1, -np.inf)
    prev[0] = 0.0
    cand = np.empty((width, budget + 1))
    choices = []
    for i in range(n):
        cand.fill(-np.inf)
        for k in range(min(width, budget + 1)):
            np.add(prev[: budget + 1 - k], g[i, k], out=cand[k, k:])
        best = cand.argmax(axis=0)
        prev = cand[best, np.arange(budget + 1)]
        choices.append(best)
    extra, w = np.zeros(n, dtype=np.int64), budget
    for i in range(n - 1, -1, -1):
        extra[i] = choices[i][w]
        w -= extra[i]
    return extra


def solve_dp(
    p32: np.ndarray,
    *,
    min_n: int,
    num_extra: int,
    budget: int,
    arithmetic: Arithmetic = "numpy",
) -> np.ndarray:
    """Extra rollouts per item, exactly as the official ``solve_by_dp`` returns them.

    ``p32``: the items' success rates (0 < p < 1) in the official order; ``num_extra``: the most
    extra rollouts per item (``max_n - min_n``); ``budget``: what the DP hands out. A budget the
    items cannot absorb (``> items * num_extra``) gives every item ``num_extra`` and spreads the
    rest evenly, past ``max_n`` (the official does the same).
    """
    p32 = np.asarray(p32, dtype=np.float32)
    n = p32.size
    if budget <= 0 or n == 0:
        return np.zeros(n, dtype=np.int64)
    if budget >= n * num_extra:
        return num_extra + spread(budget - n * num_extra, n)
    if arithmetic == "numba" and n * budget * num_extra <= _NUMBA_MIN_WORK:
        arithmetic = "numpy"  # the official runs small problems through its numpy loop
    g = gain_table(p32, min_n=min_n, num_extra=num_extra, arithmetic=arithmetic)
    lo, hi = _windows(g, budget)
    return _banded_dp(g, budget, lo, hi)


# -- the whole rule ----------------------------------------------------------------------------


@dataclass(frozen=True)
class KnapsackResult:
    """Rollouts per prompt and what the rule did (for the metrics row)."""

    budget: np.ndarray  # int64, one per prompt, sums to the total budget
    effective: int  # prompts with 0 < p < 1 that entered the DP
    dp_budget: int  # rollouts the DP handed out
    fallback: bool  # the effective prompts could not absorb the budget: excess went elsewhere
    excess: int  # rollouts given away by the fallback (or the no-effective branch)


def knapsack_budget(
    p: np.ndarray,
    ready: np.ndarray,
    *,
    n: int,
    min_n: int = 2,
    max_n: int = 128,
    negative_n: int | None = None,
    positive_n: int | None = None,
    alpha: float = 0.9,
    cost_estimation: Literal["probability", "expectation"] = "probability",
    allow_fallback: bool = True,
    excess_to_unready: bool = True,
    arithmetic: Arithmetic = "numpy",
) -> KnapsackResult:
    """The official ``sampling_budget_by_knapsack`` for one batch (total ``len(p) * n``).

    ``p``: each prompt's success-rate estimate (float64), ``ready``: whether it has enough
    history (else it gets ``n``). ``excess_to_unready`` keeps the official quirk that prompts
    without enough history count as ``p = 0`` when excess budget is handed out (their entry
    in its float32 success-rate array stays 0). Where the official's fallback has no prompt
    outside the DP to give the excess to (it divides by zero, drops the excess and fails its own
    budget check), the DP gets the whole budget instead.
    """
    p = np.asarray(p, dtype=np.float64)
    ready = np.asarray(ready, dtype=bool)
    size = p.size
    total = size * n
    negative_n = min_n if negative_n is None else negative_n
    positive_n = min_n if positive_n is None else positive_n
    effective = ready & (p > 0) & (p < 1)
    zero = ready & (p == 0)
    budget = np.where(ready, 0, n).astype(np.int64)
    budget[effective] = min_n
    budget[zero] = negative_n
    budget[ready & (p == 1)] = positive_n
    p32 = np.where(ready, p, 0.0).astype(np.float32)
    zero_like = np.flatnonzero(p32 == 0) if excess_to_unready else np.flatnonzero(zero)
    eff_idx = np.flatnonzero(effective)
    remaining = total - int(budget.sum())
    if remaining > 0 and eff_idx.size == 0:
        if zero_like.size:
            budget[zero_like] += spread(remaining, zero_like.size)
        else:
            budget[:] = n
        return KnapsackResult(budget, 0, 0, False, remaining)
    fallback, excess = False, 0
    if eff_idx.size:
        pe = p[eff_idx]
        if cost_estimation == "probability":
            cost = np.log(1 - alpha) / np.log(np.maximum(pe, 1 - pe))
        else:
            cost = 1 / (pe * (1 - pe)) - 1
        cost32 = cost.astype(np.float32)
        estimated = int(np.minimum(np.float32(max_n), cost32).astype(np.int64).sum())
        if estimated < remaining and allow_fallback:
            candidates = zero_like if zero_like.size else np.flatnonzero(~effective)
            if candidates.size:
                fallback, excess = True, remaining - estimated
                budget[candidates] += spread(excess, candidates.size)
                remaining = estimated
    extra = solve_dp(
        p32[eff_idx],
        min_n=min_n,
        num_extra=max_n - min_n,
        budget=remaining,
        arithmetic=arithmetic,
    )
    budget[eff_idx] += extra
    return KnapsackResult(budget, int(eff_idx.size), max(remaining, 0), fallback, excess)
