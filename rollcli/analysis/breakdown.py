"""Where every rollout went, per allocator: the breakdown table and its stacked bar plot.

Each train job's rows carry the ledger's split of its generation
(:mod:`rollcli.allocators.breakdown`): rollouts and tokens trained in an informative group,
trained in a zero-variance group, spent on a decision only, and still held at the end; plus the
rollouts a history-based allocator skipped (not generated, so outside the sum). Per allocator
this module averages the per-job totals over seeds and adds what the generation bought:
informative groups per 1,000 generated rollouts (every backend) and, on sim where the true
success probability is known, the summed ``sqrt(p(1-p))`` of the trained groups
(``train/true_signal``) per 1,000 generated rollouts.

``write_breakdown`` writes ``breakdown.md`` / ``.csv`` / ``.json`` and ``breakdown.pdf`` / ``.png``
next to the report; ``breakdown_table`` is the terminal table. Jobs whose rows predate the
breakdown columns are left out (and counted), never guessed.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rollcli.analysis.load import JobMetrics, RunData
from rollcli.store.atomic import atomic_write_json, atomic_write_text

__all__ = [
    "PARTS",
    "JobBreakdown",
    "AllocatorBreakdown",
    "job_breakdown",
    "run_breakdown",
    "render_breakdown_markdown",
    "breakdown_table",
    "write_breakdown",
]

PARTS = ("informative", "zero_var", "decision", "held")
_LABELS = {
    "informative": "Informative",
    "zero_var": "Zero-var",
    "decision": "Decision only",
    "held": "Held",
}
_COLORS = {
    "informative": "#2a9d8f",
    "zero_var": "#e9c46a",
    "decision": "#e76f51",
    "held": "#8d99ae",
}


@dataclass(frozen=True)
class JobBreakdown:
    """One job's totals over its steps (``held``: what its buffers hold after the last step)."""

    seed: int
    rollouts: dict[str, int]
    tokens: dict[str, int]
    generated: int
    generated_tokens: int
    skipped: int
    informative_groups: int
    true_signal: float | None


@dataclass
class AllocatorBreakdown:
    """Means over an allocator's jobs; ``shares`` are of the generated rollouts (tokens)."""

    allocator: str
    seeds: list[int]
    generated: float
    generated_tokens: float
    rollouts: dict[str, float]
    tokens: dict[str, float]
    skipped: float
    groups_per_1k: float
    signal_per_1k: float | None
    left_out: int = 0
    jobs: list[JobBreakdown] = field(default_factory=list, repr=False)

    def share(self, part: str, unit: str = "rollouts") -> float:
        total = self.generated if unit == "rollouts" else self.generated_tokens
        values = self.rollouts if unit == "rollouts" else self.tokens
        return values[part] / total if total else math.nan


def job_breakdown(job: JobMetrics) -> JobBreakdown | None:
    """Sum a job's per-step breakdown columns; None when its rows have none (an older run)."""
    rows = [r for r in job.rows if int(r.get("step", 0)) >= 1]
    if not rows or any("rollouts_informative" not in r for r in rows):
        return None
    rollouts = {p: sum(int(r[f"rollouts_{p}"]) for r in rows) for p in PARTS[:3]}
    tokens = {p: sum(int(r[f"tokens_{p}"]) for r in rows) for p in PARTS[:3]}
    rollouts["held"], tokens["held"] = int(rows[-1]["rollouts_held"]), int(rows[-1]["tokens_held"])
    signal = [r.get("train/true_signal") for r in rows]
    return JobBreakdown(
        seed=job.seed,
        rollouts=rollouts,
        tokens=tokens,
        generated=sum(int(r["step_rollouts"]) for r in rows),
        generated_tokens=sum(int(r["step_tokens"]) for r in rows),
        skipped=sum(int(r.get("rollouts_skipped", 0)) for r in rows),
        informative_groups=sum(int(r.get("groups_informative", 0)) for r in rows),
        true_signal=None if None in signal else float(sum(signal)),
    )


