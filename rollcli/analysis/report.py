"""Report files of a run: Markdown, LaTeX, CSV and JSON tables, and the plots.

``write_report`` analyses a run folder and writes ``report.<ext>`` files (atomically) under
``<run>/report/`` or another folder. Markdown and LaTeX show the display strings of the terminal
table; CSV and JSON are for machines, and never put a bound where a number is expected: a seed that
did not reach the target is ``">= x"`` in CSV and ``{"lower_bound": x}`` in JSON.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcli.analysis.analyze import MIN_INTERVAL_SEEDS, AxisResult, RunAnalysis, analyze_run
from rollcli.analysis.load import unit_label
from rollcli.analysis.summary import (
    COLUMNS,
    fmt_float,
    fmt_total,
    footnotes,
    headers,
    interval_method,
    per_seed_columns,
    per_seed_rows,
    summary_rows,
    target_line,
)
from rollcli.errors import RollcliError
from rollcli.store.atomic import atomic_write_json, atomic_write_text
from rollcli.store.folders import RunFolder

__all__ = [
    "FORMATS",
    "RENDERERS",
    "ReportResult",
    "write_report",
    "check_out_dir",
    "render_markdown",
    "render_latex",
    "render_latex_wide",
    "render_csv",
    "results_table",
    "render_json",
]

FORMATS = ("md", "latex", "csv", "json")
# LaTeX is two files: the compact table that fits one column of a two-column paper, and the wide one
_EXTENSIONS = {"md": "md", "latex": "tex", "csv": "csv", "json": "json"}
_AXIS_JSON = {"rollouts": "rollouts", "tokens": "tokens", "wall_s": "wall_clock"}
_AXIS_FMT = {"rollouts": "{:.0f}", "tokens": "{:.0f}", "wall_s": "{:.2f}"}


@dataclass
class ReportResult:
    analysis: RunAnalysis
    files: list[Path] = field(default_factory=list)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table (``|`` inside cells escaped)."""

    def cell(text: str) -> str:
        return str(text).replace("|", "\\|")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |"]
    lines.append("|" + "|".join("---" for _ in headers) + "|")
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(analysis: RunAnalysis) -> str:
    rows = summary_rows(analysis)
    parts = [
        f"# rollcli report: {analysis.run.experiment}",
        "",
        target_line(analysis) + ".",
        "",
        markdown_table(headers(analysis, COLUMNS), [[r[k] for k, _ in COLUMNS] for r in rows]),
        "",
        *(f"- {line}" for line in footnotes(analysis)),
        "",
    ]
    columns = per_seed_columns(analysis)
    seed_headers = [
        {"allocator": "Allocator", "base model": "Base model"}.get(c, c) for c in columns
    ]
    for axis, title in (("rollouts", "Rollouts"), ("tokens", "Tokens"), ("wall_s", "Wall-clock s")):
        table = per_seed_rows(analysis, axis)
        parts += [
            f"## {title} to target per seed",
            "",
            markdown_table(seed_headers, [[r[c] for c in columns] for r in table]),
            "",
        ]
    from rollcli.analysis.breakdown import render_breakdown_markdown, run_breakdown

    if breakdown := run_breakdown(analysis.run):  # where every rollout went (none: older rows)
        parts += [render_breakdown_markdown(breakdown, level=2)]
    if analysis.warnings:
        parts += ["## Warnings", ""] + [f"- {w}" for w in analysis.warnings] + [""]
    return "\n".join(parts)


_LATEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def _latex(text: str) -> str:
    out = "".join(_LATEX_ESCAPES.get(ch, ch) for ch in str(text))
    out = out.replace(">= ", r"$\geq$ ").replace("<= ", r"$\leq$ ")
    return re.sub(r"(\d)x(?![A-Za-z])", r"\1$\\times$", out)  # 1.23x -> 1.23$\times$


