"""Two-sided Student-t critical values in the standard library (allocators import no scipy).

``t_critical(alpha, df)`` is ``t_{1 - alpha/2, df}``: the ``t`` with ``P(|T| <= t) = 1 - alpha``
for ``T`` Student-t with ``df`` (an integer >= 1) degrees of freedom, i.e. scipy's
``t.ppf(1 - alpha / 2, df)``. ``P(|T| <= t)`` has a finite closed form for integer ``df``
(Abramowitz & Stegun 26.7.3-26.7.4, with ``theta = atan(t / sqrt(df))``); the value is found by
bisection on ``theta`` and cached per ``(alpha, df)``. tests/allocators/test_xrpo.py checks it
against scipy.
"""

from __future__ import annotations

import functools
import math

__all__ = ["t_central_probability", "t_critical"]


def t_central_probability(theta: float, df: int) -> float:
    """``P(|T| <= sqrt(df) tan(theta))`` for ``T`` Student-t with integer ``df >= 1``."""
    s, c = math.sin(theta), math.cos(theta)
    c2 = c * c
    if df % 2 == 0:  # sin(theta) [1 + 1/2 c^2 + 1*3/(2*4) c^4 + ... up to c^(df-2)]
        term, total = 1.0, 1.0
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        return s * total
    if df == 1:
        return 2.0 * theta / math.pi
    # 2/pi [theta + sin c (1 + 2/3 c^2 + 2*4/(3*5) c^4 + ... up to c^(df-3))]
    term, total = 1.0, 1.0
    for k in range(1, (df - 1) // 2):
        term *= c2 * (2 * k) / (2 * k + 1)
        total += term
    return 2.0 / math.pi * (theta + s * c * total)


@functools.lru_cache(maxsize=4096)
def t_critical(alpha: float, df: int) -> float:
    """``t_{1 - alpha/2, df}``: the two-sided ``1 - alpha`` critical value (``0 < alpha < 1``)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    target = 1.0 - alpha
    lo, hi = 0.0, math.pi / 2
    for _ in range(200):  # the probability rises with theta; stop when the bracket stops shrinking
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if t_central_probability(mid, df) < target:
            lo = mid
        else:
            hi = mid
    return math.sqrt(df) * math.tan(0.5 * (lo + hi))
