"""Sweep axes: expand grid, zip and random/Sobol sample axes into points (lists of overrides).

Values are written in Hydra's override grammar, so a sweep axis reads like a command-line sweep::

    grid:   {allocators.pc.p_lower: "0.0,0.125,0.25", budget.steps: "range(20,60,20)"}
    zip:    {allocators.pc.n_pilot: "4,8,16", allocators.pc.n_commit: "28,24,16"}
    sample: {method: sobol, count: 16, seed: 0,
             params: {allocators.vigor.alpha: "interval(0.25,1.0)", allocators.vigor.gamma: "choice(1,2,4)"}}

A point is the product of one grid cell, one zip row and one sample: a tuple of ``key=value``
override strings. Points with the same overrides are kept once (order of first appearance).
A sweep has at most ``MAX_SWEEP_POINTS`` points, checked from the axes' sizes before anything
is expanded (a ``range(0,10000000000)`` axis is refused without building it).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Axis",
    "SampleAxes",
    "SweepAxes",
    "parse_axis",
    "expand_points",
    "MAX_SWEEP_POINTS",
    "count_points",
    "format_value",
    "to_overrides",
]


MAX_SWEEP_POINTS = 1_000


@dataclass(frozen=True)
class Axis:
    """One swept key: discrete ``values``, or a continuous ``interval`` (sample axes only)."""

    key: str
    values: tuple[Any, ...] = ()
    interval: tuple[float, float] | None = None
    log: bool = False

    @property
    def is_continuous(self) -> bool:
        return self.interval is not None


@dataclass(frozen=True)
class SampleAxes:
    """``count`` points drawn by ``method`` (random | sobol) over ``axes``."""

    method: str
    count: int
    seed: int
    axes: tuple[Axis, ...]


@dataclass(frozen=True)
class SweepAxes:
    grid: tuple[Axis, ...] = ()
    zip: tuple[Axis, ...] = ()
    sample: SampleAxes | None = None


def _parser() -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def parse_axis(key: str, text: Any, *, allow_interval: bool = False) -> Axis:
    """Parse ``text`` (``0.1,0.2``, ``range(0,5)``, ``choice(a,b)``, ``interval(0,1)``, a list,
    or a plain scalar) into an :class:`Axis` for ``key``."""
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep

    if isinstance(text, (list, tuple)):
        return Axis(key, tuple(text))
    if not isinstance(text, str):
        return Axis(key, (text,))
    from rollcli.spec.overrides import check_override_nesting

    try:
        check_override_nesting(f"{key}={text}", f"axis '{key}'")
    except Exception as error:  # a SpecError: this module's callers expect ValueError
        raise ValueError(str(error)) from None
    try:
        override = _parser().parse_overrides([f"{key}={text}"])[0]
    except RecursionError:
        raise ValueError(f"axis '{key}': nested too deeply to parse") from None
    except Exception as error:  # hydra raises its own OverrideParseException
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"axis '{key}': cannot parse '{text}': {first}") from error
    value = override.value()
    if isinstance(value, IntervalSweep):
        if not allow_interval:
            raise ValueError(
                f"axis '{key}': interval(...) is continuous; use it under sample:, or list values"
            )
        log = "log" in value.tags
        return Axis(key, interval=(float(value.start), float(value.end)), log=log)
    if isinstance(value, RangeSweep):
        size = _range_size(value.start, value.stop, value.step)
        if size > MAX_SWEEP_POINTS:
            raise ValueError(
                f"axis '{key}': '{text}' has {size:,} values, more than a sweep's "
                f"{MAX_SWEEP_POINTS:,} points"
            )
    if isinstance(value, (ChoiceSweep, RangeSweep)):
        values = tuple(override.sweep_iterator())
        if not values:
            raise ValueError(f"axis '{key}': '{text}' has no values")
        return Axis(key, values)
    return Axis(key, (value,))


def format_value(value: Any) -> str:
    """Write a Python value back in Hydra's override grammar."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{format_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if text and all(c.isalnum() or c in "_-./" for c in text) and not text[0].isdigit():
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _grid_rows(axes: Sequence[Axis]) -> list[tuple[tuple[str, Any], ...]]:
    if not axes:
        return [()]
    return [
        tuple(zip([a.key for a in axes], combo, strict=True))
        for combo in itertools.product(*(a.values for a in axes))
    ]


