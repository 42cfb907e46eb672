"""A sweep's ablation table and CSV (issue 28): numeric columns hold numbers, ci_low/ci_high as
docs/sweeps.md promises, each seed's speedup under 5 seeds, and a table that stays readable at
80 columns."""

from __future__ import annotations

import csv
import io

from rich.console import Console

from rollcli.analysis.ablation import Ablation, PointResult, _csv, ablation_table
from rollcli.analysis.curves import Bounded


def _ablation() -> Ablation:
    def point(index, p_upper, speedup, ci=None, seeds=None):
        return PointResult(
            index=index,
            values={"allocators.pc.p_upper": p_upper, "allocators.pc.n_pilot": 4},
            allocator="pc",
            speedup=speedup,
            ci=ci,
            token_speedup=Bounded(1.1),
            final_accuracy=0.8,
            baseline_final_accuracy=0.75,
            reached=1.0 if speedup.exact else 0.0,
            num_seeds=3 if seeds else 5,
            seed_speedups=seeds or {},
            wall_speedup=Bounded(0.9),
        )

    return Ablation(
        "pc-thresholds",
        ["allocators.pc.p_upper", "allocators.pc.n_pilot"],
        ["allocators.pc.p_upper", "allocators.pc.n_pilot"],
        ["pc"],
        [
            point(0, 0.7, Bounded(1.3), ci=(1.1, 1.5)),
            point(1, 0.8, Bounded(1.2), seeds={0: Bounded(1.25), 1: Bounded(1.1), 2: Bounded(1.3)}),
            point(2, 0.9, Bounded(0.6, "upper")),
        ],
    )


def test_sweep_csv_is_numeric_with_an_interval_or_seed_values():
    rows = list(csv.DictReader(io.StringIO(_csv(_ablation()))))
    assert [r["ci_low"] for r in rows] == ["1.1", "", ""]
    assert rows[0]["ci_high"] == "1.5" and rows[1]["seed_speedups"] == "1.25;1.1;1.3"
    assert rows[2]["speedup"] == "0.6" and rows[2]["speedup_bound"] == "upper"
    assert [r["reached"] for r in rows] == ["1", "1", "0"]  # fractions, not '100%'
    assert rows[0]["wall_speedup"] == "0.9" and rows[0]["allocators.pc.p_upper"] == "0.7"


def test_sweep_table_stays_readable_at_80_columns():
    console = Console(record=True, width=80)
    console.print(ablation_table(_ablation(), max_width=80))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "(1.25, 1.10, 1.30)" in text and "[1.10, 1.50]" in text  # never folded
    wide = Console(record=True, width=200)
    wide.print(ablation_table(_ablation(), max_width=200))
    assert "wall speedup" in wide.export_text()


def test_sweep_figure_has_a_series_per_other_axis_with_error_bars():
    """Issue 28: the per-axis plot merged the other axis into one unlabelled series and had no
    error bars under 5 seeds."""
    from rollcli.analysis.ablation_plots import axis_series

    ablation = _ablation()
    ablation.results[2].values["allocators.pc.n_pilot"] = 8
    series = axis_series(ablation, "allocators.pc.p_upper")
    assert sorted(series) == [("pc", "n_pilot=4"), ("pc", "n_pilot=8")]
    four = series[("pc", "n_pilot=4")]
    assert [(p["x"], p["speedup"], p["low"], p["high"]) for p in four] == [
        (0.7, 1.3, 1.1, 1.5),  # the interval
        (0.8, 1.2, 1.1, 1.3),  # under 5 seeds: the range of the seeds' own speedups
    ]
    assert series[("pc", "n_pilot=8")] == [
        {"x": 0.9, "speedup": 0.6, "exact": False, "low": None, "high": None}
    ]
