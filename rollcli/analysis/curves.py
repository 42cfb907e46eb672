"""Curves and crossings: bounded values, trailing smoothing, and the first crossing of a target.

Everything here is a pure function of numpy arrays. A quantity that was not observed (a curve that
never reached its target) is a *bound*, never a number: :class:`Bounded` carries the value together
with its kind (exact, lower bound, upper bound, unknown) so that no table, file or plot can print a
lower bound as if it were a measurement.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["Bounded", "BoundKind", "smooth", "first_crossing", "REL_TOL"]

BoundKind = Literal["exact", "lower", "upper", "unknown"]

# A target computed as a mean of equal values may differ from them in the last bit
# (mean([0.3, 0.3, 0.3]) != 0.3): crossings accept values within this relative tolerance.
REL_TOL = 1e-9


@dataclass(frozen=True)
class Bounded:
    """A number that may only be known as a bound: ``exact``, ``lower`` (>=), ``upper`` (<=), or
    ``unknown`` (nothing can be said; ``value`` is NaN)."""

    value: float
    kind: BoundKind = "exact"

    @classmethod
    def unknown(cls) -> Bounded:
        return cls(math.nan, "unknown")

    @property
    def exact(self) -> bool:
        return self.kind == "exact"

    def number(self) -> float | None:
        """The value if it is exact, else None (a bound is never a number)."""
        return float(self.value) if self.kind == "exact" else None

    def display(self, fmt: str | Callable[[float], str] = "{:.2f}") -> str:
        """The value for people (``fmt`` a format string or a function), ``>= x`` for a lower
        bound, ``<= x`` for an upper one, ``n/a`` when unknown."""
        if self.kind == "unknown" or not math.isfinite(self.value):
            return "n/a"
        text = fmt(self.value) if callable(fmt) else fmt.format(self.value)
        return {"exact": text, "lower": f">= {text}", "upper": f"<= {text}"}[self.kind]

    def to_json(self, fmt: str | Callable[[float], str] = "{:.2f}") -> dict:
        """``{"kind", "display"}`` plus ``value`` (exact), ``lower_bound`` or ``upper_bound``."""
        out: dict = {"kind": self.kind, "display": self.display(fmt)}
        if self.kind == "exact":
            out["value"] = float(self.value)
        elif self.kind == "lower":
            out["lower_bound"] = float(self.value)
        elif self.kind == "upper":
            out["upper_bound"] = float(self.value)
        return out


def smooth(values: Sequence[float] | np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average over ``window`` evaluations (the first points average what exists).

    Trailing, not centred: the smoothed value at an evaluation uses only that evaluation and the
    ones before it, so a smoothed crossing never depends on evaluations made after it.
    """
    y = np.asarray(values, dtype=float)
    if window < 1:
        raise ValueError(f"target.smooth must be >= 1, got {window}")
    if window == 1 or y.size == 0:
        return y.copy()
    csum = np.concatenate([[0.0], np.cumsum(y)])
    idx = np.arange(1, y.size + 1)
    start = np.maximum(idx - window, 0)
    return (csum[idx] - csum[start]) / (idx - start)


def first_crossing(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, target: float
) -> Bounded:
    """The first ``x`` at which the curve ``y(x)`` reaches ``target``, linearly interpolated.

    The curve is known only at its points; between two consecutive points it is taken as the
    straight line joining them. The crossing is the first point ``i`` with ``y[i] >= target``
    (within :data:`REL_TOL`); if ``i > 0`` it is interpolated between points ``i-1`` and ``i``.
    A curve that starts at or above the target crosses at ``x[0]``. Later dips below the target do
    not matter (first crossing). A curve that never reaches the target gives a lower bound at its
    last point: ``>= x[-1]``. An empty curve or a NaN target gives ``unknown``.
    """
    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    if xs.shape != ys.shape:
        raise ValueError(f"x and y differ in shape: {xs.shape} vs {ys.shape}")
    if xs.size == 0 or not math.isfinite(target):
        return Bounded.unknown()
    tol = REL_TOL * max(1.0, abs(target))
    hits = np.flatnonzero(ys >= target - tol)
    if hits.size == 0:
        return Bounded(float(xs[-1]), "lower")
    i = int(hits[0])
    if i == 0:
        return Bounded(float(xs[0]))
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    frac = min(1.0, max(0.0, (target - y0) / (y1 - y0)))
    return Bounded(float(x0 + frac * (x1 - x0)))
