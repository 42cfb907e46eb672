"""What a GRPO group of ``n`` rollouts at success probability ``p`` is worth, and how to spend a budget.

For a group of ``n`` binary rewards with ``k`` successes (``0 < k < n``), GRPO's advantages
``A_j = (r_j - k/n) / std`` (sample std, ddof=1) give

    sum_j A_j r_j = sqrt(k (n - k) (n - 1) / n)        (the group's signal)
    sum_j A_j^2   = n - 1                              (what the group adds to the noise)

and both are 0 when ``k`` is 0 or ``n``. Without std normalisation (Dr.GRPO) both are
``k (n - k) / n``. Their expectations over ``k ~ Binomial(n, p)`` are ``S(p, n)`` and ``V(p, n)``
(:func:`group_signal_stats`). Every rollout's gradient is its advantage times its score plus
score noise, so a batch's expected gradient is proportional to ``sum_i S_i`` and the noise
variance to ``sum_i V_i``: under Adam a step's progress grows with the signal-to-noise ratio
``J = sum_i S_i / sqrt(sum_i V_i)`` (objective ``snr``), under SGD with the signal ``sum_i S_i``
itself (objective ``signal``).

:func:`allocate_rollouts` chooses a group size ``n_i`` in ``{0} U [n_min, n_max]`` for every
candidate so that ``sum_i n_i`` is the budget and the objective is as large as it finds:

1. ``signal`` is separable: maximise ``sum_i f_i(n_i)`` with ``f_i = S_i``. Each candidate's
   ``f_i`` on the group sizes of ``size_menu`` (and ``f_i(0) = 0``) is replaced by its upper
   concave envelope; the envelope's segments of all candidates are taken in order of gain per
   rollout (highest first) while they fit, and the first one that does not fit is filled in
   part (any size in ``[n_min, n_max]`` is allowed). This is the greedy that is exact for
   concave separable problems; on the envelope it loses at most one partial segment.
2. ``snr`` is a ratio: maximise ``sum_i S_i - lam * sum_i V_i`` by step 1 with
   ``f_i = S_i - lam V_i``, then set ``lam = A / (2 C)`` from the allocation found (``A, C`` its
   summed ``S, V``), and repeat (a minorise-maximise step: the tangent of ``sqrt`` at ``C``
   bounds ``J`` from below, so an exact inner step never lowers ``J``). It stops when the
   allocation repeats, after ``max_iters`` rounds, and returns the allocation with the highest
   exactly evaluated ``J``.

Exact tie rules: envelope vertices with equal slope from the current vertex take the farthest;
segments of equal gain per rollout are taken by the candidates' ``tie_key`` (lowest first),
then a candidate's own segments in order; the whole budget is spent (segments that lower the
objective go last, least harmful first). When the last ``r < n_min`` rollouts fit no started
group (all at ``n_max``), the started group with the lowest gain per rollout gives
``n_min - r`` of its rollouts and the best candidate not yet started gets a group of
``n_min``; only if no group can spare them do they stay unspent.

Values on the menu come from :class:`SignalTable` (exact on a grid of ``p``, linearly
interpolated); the objective of a final allocation is evaluated exactly. numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "SignalTable",
    "allocate_from_values",
    "allocate_rollouts",
    "group_signal_stats",
    "objective_value",
    "size_menu",
]

_GRID = 4097  # grid points of the table, uniform in arcsin(sqrt(p)): dense near p = 0 and 1


def _log_binom(n: int) -> np.ndarray:
    """log C(n, k) for k = 0..n."""
    logs = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, n + 1)))))
    return logs[n] - logs - logs[::-1]


def group_signal_stats(
    p: np.ndarray | float, n: int, *, std_normalize: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``(S(p, n), V(p, n))``: expected signal and noise weight of a group (see module doc).

    GRPO's ``eps`` in the std is ignored (it changes the values by a relative ~1e-6).
    """
    p = np.atleast_1d(np.asarray(p, dtype=np.float64))
    if n < 2:
        return np.zeros_like(p), np.zeros_like(p)
    k = np.arange(1, n)
    if std_normalize:
        signal = np.sqrt(k * (n - k) * (n - 1) / n)
        noise = np.full(k.shape, float(n - 1))
    else:
        signal = noise = k * (n - k) / n
    inner = (p > 0) & (p < 1)
    s_out = np.zeros_like(p)
    v_out = np.zeros_like(p)
    if inner.any():
        q = p[inner][:, None]
        log_pmf = _log_binom(n)[1:-1] + k * np.log(q) + (n - k) * np.log1p(-q)
        pmf = np.exp(log_pmf)
        s_out[inner] = pmf @ signal
        v_out[inner] = pmf @ noise
    return s_out, v_out