def _latex_speedup_parts(analysis: RunAnalysis, res: Any) -> tuple[str, str]:
    """(speedup, what follows it): ``1.25x`` and ``[1.05, 1.41]`` or ``(1.3, 1.2, 1.3)``."""
    axis = res.axes["rollouts"]
    if res.is_baseline:
        return "1.00x", "baseline"
    text = axis.speedup.display("{:.2f}x")
    if axis.ci is not None:
        return text, f"[{axis.ci[0]:.2f}, {axis.ci[1]:.2f}]"
    if axis.few_seeds and axis.seed_speedups and axis.speedup.exact:
        seeds = ", ".join(b.display("{:.2f}") for _, b in sorted(axis.seed_speedups.items()))
        return text, f"({seeds})"
    return text, ""


def render_latex(analysis: RunAnalysis) -> str:
    """The compact booktabs table that fits one column of a two-column paper: allocator,
    rollout-matched speedup with its interval, token-matched speedup, final accuracy, generated
    rollouts; under 5 seeds each seed's own speedup goes on a small line under its allocator.
    ``report-wide.tex`` (:func:`render_latex_wide`) holds every column."""
    interval = not analysis.few_seeds
    pct = round(analysis.confidence * 100)
    columns = ["Allocator", "Speedup"] + ([f"{pct}\\% CI"] if interval else [])
    columns += ["Tokens", "Acc.", "Rollouts"]
    spread = (
        f"[{pct}\\% CI]: bootstrap interval over seeds"
        if interval
        else "per seed: each seed's own speedup (against the same baseline seed)"
    )
    lines = [
        "% generated by rollcli report; needs \\usepackage{booktabs}; fits one column",
        "\\begin{table}[t]",
        "\\centering",
        "\\small",
        "\\setlength{\\tabcolsep}{4pt}",
        f"\\caption{{{_latex(target_line(analysis))}. Speedup: "
        f"{_latex(analysis.run.target.baseline)}'s generated rollouts to the target over the "
        f"allocator's (rollout-matched); {spread}; Tokens: the same in generated tokens "
        "(token-matched); Acc.: final accuracy; Rollouts: generated per run (mean over seeds).}",
        f"\\begin{{tabular}}{{@{{}}l{'r' * (len(columns) - 1)}@{{}}}}",
        "\\toprule",
        " & ".join(columns) + " \\\\",
        "\\midrule",
    ]
    for res in analysis.allocators:
        speedup, detail = _latex_speedup_parts(analysis, res)
        tokens = "1.00x" if res.is_baseline else res.axes["tokens"].speedup.display("{:.2f}x")
        cells = [res.name, speedup] + ([detail] if interval else [])
        cells += [tokens, fmt_float(res.final_accuracy), fmt_total(res.generated_rollouts)]
        escaped = [_latex(c) for c in cells]
        if interval and detail:
            escaped[2] = "{\\scriptsize " + escaped[2] + "}"
        lines.append(" & ".join(escaped) + " \\\\")
        if not interval and detail.startswith("("):
            seeds = _latex(detail.strip("()")).replace("$ ", "$")
            span = len(columns) - 1
            lines.append(f" & \\multicolumn{{{span}}}{{l}}{{\\scriptsize per seed: {seeds}}} \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}", ""]
    return "\n".join(lines)


def render_latex_wide(analysis: RunAnalysis) -> str:
    """Every column of the terminal table (``table*``: spans both columns of a paper)."""
    rows = summary_rows(analysis)
    spec = "l" * 2 + "r" * (len(COLUMNS) - 2)
    lines = [
        "% generated by rollcli report; needs \\usepackage{booktabs,graphicx}; spans the page"
        " (table*), scaled to its width",
        "\\begin{table*}[t]",
        "\\centering",
        "\\small",
        "\\setlength{\\tabcolsep}{3pt}",
        f"\\caption{{{_latex(analysis.run.experiment)}: {_latex(target_line(analysis))}.}}",
        "\\resizebox{\\textwidth}{!}{%",
        f"\\begin{{tabular}}{{@{{}}{spec}@{{}}}}",
        "\\toprule",
        " & ".join(_latex(h) for h in headers(analysis, COLUMNS)) + " \\\\",
        "\\midrule",
    ]
    for row in rows:
        lines.append(" & ".join(_latex(row[key]) for key, _ in COLUMNS) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}}", "\\end{table*}", ""]
    return "\n".join(lines)


def _csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if not math.isfinite(value) else f"{value:.6g}"
    return str(value)


