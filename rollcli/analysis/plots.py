"""Report plots (PNG and SVG, matplotlib with the Agg backend, imported only when plotting).

- ``accuracy``: the target metric against cumulative generated rollouts, per allocator: the
  seed-mean curve the speedups are computed on (smoothed as the target says) with a bootstrap
  interval band (the table's method; with fewer than 5 seeds, each seed's own curve instead, as the
  table gives each seed's speedup), and the target as a dashed line; a second panel limited to
  the baseline's budget, where the close race is;
- ``accuracy_steps``: the same against training steps;
- ``variance``: mean in-group reward variance and zero-variance group fraction over steps;
- ``tokens``: generated tokens per step.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from rollcli.analysis.analyze import MIN_INTERVAL_SEEDS, RunAnalysis, seed_curves
from rollcli.analysis.load import JobMetrics
from rollcli.analysis.stats import SeedCurves, percentile_interval
from rollcli.store.atomic import atomic_write_bytes
from rollcli.text import fmt_count

__all__ = ["write_plots", "seed_band", "curve_band", "save_figure"]

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


def curve_band(
    curves: SeedCurves,
    confidence: float,
    *,
    num_resamples: int = 1000,
    seed: int = 0,
    by_step: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(grid, low, high): a bootstrap interval band around the seed-mean curve, the method of the
    table's intervals (seeds drawn with replacement, the mean curve of each draw, expanded
    percentiles). ``by_step`` bands accuracy against step instead of the curves' x. None under
    :data:`MIN_INTERVAL_SEEDS` seeds: there the plot draws every seed's own curve instead."""
    n = curves.num_seeds
    if n < MIN_INTERVAL_SEEDS or curves.steps.size < 2:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(num_resamples, n))
    xs, ys = curves.mean_curves(idx)
    if by_step:
        xs = np.broadcast_to(curves.steps.astype(float), ys.shape)
    lo, hi = float(xs[:, 0].max()), float(xs[:, -1].min())
    if hi <= lo:
        return None
    grid = np.linspace(lo, hi, _GRID_POINTS)
    drawn = np.stack([np.interp(grid, x, y) for x, y in zip(xs, ys, strict=True)])
    bounds = np.array(
        [percentile_interval(drawn[:, j], confidence, num_seeds=n) for j in range(grid.size)]
    )
    return grid, bounds[:, 0], bounds[:, 1]


def _draw_curves(ax, curves: SeedCurves, color, label: str, confidence: float, *, by_step=False):
    """The seed-mean curve, with its interval band (enough seeds) or each seed's own curve."""
    x, y = (a[0] for a in curves.mean_curves(curves.all_seeds()))
    if by_step:
        x = curves.steps.astype(float)
    ax.plot(x, y, color=color, label=label, lw=1.8)
    band = curve_band(curves, confidence, by_step=by_step)
    if band is not None:
        ax.fill_between(band[0], band[1], band[2], color=color, alpha=0.2, lw=0)
        return
    for k in range(curves.num_seeds):
        xk = curves.steps.astype(float) if by_step else curves.x[k]
        ax.plot(xk, curves.y[k], color=color, lw=0.8, alpha=0.45, ls=":")


def _how(n_min: int, confidence: float) -> str:
    if n_min >= MIN_INTERVAL_SEEDS:
        return f"seed mean, {round(confidence * 100)}% bootstrap band"
    return f"seed mean (solid) and each seed (dotted): under {MIN_INTERVAL_SEEDS} seeds, no band"


def write_plots(analysis: RunAnalysis, out_dir: str | Path) -> list[Path]:
    """Write accuracy (against rollouts, and against steps), variance and tokens plots as PNG and
    SVG; returns the paths."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    run = analysis.run
    metric = run.target.metric
    colors = plt.get_cmap("tab10")
    paths: list[Path] = []
    confidence = analysis.confidence
    curves_of = {name: seed_curves(run, name)["rollouts"] for name in run.allocators}
    drawn = {n: c for n, c in curves_of.items() if c.num_seeds and c.steps.size}
    how = _how(min((c.num_seeds for c in drawn.values()), default=0), confidence)
    smooth = f", smoothed over {run.target.smooth} evals" if run.target.smooth > 1 else ""
    baseline = run.target.baseline
    base = drawn.get(baseline)
    budget = float(base.x[:, -1].mean()) if base is not None else None

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharey=False)
    for ax, limit in zip(axes, (None, budget), strict=True):
        for i, name in enumerate(run.allocators):
            if name not in drawn:
                continue
            label = f"{name} (baseline)" if name == baseline else name
            _draw_curves(ax, drawn[name], colors(i % 10), label, confidence)
        if analysis.target_value is not None:
            ax.axhline(analysis.target_value, color="black", ls="--", lw=1, label="target")
        ax.set_xlabel("cumulative generated rollouts")
        ax.set_ylabel(f"eval/{metric}")
        ax.grid(alpha=0.3)
        if limit is not None:
            ax.set_xlim(0, limit * 1.03)
            inside = [
                c.y[:, c.x.mean(axis=0) <= limit * 1.03] for c in drawn.values() if c.steps.size
            ]
            values = np.concatenate([v.ravel() for v in inside if v.size])
            if values.size:
                pad = 0.05 * (values.max() - values.min() or 1.0)
                ax.set_ylim(values.min() - pad, values.max() + pad)
            ax.set_title(f"within {baseline}'s budget ({fmt_count(limit)} rollouts)", fontsize=10)
        else:
            ax.set_title("all generated rollouts", fontsize=10)
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"{run.experiment}: eval/{metric} vs rollouts ({how}{smooth})", fontsize=10)
    paths += save_figure(fig, out_dir, "accuracy")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, name in enumerate(run.allocators):
        if name in drawn:
            label = f"{name} (baseline)" if name == baseline else name
            _draw_curves(ax, drawn[name], colors(i % 10), label, confidence, by_step=True)
    if analysis.target_value is not None:
        ax.axhline(analysis.target_value, color="black", ls="--", lw=1, label="target")
    ax.set_xlabel("training step")
    ax.set_ylabel(f"eval/{metric}")
    ax.set_title(f"{run.experiment}: eval/{metric} vs step ({how})", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    paths += save_figure(fig, out_dir, "accuracy_steps")
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for key, ax, title, ylabel in (
        ("reward_var", axes[0], "reward variance of the trained groups", "mean in-group variance"),
        (
            "zero_var_frac",
            axes[1],
            "generated groups whose rewards are all equal",
            "fraction of groups",
        ),
    ):
        for i, name in enumerate(run.allocators):
            band = _step_band(run.jobs_of(name), key)
            if band is None:
                continue
            grid, mean, low, high = band
            ax.plot(grid, mean, color=colors(i % 10), label=name)
            ax.fill_between(grid, low, high, color=colors(i % 10), alpha=0.2, linewidth=0)
        ax.set_xlabel("training step")
        ax.set_ylabel(ylabel)
        ax.set_title(title + " (seed mean, min-max band)", fontsize=9)
        ax.grid(alpha=0.3)
    axes[1].set_ylim(0, 1)
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
    ax.set_xlabel("training step")
    ax.set_ylabel("generated tokens per step")
    ax.set_title(
        f"{run.experiment}: tokens per step (all generated; seed mean, min-max)", fontsize=9
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    paths += save_figure(fig, out_dir, "tokens")
    plt.close(fig)
    return paths