def run_breakdown(run: RunData) -> list[AllocatorBreakdown]:
    """Per allocator (in the run's order) the seed-mean breakdown of its train jobs that have one."""
    out = []
    for name in run.allocators:
        jobs = run.jobs_of(name)
        found = [b for b in map(job_breakdown, jobs) if b is not None]
        if not found:
            continue
        generated = float(np.mean([b.generated for b in found]))
        signals = [b.true_signal for b in found]
        per_k = [1000.0 * b.informative_groups / b.generated for b in found if b.generated]
        out.append(
            AllocatorBreakdown(
                allocator=name,
                seeds=[b.seed for b in found],
                generated=generated,
                generated_tokens=float(np.mean([b.generated_tokens for b in found])),
                rollouts={p: float(np.mean([b.rollouts[p] for b in found])) for p in PARTS},
                tokens={p: float(np.mean([b.tokens[p] for b in found])) for p in PARTS},
                skipped=float(np.mean([b.skipped for b in found])),
                groups_per_1k=float(np.mean(per_k)) if per_k else math.nan,
                signal_per_1k=None
                if None in signals
                else float(
                    np.mean([1000.0 * s / b.generated for s, b in zip(signals, found, strict=True)])
                ),
                left_out=len(jobs) - len(found),
                jobs=found,
            )
        )
    return out


