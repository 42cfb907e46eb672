"""Report figures (PDF for the paper, PNG at 200 dpi; :mod:`rollcli.analysis.figstyle`).

- ``accuracy``: the target metric against cumulative generated rollouts, per allocator: the
  seed-mean curve the speedups are computed on (smoothed as the target says) with the table's
  band: a bootstrap interval (5 seeds or more), else each seed's own curve, as the table gives
  each seed's speedup; the target as a dashed line; a second panel limited to the baseline's
  budget, where the close race is; one legend for both panels;
- ``accuracy_steps``: the same against training steps;
- ``variance``: mean in-group reward variance of the trained groups and the zero-variance group
  fraction per step, with the same band method (allocators that train groups of one rollout,
  such as SPO, are left out: their variance is zero by construction, and said so);
- ``tokens``: generated tokens per step.

Titles never hold the run's name (a paper's caption does that); counts read ``10k``. The
``*_data`` functions return what a figure draws, so tests check the data, not pixels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rollcli.analysis.analyze import MIN_INTERVAL_SEEDS, RunAnalysis, seed_curves
from rollcli.analysis.figstyle import color, count_axis, new_figure, plain_axis, save_figure
from rollcli.analysis.load import JobMetrics
from rollcli.analysis.stats import SeedCurves, is_balanced, percentile_interval, resample_indices
from rollcli.text import fmt_count

__all__ = [
    "write_plots",
    "curve_band",
    "step_series",
    "StepSeries",
    "single_rollout_groups",
    "save_figure",
]

_GRID_POINTS = 200


class StepSeries:
    """A per-step key of an allocator's jobs on the steps every seed has: the seed mean, and
    either a bootstrap band (``low``/``high``, 5 seeds or more) or each seed's values."""

    def __init__(self, steps, per_seed, low=None, high=None):
        self.steps = steps
        self.per_seed = per_seed  # (num_seeds, num_steps)
        self.mean = per_seed.mean(axis=0)
        self.low, self.high = low, high

    @property
    def banded(self) -> bool:
        return self.low is not None


def step_series(
    jobs: list[JobMetrics], key: str, confidence: float, *, num_resamples: int = 1000, seed: int = 0
) -> StepSeries | None:
    """The seed mean of ``key`` per step with the table's band: seeds drawn with replacement,
    the mean of each draw, expanded percentiles at every step (:func:`curve_band`'s method);
    under :data:`MIN_INTERVAL_SEEDS` seeds no band (each seed is drawn instead)."""
    series = [j.series(key) for j in jobs]
    series = [(s, v) for s, v in series if s.size]
    if not series:
        return None
    common = series[0][0]
    for steps, _ in series[1:]:
        common = np.intersect1d(common, steps)
    if not common.size:
        return None
    values = np.stack([v[np.isin(s, common)] for s, v in series])
    n = values.shape[0]
    if n < MIN_INTERVAL_SEEDS:
        return StepSeries(common.astype(float), values)
    rng = np.random.default_rng(seed)
    drawn = values[rng.integers(0, n, size=(num_resamples, n))].mean(axis=1)
    bounds = np.array(
        [percentile_interval(drawn[:, j], confidence, num_seeds=n) for j in range(common.size)]
    )
    return StepSeries(common.astype(float), values, bounds[:, 0], bounds[:, 1])


def single_rollout_groups(jobs: list[JobMetrics]) -> bool:
    """Whether every trained group had one rollout (SPO's ``n: 1``): in-group reward variance and
    the all-equal share mean nothing there."""
    trained = [(j.series("rollouts_trained")[1], j.series("prompts_trained")[1]) for j in jobs]
    trained = [(r, p) for r, p in trained if r.size and r.size == p.size]
    return bool(trained) and all(np.array_equal(r, p) for r, p in trained)