def results_table(analysis: RunAnalysis) -> tuple[list[str], list[list[Any]]]:
    """The speedup table as plain values, one row per allocator: the columns of ``report.csv``
    (and of the W&B report run's table), numbers as numbers and ``None`` where unknown."""
    header = ["allocator", "kind", "baseline", "num_seeds"]
    for axis in _AXIS_JSON:
        header += [f"{axis}_to_target", f"{axis}_reached", f"{axis}_speedup"]
        header += [f"{axis}_speedup_bound", f"{axis}_ci_low", f"{axis}_ci_high"]
        header.append(f"{axis}_seeds_reached")
    header += ["step_time_ratio", "final_accuracy", "peak_accuracy", "generated_rollouts"]
    header += ["trained_rollouts", "generated_tokens", "reward_var", "zero_var_frac"]
    rows = []
    for res in analysis.allocators:
        row: list[Any] = [res.name, res.kind, analysis.run.target.baseline, len(res.seeds)]
        for axis in _AXIS_JSON:
            a = res.axes[axis]
            ci = a.ci or (None, None)
            cost, speedup = a.mean_curve, a.speedup
            known = speedup.kind != "unknown"
            row += [
                cost.value if cost.kind != "unknown" else None,
                {"exact": True, "lower": False}.get(cost.kind),
                speedup.value if known else None,
                "" if speedup.exact or not known else speedup.kind,
                ci[0],
                ci[1],
                a.reached,
            ]
        row += [res.step_time_ratio, res.final_accuracy, res.peak_accuracy]
        row += [res.generated_rollouts, res.trained_rollouts, res.generated_tokens]
        row += [res.reward_var, res.zero_var_frac]
        rows.append([_finite(v) if isinstance(v, float) else v for v in row])
    return header, rows


def render_csv(analysis: RunAnalysis) -> str:
    """One row per allocator, every numeric column a number (docs/report.md, Files): a cost
    that never reached the target is its bound with ``<axis>_reached`` false, a speedup that is
    a bound its bound with ``<axis>_speedup_bound`` ``lower``/``upper``; fractions are 0-1."""
    header, rows = results_table(analysis)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([_csv_value(v) for v in row])
    return buf.getvalue()


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def _axis_json(axis: AxisResult, fmt: str) -> dict[str, Any]:
    to_target = {
        "per_seed": {unit_label(s): b.to_json(fmt) for s, b in sorted(axis.per_seed.items())},
        "median": axis.median.to_json(fmt),
        "mean_curve": axis.mean_curve.to_json(fmt),
    }
    if axis.per_base_model:  # each base model's own mean-curve crossing
        to_target["per_base_model"] = {
            str(m): b.to_json(fmt) for m, b in sorted(axis.per_base_model.items())
        }
    return {
        "to_target": to_target,
        "speedup": axis.speedup.number(),
        "speedup_detail": axis.speedup.to_json("{:.4f}"),
        "ci_low": axis.ci[0] if axis.ci else None,
        "ci_high": axis.ci[1] if axis.ci else None,
        "reached": _finite(axis.reached),
        "seed_speedups": {
            unit_label(s): b.to_json("{:.4f}") for s, b in sorted(axis.seed_speedups.items())
        },
    }