def _pct(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{100 * x:.1f}%"


def _count(x: float) -> str:
    for bound, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= bound:
            return f"{x / bound:.3g}{suffix}"
    return f"{x:.0f}"


_HEADERS = (
    "Allocator",
    "Seeds",
    "Generated",
    *(_LABELS[p] for p in PARTS),
    "Skipped",
    "Inf. groups / 1k",
    "Signal / 1k",
)


def _cells(b: AllocatorBreakdown, unit: str, *, counts: bool = True) -> list[str]:
    total = b.generated if unit == "rollouts" else b.generated_tokens
    values = b.rollouts if unit == "rollouts" else b.tokens
    skipped = _count(b.skipped) if unit == "rollouts" else "-"
    return [
        b.allocator,
        str(len(b.seeds)),
        _count(total),
        *(
            f"{_pct(b.share(p, unit))} ({_count(values[p])})" if counts else _pct(b.share(p, unit))
            for p in PARTS
        ),
        skipped,
        f"{b.groups_per_1k:.1f}",
        "-" if b.signal_per_1k is None else f"{b.signal_per_1k:.1f}",
    ]


def render_breakdown_markdown(
    rows: Sequence[AllocatorBreakdown], experiment: str = "", *, level: int = 1
) -> str:
    """The rollouts and tokens tables, with what each column means (``level``: heading depth)."""
    from rollcli.analysis.report import markdown_table

    head = "#" * level
    lines = [f"{head} Where every rollout went{': ' + experiment if experiment else ''}", ""]
    for unit in ("rollouts", "tokens"):
        lines += [f"{head}# {unit.capitalize()}", ""]
        lines += [markdown_table(_HEADERS, [_cells(b, unit) for b in rows]), ""]
    lines += [
        "Means over seeds of each job's totals. Informative: trained in a group whose advantages "
        "are not all zero; Zero-var: trained, all advantages zero; Decision only: generated and "
        "never trained (pilots, screens, rejected groups, left-out subsets); Held: still in a "
        "buffer after the last step. The four add up to Generated. Skipped: rollouts a "
        "history-based allocator did not generate (not part of Generated). Signal / 1k: summed "
        "sqrt(p(1-p)) of the trained groups at the true p (sim only) per 1,000 generated rollouts.",
        "",
    ]
    left = [f"{b.allocator} ({b.left_out})" for b in rows if b.left_out]
    if left:
        lines += [f"Jobs without breakdown columns, left out: {', '.join(left)}.", ""]
    return "\n".join(lines)


# an 80-column terminal: no seeds, skipped or signal columns, shorter headers
_NARROW_HEADERS = ("Allocator", "Generated", "Inform.", "Zero-var", "Decision", "Held", "Inf/1k")
_NARROW_CELLS = (0, 2, 3, 4, 5, 6, 8)


def breakdown_table(rows: Sequence[AllocatorBreakdown], max_width: int | None = None):
    """A rich table of the rollouts breakdown, shares of generated (for the terminal); where
    every column is wider than ``max_width``, the shares and informative groups per 1k only."""
    from rich.table import Table

    cells = [_cells(b, "rollouts", counts=False) for b in rows]
    headers: Sequence[str] = _HEADERS
    natural = sum(max(len(h), *(len(c[i]) for c in cells)) + 3 for i, h in enumerate(_HEADERS)) + 1
    title = "Where every rollout went (share of generated, mean per job; counts: breakdown.md)"
    if max_width is not None and natural > max_width:
        headers = _NARROW_HEADERS
        cells = [[c[i] for i in _NARROW_CELLS] for c in cells]
        title = "Where every rollout went (share of generated; all columns: breakdown.md)"
    table = Table(title=title, title_justify="left")
    for i, header in enumerate(headers):
        table.add_column(header, justify="left" if i == 0 else "right", no_wrap=True)
    for row in cells:
        table.add_row(*row)
    return table


def _csv(rows: Sequence[AllocatorBreakdown]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    header = ["allocator", "seeds", "generated", "generated_tokens"]
    header += [f"rollouts_{p}" for p in PARTS] + [f"tokens_{p}" for p in PARTS]
    header += ["skipped", "informative_groups_per_1k", "signal_per_1k"]
    writer.writerow(header)
    for b in rows:
        writer.writerow(
            [b.allocator, len(b.seeds), f"{b.generated:.1f}", f"{b.generated_tokens:.1f}"]
            + [f"{b.rollouts[p]:.1f}" for p in PARTS]
            + [f"{b.tokens[p]:.1f}" for p in PARTS]
            + [f"{b.skipped:.1f}", f"{b.groups_per_1k:.3f}"]
            + ["" if b.signal_per_1k is None else f"{b.signal_per_1k:.3f}"]
        )
    return buf.getvalue()


def _json(rows: Sequence[AllocatorBreakdown]) -> list[dict[str, Any]]:
    def finite(x: float | None) -> float | None:
        return x if x is not None and math.isfinite(x) else None

    out = []
    for b in rows:
        d = asdict(b)
        d["groups_per_1k"] = finite(b.groups_per_1k)
        d["jobs"] = [asdict(j) for j in b.jobs]
        out.append(d)
    return out


def plot_breakdown(rows: Sequence[AllocatorBreakdown], out_dir: Path, stem: str = "breakdown"):
    """Stacked bars per allocator, rollouts and tokens, with skipped as a hatched bar on top."""
    import matplotlib.pyplot as plt

    from rollcli.analysis.figstyle import count_axis, new_figure, save_figure

    names = [b.allocator for b in rows]
    x = np.arange(len(rows))
    fig, axes = new_figure(2, column=False, height=2.6)
    for ax, unit in zip(axes, ("rollouts", "tokens"), strict=True):
        bottom = np.zeros(len(rows))
        for part in PARTS:
            values = np.array(
                [(b.rollouts if unit == "rollouts" else b.tokens)[part] for b in rows]
            )
            ax.bar(x, values, bottom=bottom, color=_COLORS[part], label=_LABELS[part], width=0.7,
                   linewidth=0)  # fmt: skip
            bottom += values
        if unit == "rollouts" and any(b.skipped for b in rows):
            # clipped at the tallest generated bar (GRESO skips ~30x what it generates), the
            # true multiple written on top
            skipped = np.array([b.skipped for b in rows])
            cap = float(bottom.max())
            some = skipped > 0
            ax.bar(x[some], np.minimum(skipped, cap)[some], bottom=bottom[some], width=0.7,
                   fill=False, hatch="//", edgecolor="#555555",
                   label="Skipped (not generated)")  # fmt: skip
            for i in np.flatnonzero(skipped > cap):
                ax.text(x[i], bottom[i] + cap, f"skipped {skipped[i] / max(bottom[i], 1):.0f}x",
                        ha="center", va="bottom", fontsize=6)  # fmt: skip
        ax.set_xticks(x, names, rotation=35, ha="right")
        ax.set_ylabel(f"generated {unit} per job")
        count_axis(ax, "y")
        ax.grid(axis="x", visible=False)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(labels),
               frameon=False, fontsize=7)  # fmt: skip
    paths = save_figure(fig, out_dir, stem)
    plt.close(fig)
    return paths


def write_breakdown(run: RunData, out_dir: Path, *, plots: bool = True) -> list[Path]:
    """Write the breakdown files (and plot) of ``run`` under ``out_dir``; none without data."""
    rows = run_breakdown(run)
    if not rows:
        return []
    out_dir = Path(out_dir)
    md, csv_path, json_path = (out_dir / f"breakdown.{e}" for e in ("md", "csv", "json"))
    atomic_write_text(md, render_breakdown_markdown(rows, run.experiment))
    atomic_write_text(csv_path, _csv(rows))
    atomic_write_json(json_path, _json(rows))
    files = [md, csv_path, json_path]
    if plots:
        files += plot_breakdown(rows, out_dir)
    return files