def _draw_steps(ax, series: StepSeries, index: int, label: str) -> None:
    ax.plot(series.steps, series.mean, color=color(index), label=label)
    if series.banded:
        ax.fill_between(series.steps, series.low, series.high, color=color(index), alpha=0.2, lw=0)
        return
    for values in series.per_seed:
        ax.plot(series.steps, values, color=color(index), lw=0.6, alpha=0.45, ls=":")


def curve_band(
    curves: SeedCurves,
    confidence: float,
    *,
    num_resamples: int = 1000,
    seed: int = 0,
    by_step: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(grid, low, high): a bootstrap interval band around the seed-mean curve, the method of the
    table's intervals (seeds drawn with replacement — base models, then seeds, when the run varies
    the base model — the mean curve of each draw, expanded percentiles). ``by_step`` bands accuracy against step instead of the curves' x. None under
    :data:`MIN_INTERVAL_SEEDS` seeds: there the plot draws every seed's own curve instead."""
    n = curves.num_seeds
    if n < MIN_INTERVAL_SEEDS or curves.steps.size < 2:
        return None
    if not is_balanced(curves.seeds):
        return None
    # the table's draws (two-level when the run varies the base model)
    idx, _ = resample_indices(
        curves.seeds, curves.seeds, num_resamples, np.random.default_rng(seed)
    )
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


def _draw_curves(
    ax, curves: SeedCurves, index: int, label: str, confidence: float, *, by_step=False
):
    """The seed-mean curve, with its interval band (enough seeds) or each seed's own curve."""
    x, y = (a[0] for a in curves.mean_curves(curves.all_seeds()))
    if by_step:
        x = curves.steps.astype(float)
    ax.plot(x, y, color=color(index), label=label)
    band = curve_band(curves, confidence, by_step=by_step)
    if band is not None:
        ax.fill_between(band[0], band[1], band[2], color=color(index), alpha=0.2, lw=0)
        return
    for k in range(curves.num_seeds):
        xk = curves.steps.astype(float) if by_step else curves.x[k]
        ax.plot(xk, curves.y[k], color=color(index), lw=0.6, alpha=0.45, ls=":")


def band_label(n_min: int, confidence: float) -> str:
    """What the shading (or the dotted lines) around each seed mean is, for the legend."""
    if n_min >= MIN_INTERVAL_SEEDS:
        return f"band: {round(confidence * 100)}% bootstrap CI"
    return f"dotted: each seed (< {MIN_INTERVAL_SEEDS} seeds: no band)"


def _legend(fig, axes, note: str) -> None:
    """One legend for every panel, below them, with what the band is."""
    from matplotlib.lines import Line2D

    handles, labels = [], []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    handles.append(Line2D([], [], color="none"))
    labels.append(note)
    fig.legend(
        handles,
        labels,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=min(len(labels), 4 if len(axes) > 1 else 2),
        frameon=False,
        fontsize=7,
    )


def accuracy_data(analysis: RunAnalysis) -> dict:
    """What ``accuracy`` draws: per allocator the seed-mean curve (x, y) and whether it is banded;
    the target; the second panel's x limit (the baseline's budget)."""
    run = analysis.run
    curves_of = {name: seed_curves(run, name)["rollouts"] for name in run.allocators}
    drawn = {n: c for n, c in curves_of.items() if c.num_seeds and c.steps.size}
    base = drawn.get(run.target.baseline)
    return {
        "curves": {
            name: {
                "x": c.mean_curves(c.all_seeds())[0][0].tolist(),
                "y": c.mean_curves(c.all_seeds())[1][0].tolist(),
                "banded": c.num_seeds >= MIN_INTERVAL_SEEDS,
            }
            for name, c in drawn.items()
        },
        "target": analysis.target_value,
        "budget": float(base.x[:, -1].mean()) if base is not None else None,
        "drawn": drawn,
    }