def render_json(analysis: RunAnalysis) -> dict[str, Any]:
    """The report as a JSON-ready dict (docs/report.md describes every key)."""
    target = analysis.run.target
    allocators: dict[str, Any] = {}
    for res in analysis.allocators:
        axes = {_AXIS_JSON[k]: _axis_json(v, _AXIS_FMT[k]) for k, v in res.axes.items()}
        rollouts = axes["rollouts"]
        allocators[res.name] = {
            "kind": res.kind,
            "baseline": target.baseline,
            "is_baseline": res.is_baseline,
            "seeds": [unit_label(s) if isinstance(s, tuple) else s for s in res.seeds],
            "rollouts_to_target": rollouts["to_target"],
            "speedup": rollouts["speedup"],
            "speedup_detail": rollouts["speedup_detail"],
            "ci_low": rollouts["ci_low"],
            "ci_high": rollouts["ci_high"],
            "reached": rollouts["reached"],
            "seed_speedups": rollouts["seed_speedups"],
            "paired": {unit_label(s): p for s, p in sorted(res.axes["rollouts"].paired.items())},
            "tokens": axes["tokens"],
            "wall_clock": axes["wall_clock"],
            "step_time_s": _finite(res.step_time_s),
            "step_time_ratio": _finite(res.step_time_ratio),
            "tokens_per_step": _finite(res.tokens_per_step),
            "final_accuracy": _finite(res.final_accuracy),
            "peak_accuracy": _finite(res.peak_accuracy),
            "final_accuracy_per_seed": {
                unit_label(s): v for s, v in sorted(res.final_per_seed.items())
            },
            "peak_accuracy_per_seed": {
                unit_label(s): v for s, v in sorted(res.peak_per_seed.items())
            },
            "reward_var": _finite(res.reward_var),
            "zero_var_frac": _finite(res.zero_var_frac),
            "num_steps": res.num_steps,
        }
    return {
        "experiment": analysis.run.experiment,
        "target": {
            "baseline": target.baseline,
            "metric": target.metric,
            "at": target.at,
            "value": _finite(analysis.target_value),
            "spec_value": target.value,
            "smooth": target.smooth,
        },
        "confidence": analysis.confidence,
        "interval": "per-seed" if analysis.few_seeds else "bootstrap",
        "interval_method": interval_method(analysis),
        "base_models": analysis.base_models,
        "min_interval_seeds": MIN_INTERVAL_SEEDS,
        "notes": footnotes(analysis),
        "order": [res.name for res in analysis.allocators],  # display order; JSON keys get sorted
        "allocators": allocators,
        "warnings": list(analysis.warnings),
    }


# format name -> the function that renders it (text, or a JSON-ready dict for json)
RENDERERS: dict[str, Any] = {
    "md": render_markdown,
    "latex": render_latex,
    "csv": render_csv,
    "json": render_json,
}


def parse_formats(formats: str | Sequence[str] | None) -> list[str]:
    """``"md,csv"`` or ``["md", "csv"]`` -> validated list; None/"all" -> every format."""
    if formats is None:
        return list(FORMATS)
    items = formats.split(",") if isinstance(formats, str) else list(formats)
    names = [f.strip().lower() for item in items for f in str(item).split(",") if f.strip()]
    if names == ["all"]:
        return list(FORMATS)
    names = ["latex" if n == "tex" else n for n in names]
    bad = [n for n in names if n not in FORMATS]
    if bad:
        raise RollcliError(
            f"unknown report format {', '.join(bad)}: choose from {', '.join(FORMATS)}"
        )
    return list(dict.fromkeys(names))


def check_out_dir(out_dir: Path) -> None:
    """Refuse (before any work) a report folder that is, or lies under, an existing file."""
    blocker = next((p for p in (out_dir, *out_dir.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise RollcliError(
            f"{out_dir}: cannot write the report there: {blocker} is a file, not a folder; "
            "give another --out"
        )


def write_report(
    run_dir: str | Path,
    *,
    formats: str | Sequence[str] | None = None,
    out: str | Path | None = None,
    plots: bool = True,
    analysis: RunAnalysis | None = None,
    **analyze_kwargs: Any,
) -> ReportResult:
    """Analyse ``run_dir`` and write the report files (and plots) under ``out`` (default
    ``<run_dir>/report``). Returns the analysis and the paths written."""
    out_dir = Path(out) if out is not None else RunFolder(run_dir).report
    check_out_dir(out_dir)
    analysis = analysis or analyze_run(run_dir, **analyze_kwargs)
    result = ReportResult(analysis)
    for name in parse_formats(formats):
        path = out_dir / f"report.{_EXTENSIONS[name]}"
        if name == "json":
            atomic_write_json(path, render_json(analysis))
        else:
            atomic_write_text(path, RENDERERS[name](analysis))
        result.files.append(path)
        if name == "latex":
            wide = out_dir / "report-wide.tex"
            atomic_write_text(wide, render_latex_wide(analysis))
            result.files.append(wide)
    if plots:
        from rollcli.analysis.plots import write_plots

        result.files += write_plots(analysis, out_dir)
    from rollcli.analysis.breakdown import write_breakdown  # where every rollout went

    result.files += write_breakdown(analysis.run, out_dir, plots=plots)
    return result
