"""Ablation plots: speedup against each swept axis, and a heatmap over two grid axes."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

__all__ = ["write_ablation_plots"]


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _slug(key: str) -> str:
    return key.replace(".", "_").replace("/", "_")


def write_ablation_plots(ablation: Any, out_dir: str | Path) -> list[Path]:
    """One speedup-vs-axis plot per axis (error bars = CI); a heatmap for two grid axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rollcli.analysis.plots import save_figure

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    for axis in ablation.axes:
        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        for allocator in ablation.focus:
            points = [r for r in ablation.results if r.allocator == allocator and axis in r.values]
            if not points:
                continue
            xs = [r.values[axis] for r in points]
            if not _numeric(xs):
                labels = sorted({str(x) for x in xs})
                xs = [labels.index(str(x)) for x in xs]
                ax.set_xticks(range(len(labels)), labels)
            ys = [r.speedup.value for r in points]
            low = [y - r.ci[0] if r.ci else 0.0 for y, r in zip(ys, points, strict=True)]
            high = [r.ci[1] - y if r.ci else 0.0 for y, r in zip(ys, points, strict=True)]
            exact = [r.speedup.kind == "exact" for r in points]
            ax.errorbar(
                [x for x, e in zip(xs, exact, strict=True) if e],
                [y for y, e in zip(ys, exact, strict=True) if e],
                yerr=[
                    [v for v, e in zip(low, exact, strict=True) if e],
                    [v for v, e in zip(high, exact, strict=True) if e],
                ],
                fmt="o",
                capsize=3,
                label=allocator,
            )
            bounds = [
                (x, y) for x, y, e in zip(xs, ys, exact, strict=True) if not e and math.isfinite(y)
            ]
            if bounds:
                ax.scatter(
                    *zip(*bounds, strict=True),
                    marker="v",
                    facecolors="none",
                    edgecolors="gray",
                    label=f"{allocator} (bound)",
                )
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        ax.set_xlabel(axis)
        ax.set_ylabel("speedup vs baseline (rollouts)")
        ax.set_title(f"{ablation.name}: speedup vs {axis}")
        ax.legend(fontsize=8)
        files += save_figure(fig, out_dir, f"ablation_{_slug(axis)}")
        plt.close(fig)
    if len(ablation.grid_axes) >= 2:
        files += _heatmaps(ablation, out_dir, plt)
    return files


def _heatmaps(ablation: Any, out_dir: Path, plt: Any) -> list[Path]:
    from rollcli.analysis.plots import save_figure

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
        fig, ax = plt.subplots(figsize=(5.5, 4.2))
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
                    ax.text(j, i, f"{mark}{value:.2f}", ha="center", va="center", fontsize=8)
        ax.set_xlabel(x_axis)
        ax.set_ylabel(y_axis)
        ax.set_title(f"{allocator}: speedup vs baseline ('<=': target not reached)", fontsize=10)
        bar = fig.colorbar(image, ax=ax)
        # the mean over a cell's points of the rollouts speedup, as the cells' numbers
        bar.set_label("speedup vs baseline in rollouts to target (>1: fewer)")
        files += save_figure(fig, out_dir, f"ablation_heatmap_{allocator}")
        plt.close(fig)
    return files
