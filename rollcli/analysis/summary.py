"""The rollouts-to-target table: one row of display strings per allocator, and its rich rendering.

``summary_rows`` is shared by the terminal table, Markdown and LaTeX so that every output shows the
same numbers the same way. ``print_summary`` is what ``rollcli run`` prints when it finishes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rollcli.analysis.analyze import MIN_INTERVAL_SEEDS, AxisResult, RunAnalysis, analyze_run
from rollcli.text import fmt_count

__all__ = [
    "COLUMNS",
    "summary_rows",
    "per_seed_rows",
    "per_seed_columns",
    "interval_method",
    "target_line",
    "footnotes",
    "summary_table",
    "print_analysis",
    "print_summary",
]

# (key, header) in display order
COLUMNS: list[tuple[str, str]] = [
    ("allocator", "Allocator"),
    ("kind", "Kind"),
    ("seeds", "Seeds"),
    ("reached", "Reached"),
    ("rollouts", "Rollouts to target"),
    ("speedup", "Speedup"),
    ("tokens_speedup", "Tokens speedup"),
    ("wall_speedup", "Wall-clock speedup"),
    ("step_time_ratio", "Step time ratio"),
    ("final", "Final acc"),
    ("peak", "Peak acc"),
    ("generated", "Generated"),
    ("trained", "Trained"),
    ("reward_var", "Reward var"),
    ("zero_var", "Zero-var frac"),
]
# for terminals narrower than the full table: the speedups on every axis
MEDIUM_COLUMNS: list[tuple[str, str]] = [
    ("allocator", "Allocator"),
    ("seeds", "Seeds"),
    ("reached", "Reached"),
    ("rollouts", "Rollouts"),
    ("speedup", "Speedup"),
    ("tokens_speedup", "Tokens"),
    ("wall_speedup", "Wall-clock"),
    ("final", "Final"),
    ("peak", "Peak"),
    ("generated", "Generated"),
]
# and for 80 columns
COMPACT_COLUMNS: list[tuple[str, str]] = [
    ("allocator", "Allocator"),
    ("seeds", "Seeds"),
    ("reached", "Reached"),
    ("rollouts", "Rollouts"),
    ("speedup", "Speedup"),
    ("final", "Final"),
    ("peak", "Peak"),
]


def fmt_float(value: float | None, fmt: str = "{:.3f}") -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return fmt.format(value)


def fmt_total(value: float) -> str:
    """A mean count of rollouts (``9.6k``), ``n/a`` when the rows do not carry it."""
    return fmt_count(value) if math.isfinite(value) else "n/a"


def speedup_header(analysis: RunAnalysis) -> str:
    """The speedup column's header, saying what follows the number: ``Speedup [95% CI]`` (a
    bootstrap interval), or ``Speedup (per seed)`` (each seed against its own target)."""
    if analysis.few_seeds:
        return "Speedup (per seed)"
    if any(r.axes["rollouts"].ci is not None for r in analysis.allocators):
        return f"Speedup [{round(analysis.confidence * 100)}% CI]"
    return "Speedup"


def headers(analysis: RunAnalysis, columns: list[tuple[str, str]]) -> list[str]:
    """The display headers of ``columns`` for this analysis (the speedup's says what it holds)."""
    return [speedup_header(analysis) if key == "speedup" else h for key, h in columns]


def fmt_speedup(axis: AxisResult, baseline: bool, *, seeds: bool = True) -> str:
    """``1.23x [1.05, 1.41]`` (an interval), or with few seeds ``1.23x (1.10, 1.38)`` (each
    seed's own speedup, in seed order; ``seeds=False`` leaves them out), or ``>= 1.50x`` (a
    bound: never with an interval or seed values)."""
    if baseline:
        return "1.00x (baseline)"
    text = axis.speedup.display("{:.2f}x")
    if axis.ci is not None:
        text += f" [{axis.ci[0]:.2f}, {axis.ci[1]:.2f}]"
    elif seeds and axis.few_seeds and axis.seed_speedups and axis.speedup.exact:
        seeds = ", ".join(b.display("{:.2f}") for _, b in sorted(axis.seed_speedups.items()))
        text += f" ({seeds})"
    return text


def fmt_seeds(axis: AxisResult, num_seeds: int, baseline: bool) -> str:
    """``2``, or ``3 (1 unpaired)`` when some seeds have no baseline seed to pair with."""
    unpaired = sum(not p for p in axis.paired.values()) if not baseline else 0
    return f"{num_seeds} ({unpaired} unpaired)" if unpaired else str(num_seeds)


def fmt_reached(axis: AxisResult) -> str:
    total = len(axis.per_seed)
    if total == 0:
        return "n/a"
    return f"{sum(b.exact for b in axis.per_seed.values())}/{total}"


def summary_rows(analysis: RunAnalysis) -> list[dict[str, str]]:
    """One dict of display strings per allocator, keyed as :data:`COLUMNS`."""
    rows = []
    for res in analysis.allocators:
        axes = res.axes
        rows.append(
            {
                "allocator": res.name,
                "kind": res.kind,
                "seeds": fmt_seeds(axes["rollouts"], len(res.seeds), res.is_baseline),
                "reached": fmt_reached(axes["rollouts"]),
                "rollouts": axes["rollouts"].mean_curve.display(fmt_count),
                "speedup": fmt_speedup(axes["rollouts"], res.is_baseline),
                "tokens_speedup": fmt_speedup(axes["tokens"], res.is_baseline, seeds=False),
                "wall_speedup": fmt_speedup(axes["wall_s"], res.is_baseline, seeds=False),
                "step_time_ratio": fmt_float(res.step_time_ratio, "{:.2f}x"),
                "final": fmt_float(res.final_accuracy),
                "peak": fmt_float(res.peak_accuracy),
                "generated": fmt_total(res.generated_rollouts),
                "trained": fmt_total(res.trained_rollouts),
                "reward_var": fmt_float(res.reward_var, "{:.4f}"),
                "zero_var": fmt_float(res.zero_var_frac, "{:.2f}"),
            }
        )
    return rows


def all_seeds(analysis: RunAnalysis) -> list[int]:
    """The run seeds (without their base model, when the run varies it)."""
    units = {s for res in analysis.allocators for s in res.seeds}
    return sorted({u[1] if isinstance(u, tuple) else u for u in units})


def per_seed_columns(analysis: RunAnalysis) -> list[str]:
    """The keys of :func:`per_seed_rows`, in display order."""
    seeds = [f"seed {s}" for s in all_seeds(analysis)]
    if analysis.base_models:
        return ["allocator", "base model", *seeds, "seed mean"]
    return ["allocator", *seeds]


def per_seed_rows(analysis: RunAnalysis, axis: str = "rollouts") -> list[dict[str, Any]]:
    """Per allocator, each seed's cost to target (``>= x`` when not reached, ``-`` if absent).
    When the run varies the base model: one row per allocator and base model, whose ``seed mean``
    is where the mean curve of that base model's seeds reaches the target."""
    # seconds: 3 significant digits (sim steps take milliseconds; verl steps take minutes)
    fmt = "{:,.3g}" if axis == "wall_s" else fmt_count
    rows = []
    for res in analysis.allocators:
        result = res.axes[axis]
        for model in analysis.base_models or [None]:
            row: dict[str, Any] = {"allocator": res.name}
            if model is not None:
                row["base model"] = str(model)
            for seed in all_seeds(analysis):
                unit = seed if model is None else (model, seed)
                cost = result.per_seed.get(unit)
                row[f"seed {seed}"] = cost.display(fmt) if cost is not None else "-"
            if model is not None:
                mean = result.per_base_model.get(model)
                row["seed mean"] = mean.display(fmt) if mean is not None else "-"
            rows.append(row)
    return rows


def target_line(analysis: RunAnalysis) -> str:
    target = analysis.run.target
    value = fmt_float(analysis.target_value, "{:.4f}")
    base = next((r for r in analysis.allocators if r.is_baseline), None)
    num_seeds = len(base.seeds) if base is not None else None
    return f"Target: eval/{target.metric} >= {value} ({target.describe(num_seeds)})"


def footnotes(analysis: RunAnalysis) -> list[str]:
    """How to read the table: the lines that apply to this analysis, in order."""
    baseline = analysis.run.target.baseline
    lines = [
        "Rollouts: where the seed-mean curve first reaches the target; speedup: "
        f"{baseline}'s rollouts / the allocator's; '>= x': not reached (a bound); "
        "Reached: seeds whose own curve got there."
    ]
    results = analysis.allocators
    if any(r.axes["rollouts"].ci is not None for r in results):
        pct = round(analysis.confidence * 100)
        lines.append(f"[low, high]: {pct}% {interval_method(analysis)}.")
    if analysis.few_seeds:
        lines.append(
            f"Speedup (per seed): the seed-mean speedup, then in parentheses the speedup each "
            f"seed alone gives (against {baseline}'s same seed and that seed's own target), in "
            f"seed order; under {MIN_INTERVAL_SEEDS} seeds an interval would not be honest "
            "(docs/report.md)."
        )
    if any(not p for r in results if not r.is_baseline for p in r.axes["rollouts"].paired.values()):
        lines.append(f"unpaired: seeds {baseline} did not run, set against its seed-mean curve.")
    base = next((r for r in results if r.is_baseline), None)
    at = analysis.run.target.at
    if base is not None and at in ("final", "peak"):
        per_seed = base.axes["rollouts"].per_seed
        missed = sum(not b.exact for b in per_seed.values())
        if missed:
            what = "final values" if at == "final" else "mean curve's peak"
            lines.append(
                f"{baseline} reached {len(per_seed) - missed}/{len(per_seed)}: its target is the "
                f"mean of its seeds' {what}, which a seed ending below it never reaches; the "
                "seed-mean curve always does."
            )
    if analysis.warnings:  # printed after the footnotes, listed in the files and report.json
        count = len(analysis.warnings)
        lines.append(
            f"Read this table with the {count} warning{'s' if count > 1 else ''} below: "
            "a comparison may be void or a run misbehaved."
        )
    return lines


def interval_method(analysis: RunAnalysis) -> str:
    """How the intervals resample: over seeds, or over base models and then seeds."""
    models = analysis.base_models
    if models:
        return (
            f"two-level bootstrap interval: resamples the {len(models)} base models, then the "
            "seeds within each drawn base model (paired by base model and seed)"
        )
    return "bootstrap interval over seeds (paired by seed)"


def interval_line(analysis: RunAnalysis) -> str:
    """The footnotes as one paragraph (Markdown and LaTeX captions)."""
    return " ".join(footnotes(analysis))


def summary_table(
    analysis: RunAnalysis,
    *,
    compact: bool = False,
    columns: list[tuple[str, str]] | None = None,
    pad_edge: bool = True,
):
    """A rich Table of :func:`summary_rows` (``compact``: the columns that fit 80 characters;
    ``columns`` any other choice of :data:`COLUMNS`). No cell wraps: a table that does not fit
    is never squeezed, :func:`print_analysis` picks fewer columns instead."""
    from rich.table import Table

    columns = columns or (COMPACT_COLUMNS if compact else COLUMNS)
    table = Table(
        title=f"{analysis.run.experiment}: rollouts to target",
        title_justify="left",
        pad_edge=pad_edge,  # False saves two characters where that is what fits
    )
    for (key, _), header in zip(columns, headers(analysis, columns), strict=True):
        table.add_column(
            header, justify="left" if key in ("allocator", "kind") else "right", no_wrap=True
        )
    for row, res in zip(summary_rows(analysis), analysis.allocators, strict=True):
        style = "bold" if res.is_baseline else None
        table.add_row(*(row[key] for key, _ in columns), style=style)
    return table


def _fits(console, table) -> bool:
    from rich.measure import Measurement

    # measured unconstrained: within the console's width rich would squeeze the cells
    wide = console.options.update_width(100_000)
    return Measurement.get(console, wide, table).maximum <= console.width


def print_analysis(analysis: RunAnalysis, console, *, full_table: str | None = None) -> None:
    """The widest table that fits the terminal (every column, then the speedup columns, then the
    compact one), the target, how to read it (wrapped at word boundaries), and warnings.
    ``full_table`` says where the missing columns are (default: `rollcli report`)."""
    # the compact table without Peak, then without Seeds: per-seed speedups of 3-4 seeds are wide
    narrower = [c for c in COMPACT_COLUMNS if c[0] != "peak"]
    ladder = (COLUMNS, MEDIUM_COLUMNS, COMPACT_COLUMNS, narrower)
    for columns, pad in ((c, p) for c in ladder for p in (True, False)):
        table = summary_table(analysis, columns=columns, pad_edge=pad)
        if _fits(console, table):
            break
    else:
        table = summary_table(analysis, columns=[c for c in narrower if c[0] != "seeds"])
    console.print(table)
    console.print(target_line(analysis), highlight=False, soft_wrap=False)
    for line in footnotes(analysis):  # no markup: '[low, high]' is text, not a rich tag
        console.print(line, style="dim", highlight=False, soft_wrap=False, markup=False)
    if table.columns and len(table.columns) < len(COLUMNS):
        where = full_table or f"`rollcli report {analysis.run.run_dir}`"
        shown = {h for h in (c.header for c in table.columns)}
        shown = {"Speedup" if str(h).startswith("Speedup") else h for h in shown}
        words = {
            "Kind": "kind",
            "Seeds": "seeds",
            "Peak acc": "peak",
            "Generated": "generated",
            "Trained": "trained",
            "Tokens speedup": "tokens",
            "Wall-clock speedup": "wall-clock",
            "Step time ratio": "step time",
            "Reward var": "variance",
        }
        short = {"Peak": "Peak acc", "Tokens": "Tokens speedup", "Wall-clock": "Wall-clock speedup"}
        shown = {short.get(h, h) for h in shown}
        missing = ", ".join(w for h, w in words.items() if h not in shown)
        console.print(
            f"{missing} columns: {where} (or a wider terminal)",
            style="dim",
            highlight=False,
            soft_wrap=False,
        )
    from rich.text import Text

    for warning in analysis.warnings:
        console.print(Text.assemble(("warning: ", "yellow"), warning), highlight=False)


def print_summary(run_dir: str | Path, console=None, **analyze_kwargs) -> RunAnalysis:
    """Print the rollouts-to-target table of a run folder (the end of every ``rollcli run``)."""
    from rich.console import Console

    console = console or Console()
    analysis = analyze_run(run_dir, **analyze_kwargs)
    print_analysis(analysis, console)
    return analysis
