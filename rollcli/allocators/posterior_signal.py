"""What a GRPO group is worth when ``p`` is only known through a Beta posterior.

:mod:`rollcli.allocators.oracle_signal` gives a group's expected signal ``S(p, n)`` and noise
weight ``V(p, n)`` at a known success probability. An allocator that learns ``p`` from rewards
holds a posterior ``Beta(a, b)`` instead, and the value of ``n`` fresh rollouts is the
expectation over it: the number of successes ``k`` is beta-binomial,

    P(k | n, a, b) = C(n, k) B(k + a, n - k + b) / B(a, b),

and ``S_post(a, b, n) = sum_k P(k) s(k, n)`` with the same per-``k`` signal ``s(k, n)`` and noise
``v(k, n)`` as the oracle's (``sqrt(k (n - k) (n - 1) / n)`` and ``n - 1`` for ``0 < k < n``;
``k (n - k) / n`` for both without std normalisation). A posterior resting on few rollouts
spreads ``k`` and so values large groups less than its mean alone would: the uncertainty of an
estimate enters every decision through the predictive, with no threshold to tune.

:class:`PosteriorSignalTable` holds both on a grid of the posterior mean ``m = a / (a + b)``
(uniform in ``arcsin(sqrt(m))``, as the oracle's table) and of the concentration ``c = a + b``
(uniform in ``log c``), for every group size of a menu, and interpolates bilinearly. Tables
are built once per (sizes, std_normalize) and shared. numpy only.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["PosteriorSignalTable", "informative_probability", "posterior_signal_stats"]

_MEANS = 257  # grid points of the posterior mean, uniform in arcsin(sqrt(m))
_CONC = np.geomspace(0.05, 16384.0, 65)  # grid of a + b; above it the posterior is ~a point


def _per_k(n: int, std_normalize: bool) -> tuple[np.ndarray, np.ndarray]:
    """``s(k, n)`` and ``v(k, n)`` for ``k = 0..n`` (zero at ``k = 0`` and ``k = n``)."""
    k = np.arange(n + 1, dtype=np.float64)
    inner = (k > 0) & (k < n)
    if std_normalize:
        signal = np.where(inner, np.sqrt(k * (n - k) * max(n - 1, 0) / max(n, 1)), 0.0)
        noise = np.where(inner, float(n - 1), 0.0)
    else:
        signal = noise = np.where(inner, k * (n - k) / max(n, 1), 0.0)
    return signal, noise


def _log_rising(x: np.ndarray, upto: int) -> np.ndarray:
    """``log(x (x + 1) ... (x + j - 1))`` for ``j = 0..upto`` (rows: x); ``-inf`` where x = 0."""
    with np.errstate(divide="ignore"):
        steps = np.log(x[:, None] + np.arange(upto, dtype=np.float64)[None, :])
    return np.concatenate([np.zeros((x.size, 1)), np.cumsum(steps, axis=1)], axis=1)


def posterior_signal_stats(
    a: np.ndarray, b: np.ndarray, n: int, *, std_normalize: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``(S_post, V_post)`` of ``n`` fresh rollouts under ``Beta(a, b)`` (module docstring).

    ``a`` and ``b`` are arrays of the same shape, ``a, b >= 0`` and ``a + b > 0``; ``a = 0`` is
    the point mass at ``p = 0`` (and ``b = 0`` at ``p = 1``).
    """
    a = np.atleast_1d(np.asarray(a, dtype=np.float64))
    b = np.atleast_1d(np.asarray(b, dtype=np.float64))
    if n < 2:
        return np.zeros_like(a), np.zeros_like(a)
    signal, noise = _per_k(n, std_normalize)
    k = np.arange(n + 1)
    log_c = _log_choose(n)
    la, lb, lab = _log_rising(a, n), _log_rising(b, n), _log_rising(a + b, n)
    log_pmf = log_c[None, :] + la[:, k] + lb[:, n - k] - lab[:, [n]]
    pmf = np.exp(log_pmf)
    return pmf @ signal, pmf @ noise


def informative_probability(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """``P(0 < k < n)`` under the beta-binomial predictive: a group of ``n`` has reward variance.

    ``P(k = 0) = prod_j (b + j) / (a + b + j)`` and ``P(k = n)`` likewise with ``a``, over
    ``j = 0..n-1``: ``2 n`` vectorised products, cheap enough to rank a whole pool.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if n < 2:
        return np.zeros(a.shape)
    none = np.ones(a.shape)
    every = np.ones(a.shape)
    c = a + b
    for j in range(n):
        none *= (b + j) / (c + j)
        every *= (a + j) / (c + j)
    return np.clip(1.0 - none - every, 0.0, 1.0)


def _log_choose(n: int) -> np.ndarray:
    logs = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, n + 1)))))
    return logs[n] - logs - logs[::-1]


class PosteriorSignalTable:
    """``S_post`` and ``V_post`` on a (mean, concentration) grid for each size of ``sizes``.

    :meth:`lookup` interpolates bilinearly in ``(arcsin(sqrt(m)), log(a + b))``; concentrations
    outside the grid are clamped to its ends (above ``16384`` rollouts of evidence the posterior
    is a point for any group the menu holds).
    """

    def __init__(self, sizes: np.ndarray, std_normalize: bool = True) -> None:
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.std_normalize = bool(std_normalize)
        self.signal, self.noise = _build(tuple(int(n) for n in self.sizes), self.std_normalize)
        self._flat = np.concatenate([self.signal, self.noise], axis=2).reshape(
            _CONC.size * _MEANS, 2 * self.sizes.size
        )

    def lookup(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(S_post, V_post)`` of each posterior (rows) at each size (columns)."""
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        c = a + b
        m = np.clip(a / c, 0.0, 1.0)
        pos_m = np.arcsin(np.sqrt(m)) * ((_MEANS - 1) / (np.pi / 2))
        lo_m = np.minimum(pos_m.astype(np.int64), _MEANS - 2)
        w_m = (pos_m - lo_m)[:, None]
        log_grid = np.log(_CONC)
        pos_c = (np.log(np.clip(c, _CONC[0], _CONC[-1])) - log_grid[0]) / (
            log_grid[1] - log_grid[0]
        )
        lo_c = np.clip(pos_c.astype(np.int64), 0, _CONC.size - 2)
        w_c = np.clip(pos_c - lo_c, 0.0, 1.0)[:, None]
        flat = self._flat  # (concentration * mean, [signal sizes | noise sizes])
        i00 = lo_c * _MEANS + lo_m
        i10 = i00 + _MEANS
        top = (1 - w_m) * flat[i00] + w_m * flat[i00 + 1]
        bottom = (1 - w_m) * flat[i10] + w_m * flat[i10 + 1]
        both = (1 - w_c) * top + w_c * bottom
        width = self.sizes.size
        return both[:, :width], both[:, width:]


@functools.lru_cache(maxsize=8)
def _build(sizes: tuple[int, ...], std_normalize: bool) -> tuple[np.ndarray, np.ndarray]:
    """The (concentration, mean, size) tables; read-only, shared by every allocator."""
    means = np.sin(np.linspace(0.0, np.pi / 2, _MEANS)) ** 2
    signal = np.zeros((_CONC.size, _MEANS, len(sizes)))
    noise = np.zeros_like(signal)
    for i, c in enumerate(_CONC):
        a, b = means * c, (1.0 - means) * c
        for j, n in enumerate(sizes):
            signal[i, :, j], noise[i, :, j] = posterior_signal_stats(
                a, b, n, std_normalize=std_normalize
            )
    signal.setflags(write=False)
    noise.setflags(write=False)
    return signal, noise
