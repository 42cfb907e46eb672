"""The rollouts-to-target table: one row of display strings per allocator, and its rich rendering.

``summary_rows`` is shared by the terminal table, Markdown and LaTeX so that every output shows the
same numbers the same way. ``print_summary`` is what ``rollcli run`` prints when it finishes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rollcli.analysis.analyze import AxisResult, RunAnalysis, analyze_run

__all__ = [
    "COLUMNS",
    "summary_rows",
    "per_seed_rows",
    "target_line",
    "summary_table",
    "print_analysis",
    "print_summary",
]

# (key, header) in display order
COLUMNS: list[tuple[str, str]] = [
    ("allocator", "Allocator"),
    ("kind", "Kind"),
    ("reached", "Reached"),
    ("rollouts", "Rollouts to target"),
    ("speedup", "Speedup [CI]"),
    ("tokens_speedup", "Tokens speedup"),
    ("wall_speedup", "Wall-clock speedup"),
    ("step_time_ratio", "Step time ratio"),
    ("final", "Final acc"),
    ("peak", "Peak acc"),
    ("reward_var", "Reward var"),
    ("zero_var", "Zero-var frac"),
]
# for terminals narrower than the full table
COMPACT_COLUMNS: list[tuple[str, str]] = [
    ("allocator", "Allocator"),
    ("reached", "Reached"),
    ("rollouts", "Rollouts"),
    ("speedup", "Speedup [CI]"),
    ("final", "Final"),
    ("peak", "Peak"),
]
_FULL_WIDTH = 160


def fmt_float(value: float | None, fmt: str = "{:.3f}") -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return fmt.format(value)


def fmt_speedup(axis: AxisResult, baseline: bool) -> str:
    if baseline:
        return "1.00x (baseline)"
    text = axis.speedup.display("{:.2f}x")
    if axis.ci is not None:
        text += f" [{axis.ci[0]:.2f}, {axis.ci[1]:.2f}]"
    return text


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
                "reached": fmt_reached(axes["rollouts"]),
                "rollouts": axes["rollouts"].mean_curve.display("{:,.0f}"),
                "speedup": fmt_speedup(axes["rollouts"], res.is_baseline),
                "tokens_speedup": fmt_speedup(axes["tokens"], res.is_baseline),
                "wall_speedup": fmt_speedup(axes["wall_s"], res.is_baseline),
                "step_time_ratio": fmt_float(res.step_time_ratio, "{:.2f}x"),
                "final": fmt_float(res.final_accuracy),
                "peak": fmt_float(res.peak_accuracy),
                "reward_var": fmt_float(res.reward_var, "{:.4f}"),
                "zero_var": fmt_float(res.zero_var_frac, "{:.2f}"),
            }
        )
    return rows


def all_seeds(analysis: RunAnalysis) -> list[int]:
    return sorted({s for res in analysis.allocators for s in res.seeds})


def per_seed_rows(analysis: RunAnalysis, axis: str = "rollouts") -> list[dict[str, Any]]:
    """Per allocator, each seed's cost to target (``>= x`` when not reached, ``-`` if absent)."""
    # seconds: 3 significant digits (sim steps take milliseconds; verl steps take minutes)
    fmt = "{:,.3g}" if axis == "wall_s" else "{:,.0f}"
    rows = []
    for res in analysis.allocators:
        per_seed = res.axes[axis].per_seed
        row: dict[str, Any] = {"allocator": res.name}
        for seed in all_seeds(analysis):
            row[f"seed {seed}"] = per_seed[seed].display(fmt) if seed in per_seed else "-"
        rows.append(row)
    return rows


def target_line(analysis: RunAnalysis) -> str:
    target = analysis.run.target
    value = fmt_float(analysis.target_value, "{:.4f}")
    return f"Target: eval/{target.metric} >= {value} ({target.describe()})"


def interval_line(analysis: RunAnalysis) -> str:
    pct = round(analysis.confidence * 100)
    return (
        "Rollouts to target = where the seed-mean curve first reaches the target; speedup = "
        f"baseline ({analysis.run.target.baseline})'s / allocator's; [CI] = {pct}% bootstrap "
        "over seeds (paired by seed); '>= x' = not reached (a lower bound); "
        "Reached = seeds whose own curve got there."
    )


def summary_table(analysis: RunAnalysis, *, compact: bool = False):
    """A rich Table of :func:`summary_rows` (``compact``: the columns that fit 80 characters)."""
    from rich.table import Table

    columns = COMPACT_COLUMNS if compact else COLUMNS
    table = Table(title=f"{analysis.run.experiment}: rollouts to target", title_justify="left")
    for key, header in columns:
        table.add_column(
            header,
            justify="left" if key in ("allocator", "kind") else "right",
            no_wrap=key in ("allocator", "speedup", "rollouts"),
        )
    for row, res in zip(summary_rows(analysis), analysis.allocators, strict=True):
        style = "bold" if res.is_baseline else None
        table.add_row(*(row[key] for key, _ in columns), style=style)
    return table


def print_analysis(analysis: RunAnalysis, console, *, full_table: str | None = None) -> None:
    """The table (compact on narrow terminals), the target, how to read it, and warnings.
    ``full_table`` says where the compact table's missing columns are (default: `rollcli report`)."""
    compact = console.width < _FULL_WIDTH
    console.print(summary_table(analysis, compact=compact))
    console.print(target_line(analysis), highlight=False)
    console.print(interval_line(analysis), style="dim", highlight=False)
    if compact:
        where = full_table or f"`rollcli report {analysis.run.run_dir}`"
        console.print(
            f"tokens, wall-clock, variance columns: {where} (or a wider terminal)",
            style="dim",
            highlight=False,
        )
    for warning in analysis.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)


def print_summary(run_dir: str | Path, console=None, **analyze_kwargs) -> RunAnalysis:
    """Print the rollouts-to-target table of a run folder (the end of every ``rollcli run``)."""
    from rich.console import Console

    console = console or Console()
    analysis = analyze_run(run_dir, **analyze_kwargs)
    print_analysis(analysis, console)
    return analysis
