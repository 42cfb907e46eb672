"""Report plots (PNG and SVG, matplotlib with the Agg backend, imported only when plotting).

- ``accuracy``: the target metric against cumulative rollouts, per allocator: the seed-mean curve
  the speedups are computed on (smoothed as the target says) with a min-max band across seeds, and
  the target as a dashed line;
- ``variance``: mean in-group reward variance and zero-variance group fraction over steps;
- ``tokens``: generated tokens per step.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from rollcli.analysis.analyze import RunAnalysis, seed_curves
from rollcli.analysis.load import JobMetrics
from rollcli.store.atomic import atomic_write_bytes

__all__ = ["write_plots", "seed_band", "save_figure"]

_GRID_POINTS = 200


def seed_band(
    curves: list[tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(grid, mean, low, high) of several seeds' curves on a common x grid.

    The grid spans the x-range every seed covers (no extrapolation past a seed's last point).
    """
    curves = [(x, y) for x, y in curves if x.size]
    if not curves:
        return None
    lo = max(float(x[0]) for x, _ in curves)
    hi = min(float(x[-1]) for x, _ in curves)
    if hi <= lo:
        x, y = curves[0]
        return x, y, y, y
    grid = np.linspace(lo, hi, _GRID_POINTS)
    ys = np.stack([np.interp(grid, x, y) for x, y in curves])
    return grid, ys.mean(axis=0), ys.min(axis=0), ys.max(axis=0)


def save_figure(fig, out_dir: Path, stem: str) -> list[Path]:
    """Write ``fig`` as ``<stem>.png`` and ``<stem>.svg`` (atomically, no timestamps inside)."""
    paths = []
    for ext in ("png", "svg"):
        buf = io.BytesIO()
        # no timestamps in the files: the same run gives the same plot bytes
        metadata = {"Date": None} if ext == "svg" else {"Software": None}
        fig.savefig(buf, format=ext, dpi=120, bbox_inches="tight", metadata=metadata)
        path = out_dir / f"{stem}.{ext}"
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    return paths


def _step_band(jobs: list[JobMetrics], key: str):
    return seed_band([(s.astype(float), v) for s, v in (j.series(key) for j in jobs)])


def write_plots(analysis: RunAnalysis, out_dir: str | Path) -> list[Path]:
    """Write accuracy, variance and tokens plots as PNG and SVG; returns the paths."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    run = analysis.run
    metric = run.target.metric
    colors = plt.get_cmap("tab10")
    paths: list[Path] = []

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, name in enumerate(run.allocators):
        curves = seed_curves(run, name)["rollouts"]
        if curves.num_seeds == 0 or curves.steps.size == 0:
            continue
        x, y = (a[0] for a in curves.mean_curves(curves.all_seeds()))
        label = f"{name} (baseline)" if name == run.target.baseline else name
        ax.plot(x, y, color=colors(i % 10), label=label)
        ax.fill_between(
            x, curves.y.min(axis=0), curves.y.max(axis=0), color=colors(i % 10), alpha=0.2, lw=0
        )
    if analysis.target_value is not None:
        ax.axhline(
            analysis.target_value, color="black", linestyle="--", linewidth=1, label="target"
        )
    ax.set_xlabel("cumulative rollouts")
    ax.set_ylabel(f"eval/{metric}")
    smooth = f", smoothed over {run.target.smooth} evals" if run.target.smooth > 1 else ""
    ax.set_title(f"{run.experiment}: eval/{metric} (mean, min-max over seeds{smooth})", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    paths += save_figure(fig, out_dir, "accuracy")
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for key, ax, label in (
        ("reward_var", axes[0], "mean in-group reward variance (trained groups)"),
        ("zero_var_frac", axes[1], "zero-variance group fraction (generated)"),
    ):
        for i, name in enumerate(run.allocators):
            band = _step_band(run.jobs_of(name), key)
            if band is None:
                continue
            grid, mean, low, high = band
            ax.plot(grid, mean, color=colors(i % 10), label=name)
            ax.fill_between(grid, low, high, color=colors(i % 10), alpha=0.2, linewidth=0)
        ax.set_xlabel("step")
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    paths += save_figure(fig, out_dir, "variance")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    for i, name in enumerate(run.allocators):
        band = _step_band(run.jobs_of(name), "step_tokens")
        if band is None:
            continue
        grid, mean, low, high = band
        ax.plot(grid, mean, color=colors(i % 10), label=name)
        ax.fill_between(grid, low, high, color=colors(i % 10), alpha=0.2, linewidth=0)
    ax.set_xlabel("step")
    ax.set_ylabel("generated tokens per step")
    ax.set_title(f"{run.experiment}: tokens per step (all generated rollouts)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    paths += save_figure(fig, out_dir, "tokens")
    plt.close(fig)
    return paths
