"""Ablation plots: speedup against each swept axis (one hue per value of the other axes, error
bars = the interval, or under 5 seeds the range of the seeds' own speedups), and a heatmap over
two grid axes. Style and files: :mod:`rollcli.analysis.figstyle`."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

__all__ = ["write_ablation_plots", "axis_series"]


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _slug(key: str) -> str:
    return key.replace(".", "_").replace("/", "_")


def _spread(result: Any) -> tuple[float, float] | None:
    """The error bar of a point: its interval, else the range of its seeds' own speedups."""
    if result.ci is not None:
        return result.ci
    seeds = [b.value for b in result.seed_speedups.values() if math.isfinite(b.value)]
    return (min(seeds), max(seeds)) if seeds else None


def axis_series(ablation: Any, axis: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """What the plot of ``axis`` draws: per (allocator, the other axes' values) one series of
    points ``{x, speedup, exact, low, high}`` sorted by x (golden-tested, not the pixels)."""
    others = [a for a in ablation.axes if a != axis]
    series: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in ablation.results:
        if axis not in r.values or not math.isfinite(r.speedup.value):
            continue
        rest = ", ".join(f"{a.rsplit('.', 1)[-1]}={r.values.get(a)}" for a in others)
        spread = _spread(r) if r.speedup.exact else None
        series[(r.allocator, rest)].append(
            {
                "x": r.values[axis],
                "speedup": r.speedup.value,
                "exact": r.speedup.exact,
                "low": None if spread is None else spread[0],
                "high": None if spread is None else spread[1],
            }
        )
    for points in series.values():
        if _numeric([p["x"] for p in points]):
            points.sort(key=lambda p: float(p["x"]))
    return dict(series)


def write_ablation_plots(ablation: Any, out_dir: str | Path) -> list[Path]:
    """One speedup-vs-axis plot per axis; a heatmap for two grid axes."""
    import matplotlib.pyplot as plt

    from rollcli.analysis.figstyle import color, new_figure, save_figure

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    few = any(r.ci is None and r.seed_speedups for r in ablation.results)
    for axis in ablation.axes:
        fig, (ax,) = new_figure(1, height=2.4)
        series = axis_series(ablation, axis)
        labels = sorted({str(p["x"]) for pts in series.values() for p in pts})
        numeric = _numeric([p["x"] for pts in series.values() for p in pts])
        values = [float(p["x"]) for pts in series.values() for p in pts] if numeric else [0.0]
        span = (max(values) - min(values)) or 1.0
        for i, ((allocator, rest), points) in enumerate(sorted(series.items())):
            xs = [p["x"] if numeric else labels.index(str(p["x"])) for p in points]
            # a small shift between hues so that error bars at one x do not hide each other
            shift = (0.012 * span if numeric else 0.06) * (i - (len(series) - 1) / 2)
            label = allocator if len(ablation.focus) > 1 else ""
            label = ", ".join(t for t in (label, rest) if t) or allocator
            ys = [p["speedup"] for p in points]
            ax.plot([x + shift for x in xs], ys, color=color(i), lw=0.8, alpha=0.6)
            exact = [p for p, x in zip(points, xs, strict=True) if p["exact"]]
            ex = [x + shift for p, x in zip(points, xs, strict=True) if p["exact"]]
            if exact:
                yerr = [
                    [p["speedup"] - p["low"] if p["low"] is not None else 0.0 for p in exact],
                    [p["high"] - p["speedup"] if p["high"] is not None else 0.0 for p in exact],
                ]
                ax.errorbar(ex, [p["speedup"] for p in exact], yerr=yerr, fmt="o", ms=3,
                            capsize=2, color=color(i), label=label)  # fmt: skip
            bounds = [(x + shift, p["speedup"]) for p, x in zip(points, xs, strict=True)
                      if not p["exact"]]  # fmt: skip
            if bounds:
                ax.scatter(*zip(*bounds, strict=True), marker="v", facecolors="none",
                           edgecolors=color(i), s=16)  # fmt: skip
        if not numeric:
            ax.set_xticks(range(len(labels)), labels)
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        ax.set_xlabel(axis.rsplit(".", 1)[-1])
        ax.set_ylabel("speedup in rollouts (vs baseline)")
        bars = "seeds' range" if few else "95% interval"
        ax.set_title(f"bars: {bars}; hollow triangle: a bound")
        ax.legend(fontsize=6, frameon=False)
        files += save_figure(fig, out_dir, f"ablation_{_slug(axis)}")
        plt.close(fig)
    if len(ablation.grid_axes) >= 2:
        files += _heatmaps(ablation, out_dir, plt)
    return files


def _heatmaps(ablation: Any, out_dir: Path, plt: Any) -> list[Path]:
    from rollcli.analysis.figstyle import new_figure, save_figure

    x_axis, y_axis = ablation.grid_axes[:2]
    files: list[Path] = []
    for allocator in ablation.focus:
        cells: dict[tuple[Any, Any], list[float]] = defaultdict(list)
        bounded: set[tuple[Any, Any]] = set()
        for r in ablation.results:
            if r.allocator == allocator and math.isfinite(r.speedup.value):
                key = (r.values[x_axis], r.values[y_axis])
                cells[key].append(r.speedup.value)
                if r.speedup.kind != "exact":
                    bounded.add(key)
        if not cells:
            continue
        xs = sorted(
            {k[0] for k in cells}, key=str if not _numeric([k[0] for k in cells]) else float
        )
        ys = sorted(
            {k[1] for k in cells}, key=str if not _numeric([k[1] for k in cells]) else float
        )
        grid = [
            [(sum(cells[(x, y)]) / len(cells[(x, y)])) if (x, y) in cells else math.nan for x in xs]
            for y in ys
        ]
        fig, (ax,) = new_figure(1, height=2.8)
        ax.grid(False)
        from matplotlib.colors import TwoSlopeNorm

        finite = [v for row in grid for v in row if math.isfinite(v)]
        # diverging around 1.0: green = fewer rollouts than the baseline, red = more
        norm = TwoSlopeNorm(vcenter=1.0, vmin=min(min(finite), 0.99), vmax=max(max(finite), 1.01))
        image = ax.imshow(grid, origin="lower", cmap="RdYlGn", aspect="auto", norm=norm)
        ax.set_xticks(range(len(xs)), [f"{x:g}" if isinstance(x, float) else str(x) for x in xs])
        ax.set_yticks(range(len(ys)), [f"{y:g}" if isinstance(y, float) else str(y) for y in ys])
        for i, row in enumerate(grid):
            for j, value in enumerate(row):
                if math.isfinite(value):
                    mark = "<=" if (xs[j], ys[i]) in bounded else ""
                    ax.text(j, i, f"{mark}{value:.2f}", ha="center", va="center", fontsize=6)
        ax.set_xlabel(x_axis.rsplit(".", 1)[-1])
        ax.set_ylabel(y_axis.rsplit(".", 1)[-1])
        ax.set_title(f"{allocator} ('<=': target not reached)")
        bar = fig.colorbar(image, ax=ax)
        # the mean over a cell's points of the rollouts speedup, as the cells' numbers
        bar.set_label("speedup in rollouts (>1: fewer)", fontsize=7)
        bar.ax.tick_params(labelsize=6)
        files += save_figure(fig, out_dir, f"ablation_heatmap_{allocator}")
        plt.close(fig)
    return files