def write_plots(analysis: RunAnalysis, out_dir: str | Path) -> list[Path]:
    """Write the accuracy (against rollouts, and against steps), variance and tokens figures as
    PDF and PNG; returns the paths."""
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    run = analysis.run
    metric = run.target.metric
    paths: list[Path] = []
    confidence = analysis.confidence
    data = accuracy_data(analysis)
    drawn = data["drawn"]
    note = band_label(min((c.num_seeds for c in drawn.values()), default=0), confidence)
    smooth = f" (smoothed over {run.target.smooth} evals)" if run.target.smooth > 1 else ""
    baseline = run.target.baseline
    budget = data["budget"]
    index = {name: i for i, name in enumerate(run.allocators)}

    fig, axes = new_figure(2, column=False, height=2.6)
    for ax, limit in zip(axes, (None, budget), strict=True):
        for name in run.allocators:
            if name in drawn:
                label = f"{name} (baseline)" if name == baseline else name
                _draw_curves(ax, drawn[name], index[name], label, confidence)
        if analysis.target_value is not None:
            ax.axhline(analysis.target_value, color="black", ls="--", lw=0.8, label="target")
        ax.set_xlabel("cumulative generated rollouts")
        ax.set_ylabel(f"{metric}{smooth}")
        count_axis(ax, "x")
        if limit is not None:
            ax.set_xlim(0, limit * 1.03)
            inside = [
                c.y[:, c.x.mean(axis=0) <= limit * 1.03] for c in drawn.values() if c.steps.size
            ]
            values = np.concatenate([v.ravel() for v in inside if v.size] or [np.array([])])
            if values.size:
                pad = 0.05 * (values.max() - values.min() or 1.0)
                ax.set_ylim(values.min() - pad, values.max() + pad)
            ax.set_title(f"within {baseline}'s budget ({fmt_count(limit)} rollouts)")
        else:
            ax.set_title("all generated rollouts")
    _legend(fig, axes, note)
    paths += save_figure(fig, out_dir, "accuracy")
    plt.close(fig)

    fig, (ax,) = new_figure(1, height=2.4)
    for name in run.allocators:
        if name in drawn:
            label = f"{name} (baseline)" if name == baseline else name
            _draw_curves(ax, drawn[name], index[name], label, confidence, by_step=True)
    if analysis.target_value is not None:
        ax.axhline(analysis.target_value, color="black", ls="--", lw=0.8, label="target")
    ax.set_xlabel("training step")
    ax.set_ylabel(f"{metric}{smooth}")
    _legend(fig, [ax], note)
    paths += save_figure(fig, out_dir, "accuracy_steps")
    plt.close(fig)

    fig, axes = new_figure(2, column=False, height=2.4)
    single = [n for n in run.allocators if single_rollout_groups(run.jobs_of(n))]
    for key, ax, ylabel in (
        ("reward_var", axes[0], "reward variance of trained groups"),
        ("zero_var_frac", axes[1], "share of all-equal groups"),
    ):
        for name in run.allocators:
            if name in single:
                continue
            series = step_series(run.jobs_of(name), key, confidence)
            if series is not None:
                _draw_steps(ax, series, index[name], name)
        ax.set_xlabel("training step")
        ax.set_ylabel(ylabel)
        plain_axis(ax, "y")
    axes[1].set_ylim(0, 1)
    if single:
        axes[0].set_title(f"not drawn: {', '.join(single)} (groups of one rollout)")
    _legend(fig, axes, note)
    paths += save_figure(fig, out_dir, "variance")
    plt.close(fig)

    fig, (ax,) = new_figure(1, height=2.4)
    for name in run.allocators:
        series = step_series(run.jobs_of(name), "step_tokens", confidence)
        if series is not None:
            _draw_steps(ax, series, index[name], name)
    ax.set_xlabel("training step")
    ax.set_ylabel("generated tokens per step")
    count_axis(ax, "y")
    _legend(fig, [ax], note)
    paths += save_figure(fig, out_dir, "tokens")
    plt.close(fig)
    return paths