def size_menu(n_min: int, n_max: int) -> np.ndarray:
    """The group sizes the search considers: n_min, every size up to 16, then ~19 % apart, n_max.

    Sizes between menu entries are still used when a segment is filled in part.
    """
    small = np.arange(n_min, min(n_max, 16) + 1)
    large = np.unique(np.rint(16 * 2.0 ** (np.arange(1, 64) / 4)).astype(np.int64))
    large = large[(large > max(16, n_min)) & (large < n_max)]
    return np.unique(np.concatenate([[n_min], small, large, [n_max]])).astype(np.int64)


@dataclass
class SignalTable:
    """``S`` and ``V`` on a grid of ``p`` for each size of ``sizes``; :meth:`lookup` interpolates.

    The grid is uniform in ``arcsin(sqrt(p))``, where both are smooth down to ``p = 0`` and up
    to ``p = 1`` even for large groups (relative error below 1e-4 up to 128 rollouts).
    """

    sizes: np.ndarray
    std_normalize: bool = True
    grid: np.ndarray = field(init=False, repr=False)
    signal: np.ndarray = field(init=False, repr=False)  # (grid, sizes)
    noise: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.sizes = np.asarray(self.sizes, dtype=np.int64)
        self.grid = np.sin(np.linspace(0.0, np.pi / 2, _GRID)) ** 2
        columns = [group_signal_stats(self.grid, int(n), std_normalize=self.std_normalize)
                   for n in self.sizes]  # fmt: skip
        self.signal = np.stack([c[0] for c in columns], axis=1)
        self.noise = np.stack([c[1] for c in columns], axis=1)

    def lookup(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(S, V)`` of each ``p`` (rows) at each size (columns), linearly interpolated."""
        q = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
        pos = np.arcsin(np.sqrt(q)) * ((_GRID - 1) / (np.pi / 2))
        lo = np.minimum(pos.astype(np.int64), _GRID - 2)
        w = (pos - lo)[:, None]
        signal = (1 - w) * self.signal[lo] + w * self.signal[lo + 1]
        noise = (1 - w) * self.noise[lo] + w * self.noise[lo + 1]
        return signal, noise


def objective_value(
    p: np.ndarray, counts: np.ndarray, objective: str, *, std_normalize: bool = True
) -> tuple[float, float, float]:
    """``(objective, sum S, sum V)`` of an allocation, evaluated exactly."""
    p = np.asarray(p, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.int64)
    total_s = total_v = 0.0
    for n in np.unique(counts[counts >= 2]):
        s, v = group_signal_stats(p[counts == n], int(n), std_normalize=std_normalize)
        total_s += float(s.sum())
        total_v += float(v.sum())
    if objective == "signal":
        return total_s, total_s, total_v
    return (total_s / math.sqrt(total_v) if total_v > 0 else 0.0), total_s, total_v


def _envelope_segments(values: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, ...]:
    """Segments of each row's upper concave envelope over the points ``(0, 0), (sizes, values)``.

    Returns flat arrays ``(row, n_from, n_to, slope, order)`` with ``order`` the segment's rank
    within its row. Vectorised over rows; at most ``len(sizes)`` rounds.
    """
    rows, width = values.shape
    cur_n = np.zeros(rows)
    cur_f = np.zeros(rows)
    cur_t = np.full(rows, -1)
    columns = np.arange(width)
    prev_slope = np.full(rows, np.inf)
    out: list[tuple[np.ndarray, ...]] = []
    rank = 0
    alive = np.arange(rows)
    while alive.size:
        dn = sizes[None, :] - cur_n[alive, None]
        slopes = (values[alive] - cur_f[alive, None]) / np.where(dn > 0, dn, 1.0)
        slopes[columns[None, :] <= cur_t[alive, None]] = -np.inf
        # farthest vertex among equal slopes: argmax over the reversed columns
        best = width - 1 - np.argmax(slopes[:, ::-1], axis=1)
        # an envelope's slopes fall along the row; clamp so float rounding cannot reorder them
        slope = np.minimum(slopes[np.arange(alive.size), best], prev_slope[alive])
        prev_slope[alive] = slope
        out.append((alive, cur_n[alive].astype(np.int64), sizes[best], slope,
                    np.full(alive.size, rank)))  # fmt: skip
        cur_n[alive] = sizes[best]
        cur_f[alive] = values[alive, best]
        cur_t[alive] = best
        alive = alive[best < width - 1]
        rank += 1
    return tuple(np.concatenate(parts) for parts in zip(*out, strict=True))


def _fill_rows(
    values: np.ndarray, sizes: np.ndarray, budget: int, n_min: int, tie_key: np.ndarray
) -> tuple[np.ndarray, float]:
    """The greedy of step 1 on these rows; also the gain per rollout where the budget ran out."""
    counts = np.zeros(values.shape[0], dtype=np.int64)
    row, n_from, n_to, slope, rank = _envelope_segments(values, sizes)
    order = np.lexsort((rank, tie_key[row], -slope))
    row, n_from, n_to, slope = row[order], n_from[order], n_to[order], slope[order]
    spent = np.cumsum(n_to - n_from)
    whole = int(np.searchsorted(spent, budget, side="right"))  # segments that fit entirely
    np.maximum.at(counts, row[:whole], n_to[:whole])  # a row's segments come in order
    if whole == len(row):
        return counts, -np.inf
    left = budget - (int(spent[whole - 1]) if whole else 0)
    # the first segment that does not fit, then any later one that starts where its row stands
    for i in range(whole, len(row)):
        if left == 0:
            break
        r = row[i]
        if n_from[i] != counts[r] or (n_from[i] == 0 and left < n_min):
            continue
        add = min(left, int(n_to[i] - n_from[i]))
        counts[r] += add
        left -= add
    if 0 < left < n_min:
        _open_one_more(counts, row, n_from, slope, left, n_min)
    return counts, float(slope[whole])


def _open_one_more(
    counts: np.ndarray,
    row: np.ndarray,
    n_from: np.ndarray,
    slope: np.ndarray,
    left: int,
    n_min: int,
) -> None:
    """Spend the last ``left < n_min`` rollouts (in place): the weakest started group that can
    spare ``n_min - left`` gives them, and the best row not yet started gets ``n_min``."""
    starts = (n_from == 0) & (counts[row] == 0)
    give = n_min - left
    donors = np.flatnonzero(counts - give >= n_min)
    if not starts.any() or donors.size == 0:
        return
    first_slope = np.full(counts.size, np.inf)
    opening = n_from == 0
    first_slope[row[opening]] = slope[opening]
    donor = donors[np.argmin(first_slope[donors])]
    counts[donor] -= give
    counts[row[np.flatnonzero(starts)[0]]] = n_min


def _fill(
    values: np.ndarray, sizes: np.ndarray, budget: int, n_min: int, tie_key: np.ndarray
) -> np.ndarray:
    """Greedy over envelope segments by gain per rollout (module docstring, step 1).

    A row's first segment has the row's best gain per rollout from zero, ``max_t f_t / n_t``,
    and rows are started in that order, so only the best rows can get rollouts: the greedy
    runs on them, and on more only if a row left out could have been reached before the
    budget ran out (the answer is the same as on all rows).
    """
    rows = values.shape[0]
    counts = np.zeros(rows, dtype=np.int64)
    if rows == 0 or budget <= 0:
        return counts
    first = (values / sizes[None, :]).max(axis=1)
    ranked = np.lexsort((tie_key, -first))
    keep = min(rows, 64 + 2 * -(-budget // int(sizes[-1])))
    while True:
        chosen = ranked[:keep]
        sub, cut = _fill_rows(values[chosen], sizes, budget, n_min, tie_key[chosen])
        if keep == rows or cut > first[ranked[keep]]:
            counts[chosen] = sub
            return counts
        keep = min(rows, 4 * keep)


def allocate_rollouts(
    p: np.ndarray,
    budget: int,
    *,
    n_min: int,
    n_max: int,
    objective: str = "snr",
    std_normalize: bool = True,
    tie_key: np.ndarray | None = None,
    table: SignalTable | None = None,
    max_iters: int = 10,
) -> np.ndarray:
    """Rollouts per candidate (``0`` or ``n_min..n_max``) summing to ``budget`` (module docstring)."""
    p = np.asarray(p, dtype=np.float64)
    if tie_key is None:
        tie_key = np.arange(p.size, dtype=np.float64)
    if table is None:
        table = SignalTable(size_menu(n_min, n_max), std_normalize)
    signal, noise = table.lookup(p)
    return allocate_from_values(
        signal,
        noise,
        table.sizes,
        budget,
        n_min=n_min,
        objective=objective,
        tie_key=tie_key,
        evaluate=lambda counts: objective_value(p, counts, "snr", std_normalize=std_normalize),
        max_iters=max_iters,
    )


def allocate_from_values(
    signal: np.ndarray,
    noise: np.ndarray,
    sizes: np.ndarray,
    budget: int,
    *,
    n_min: int,
    objective: str,
    tie_key: np.ndarray,
    evaluate: Callable[[np.ndarray], tuple[float, float, float]],
    max_iters: int = 10,
) -> np.ndarray:
    """The search of :func:`allocate_rollouts` on given ``(S, V)`` values (rows x ``sizes``).

    ``evaluate(counts)`` returns ``(J, sum S, sum V)`` of an allocation; the oracle evaluates at
    the true ``p``, a posterior-driven allocator at its predictive values.
    """
    counts = _fill(signal, sizes, budget, n_min, tie_key)
    if objective == "signal":
        return counts
    best, (best_j, total_s, total_v) = counts, evaluate(counts)
    for _ in range(max_iters):
        if total_v <= 0:
            break
        lam = total_s / (2.0 * total_v)
        new = _fill(signal - lam * noise, sizes, budget, n_min, tie_key)
        if np.array_equal(new, counts):
            break
        counts = new
        value, total_s, total_v = evaluate(counts)
        if value > best_j:
            best, best_j = counts, value
    return best