def _zip_rows(axes: Sequence[Axis]) -> list[tuple[tuple[str, Any], ...]]:
    if not axes:
        return [()]
    lengths = {a.key: len(a.values) for a in axes}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"zip axes must have equal lengths, got {lengths}")
    return [tuple((a.key, a.values[i]) for a in axes) for i in range(len(axes[0].values))]


def _unit_samples(method: str, count: int, dims: int, seed: int) -> Any:
    import numpy as np

    if method == "random":
        return np.random.default_rng(seed).random((count, dims))
    if method == "sobol":
        from scipy.stats import qmc

        return qmc.Sobol(d=dims, scramble=True, seed=seed).random(count)
    raise ValueError(f"sample method must be 'random' or 'sobol', got '{method}'")


def _from_unit(axis: Axis, u: float) -> Any:
    if axis.interval is not None:
        low, high = axis.interval
        if axis.log:
            value = math.exp(math.log(low) + u * (math.log(high) - math.log(low)))
        else:
            value = low + u * (high - low)
        return float(f"{value:.6g}")
    index = min(int(u * len(axis.values)), len(axis.values) - 1)
    return axis.values[index]


def _sample_rows(sample: SampleAxes | None) -> list[tuple[tuple[str, Any], ...]]:
    if sample is None or not sample.axes:
        return [()]
    units = _unit_samples(sample.method, sample.count, len(sample.axes), sample.seed)
    return [
        tuple(
            (axis.key, _from_unit(axis, float(u))) for axis, u in zip(sample.axes, row, strict=True)
        )
        for row in units
    ]


def _range_size(start: Any, stop: Any, step: Any) -> int:
    """How many values ``range(start, stop, step)`` (ints or floats, as Hydra's) yields."""
    start, stop, step = float(start), float(stop), float(1 if step is None else step)
    if step == 0 or not all(math.isfinite(x) for x in (start, stop, step)):
        return 0 if step == 0 else MAX_SWEEP_POINTS + 1
    return max(0, math.ceil((stop - start) / step))


def count_points(axes: SweepAxes) -> int:
    """Points before duplicates are dropped: grid product x zip rows x samples. Raises
    ValueError naming the product when it is over ``MAX_SWEEP_POINTS`` (nothing expanded)."""
    factors = [(a.key, len(a.values)) for a in axes.grid]
    if axes.zip:
        factors.append(("zip", len(axes.zip[0].values)))
    if axes.sample is not None and axes.sample.axes:
        factors.append(("sample.count", axes.sample.count))
    total = math.prod(size for _, size in factors)
    if total > MAX_SWEEP_POINTS:
        product = " x ".join(f"{size:,} ({name})" for name, size in factors)
        raise ValueError(
            f"the sweep has {product} = {total:,} points, more than {MAX_SWEEP_POINTS:,}; "
            "split it into smaller sweeps"
        )
    return total


def expand_points(axes: SweepAxes) -> list[tuple[tuple[str, Any], ...]]:
    """All points as tuples of ``(key, value)`` pairs, duplicates removed, order stable."""
    count_points(axes)
    keys = [a.key for a in (*axes.grid, *axes.zip, *(axes.sample.axes if axes.sample else ()))]
    repeated = {k for k in keys if keys.count(k) > 1}
    if repeated:
        raise ValueError(f"a key may be swept by one axis only: {', '.join(sorted(repeated))}")
    seen: dict[tuple[str, ...], tuple[tuple[str, Any], ...]] = {}
    for grid_row in _grid_rows(axes.grid):
        for zip_row in _zip_rows(axes.zip):
            for sample_row in _sample_rows(axes.sample):
                point = (*grid_row, *zip_row, *sample_row)
                seen.setdefault(to_overrides(point), point)
    return list(seen.values())


def to_overrides(point: Sequence[tuple[str, Any]]) -> tuple[str, ...]:
    """A point's ``(key, value)`` pairs as Hydra ``key=value`` override strings."""
    return tuple(f"{key}={format_value(value)}" for key, value in point)
