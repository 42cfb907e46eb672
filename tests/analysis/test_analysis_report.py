"""Report files: golden Markdown/LaTeX/CSV, the JSON contract, plots, and ``rollcli report``.

Regenerate the golden files after an intended change with
``ROLLCLI_UPDATE_GOLDEN=1 pytest tests/analysis/test_analysis_report.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rollcli.analysis.report import parse_formats, write_report
from rollcli.cli.app import app
from rollcli.errors import RollcliError

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "report"


@pytest.mark.parametrize("ext", ["md", "tex", "csv"])
def test_golden_files(synthetic_run, ext):
    fmt = {"tex": "latex"}.get(ext, ext)
    write_report(synthetic_run, formats=[fmt], plots=False)
    produced = (synthetic_run / "report" / f"report.{ext}").read_text()
    golden = GOLDEN / f"synthetic.{ext}"
    if os.environ.get("ROLLCLI_UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(produced)
    assert produced == golden.read_text()


def test_json_contract(synthetic_run, tmp_path):
    write_report(synthetic_run, formats="json", out=tmp_path / "out", plots=False)
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["target"] == {
        "baseline": "grpo",
        "metric": "accuracy",
        "at": "final",
        "value": pytest.approx(0.71),
        "spec_value": None,
        "smooth": 1,
    }
    assert data["order"] == ["grpo", "pc", "dapo", "vigor"]
    assert set(data["allocators"]) == set(data["order"])
    for name, entry in data["allocators"].items():
        for key in ("baseline", "rollouts_to_target", "speedup", "ci_low", "ci_high", "reached"):
            assert key in entry, (name, key)
        for axis in ("tokens", "wall_clock"):
            assert set(entry[axis]) >= {"to_target", "speedup", "ci_low", "ci_high", "reached"}
        assert set(entry["rollouts_to_target"]) == {"per_seed", "median", "mean_curve"}
        assert entry["final_accuracy"] is not None and entry["peak_accuracy"] is not None
    pc = data["allocators"]["pc"]
    assert pc["speedup"] == pytest.approx(1.25)
    # 3 seeds: each seed's own speedup instead of an interval (docs/report.md, Few seeds)
    assert pc["ci_low"] is None and pc["ci_high"] is None and data["interval"] == "per-seed"
    assert {s: v["value"] for s, v in pc["seed_speedups"].items()} == pytest.approx(
        {"0": 1.25, "1": 1.25, "2": 1.25}
    )
    assert pc["paired"] == {"0": True, "1": True, "2": True}
    write_report(
        synthetic_run, formats="json", out=tmp_path / "i", plots=False, min_interval_seeds=3
    )
    pc = json.loads((tmp_path / "i" / "report.json").read_text())["allocators"]["pc"]
    assert pc["ci_low"] <= 1.25 <= pc["ci_high"]
    assert pc["reached"] == 1.0
    assert pc["rollouts_to_target"]["median"]["value"] == pytest.approx(2048.0)
    assert pc["rollouts_to_target"]["mean_curve"]["value"] == pytest.approx(2048.0)
    assert pc["rollouts_to_target"]["per_seed"]["0"]["value"] == pytest.approx(2099.2)
    dapo = data["allocators"]["dapo"]
    # not reached: a bound, never a number
    assert dapo["speedup"] is None and dapo["ci_low"] is None
    assert dapo["speedup_detail"] == {"kind": "upper", "display": "<= 0.5000", "upper_bound": 0.5}
    seed0 = dapo["rollouts_to_target"]["per_seed"]["0"]
    assert seed0 == {"kind": "lower", "display": ">= 5120", "lower_bound": 5120.0}
    assert dapo["reached"] == 0.0
    assert data["allocators"]["vigor"]["reached"] == pytest.approx(2 / 3)


def test_csv_numeric_columns_are_numbers(synthetic_run):
    """Issue 28: '>= 30720' and '100%' sat in numeric columns. Every column but the names,
    kinds and bound flags parses as a number; a bound says so in its own column."""
    import csv

    write_report(synthetic_run, formats="csv", plots=False)
    with open(synthetic_run / "report" / "report.csv", newline="") as handle:
        rows = {row["allocator"]: row for row in csv.DictReader(handle)}
    text_columns = {"allocator", "kind", "baseline"}
    for row in rows.values():
        for key, value in row.items():
            if key in text_columns or key.endswith(("_speedup_bound", "_reached")) or not value:
                continue
            float(value)  # raises on '>= 5120', '100%'
    dapo = rows["dapo"]
    assert float(dapo["rollouts_to_target"]) == 5120 and dapo["rollouts_reached"] == "False"
    assert float(dapo["rollouts_speedup"]) == 0.5 and dapo["rollouts_speedup_bound"] == "upper"
    assert float(dapo["rollouts_seeds_reached"]) == 0.0
    pc = rows["pc"]
    assert pc["rollouts_reached"] == "True" and pc["rollouts_speedup_bound"] == ""
    assert float(pc["generated_rollouts"]) == 2560 and float(pc["trained_rollouts"]) == 2560


def test_compact_latex_fits_a_column_and_the_wide_one_has_every_column(
    synthetic_run, make_run, tmp_path
):
    """Issue 28: report.tex was a 13-column tabular that fits no paper column. The compact one
    holds allocator, rollout- and token-matched speedups, accuracy and generated rollouts; the
    interval is a column from 5 seeds, the per-seed speedups a small line under 5."""
    result = write_report(synthetic_run, formats="latex", plots=False)
    assert {"report.tex", "report-wide.tex"} <= {p.name for p in result.files}
    compact = (synthetic_run / "report" / "report.tex").read_text()
    assert "\\begin{tabular}{@{}lrrrr@{}}" in compact and "\\toprule" in compact
    body = compact.split("\\midrule")[1].split("\\bottomrule")[0].strip().splitlines()
    rows = [line for line in body if not line.startswith(" & ")]
    assert [r.split(" & ")[0] for r in rows] == ["grpo", "pc", "dapo", "vigor"]
    assert all(r.count(" & ") == 4 for r in rows)
    assert " & \\multicolumn{4}{l}{\\scriptsize per seed: 1.60, 1.60, $\\leq$1.00} \\\\" in body
    wide = (synthetic_run / "report" / "report-wide.tex").read_text()
    assert "table*" in wide and wide.count("\\\\") == 5  # header + 4 allocators
    six = make_run(tmp_path / "six", seeds=(0, 1, 2, 3, 4, 5))
    write_report(six, formats="latex", plots=False)
    compact = (six / "report" / "report.tex").read_text()
    assert "Allocator & Speedup & 95\\% CI & Tokens & Acc. & Rollouts" in compact
    assert "vigor & 1.55$\\times$ & {\\scriptsize [1.00, 1.60]} & 1.55$\\times$" in compact


def _record_figures(monkeypatch) -> dict:
    """Capture every figure the report saves, by stem, to check what it draws (not pixels)."""
    import rollcli.analysis.plots as plots

    figures: dict = {}
    original = plots.save_figure

    def record(fig, out_dir, stem):
        fig.canvas.draw()  # tick labels exist once drawn
        figures[stem] = {
            "titles": [ax.get_title() for ax in fig.axes],
            "xlabels": [ax.get_xlabel() for ax in fig.axes],
            "ylabels": [ax.get_ylabel() for ax in fig.axes],
            "suptitle": fig._suptitle.get_text() if fig._suptitle else "",
            "legend": [t.get_text() for lg in fig.legends for t in lg.get_texts()],
            "xticks": [
                [t.get_text() for t in ax.get_xticklabels()]
                for ax in (fig.canvas.draw(), fig.axes)[1]
            ],
            "lines": {
                ax.get_ylabel(): [ln.get_label() for ln in ax.get_lines()] for ax in fig.axes
            },
        }
        return original(fig, out_dir, stem)

    monkeypatch.setattr(plots, "save_figure", record)
    return figures


def test_figures_for_a_paper(synthetic_run, monkeypatch):
    """Issue 28: PDF and PNG at 200 dpi, no run name in titles, human ticks (2k, not 2000), one
    band method with the band named in one shared legend."""
    from PIL import Image

    figures = _record_figures(monkeypatch)
    result = write_report(synthetic_run, formats="md")
    names = {p.name for p in result.files}
    for stem in ("accuracy", "accuracy_steps", "variance", "tokens"):
        assert {f"{stem}.pdf", f"{stem}.png"} <= names and f"{stem}.svg" not in names
        assert (synthetic_run / "report" / f"{stem}.pdf").read_bytes()[:5] == b"%PDF-"
        with Image.open(synthetic_run / "report" / f"{stem}.png") as image:
            assert round(image.info["dpi"][0]) >= 200
        figure = figures[stem]
        text = " ".join(figure["titles"] + [figure["suptitle"]])
        assert "synthetic" not in text  # the run's name belongs in a caption
        assert (
            len(figure["legend"]) >= 4
            and "dotted: each seed (< 5 seeds: no band)" in (figure["legend"])
        )
    accuracy = figures["accuracy"]
    # both panels labelled; the second limited to the baseline's budget (issue 16)
    assert accuracy["titles"] == ["all generated rollouts", "within grpo's budget (2.56k rollouts)"]
    assert accuracy["xlabels"] == ["cumulative generated rollouts"] * 2
    assert "2k" in accuracy["xticks"][0] and "2000" not in accuracy["xticks"][0]
    variance = figures["variance"]
    assert variance["ylabels"] == ["reward variance of trained groups", "share of all-equal groups"]
    assert not any("e" in t for ticks in variance["xticks"] for t in ticks)  # no 1e4 offsets


def test_groups_of_one_are_not_drawn_as_a_zero_variance_line(make_run, tmp_path, monkeypatch):
    """Issue 28: SPO's one-rollout groups drew a meaningless zero line in variance.png."""
    import json

    run = make_run(tmp_path / "runs" / "spo")
    for path in (run / "jobs").glob("pc*/metrics.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for row in rows[1:]:
            row.update(prompts_trained=64, rollouts_trained=64, reward_var=0.0)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for path in (run / "jobs").glob("grpo*/metrics.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for row in rows[1:]:
            row.update(prompts_trained=8, rollouts_trained=64)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    figures = _record_figures(monkeypatch)
    write_report(run, formats="md")
    drawn = figures["variance"]["lines"]["reward variance of trained groups"]
    assert "grpo" in drawn and "pc" not in drawn
    assert figures["variance"]["titles"][0] == "not drawn: pc (groups of one rollout)"


def test_step_series_band_is_the_tables_bootstrap(make_run, tmp_path):
    from rollcli.analysis.load import load_run
    from rollcli.analysis.plots import step_series

    few = load_run(make_run(tmp_path / "few", seeds=(0, 1, 2)))
    series = step_series(few.jobs_of("grpo"), "reward_var", 0.95)
    assert not series.banded and series.per_seed.shape == (3, 40)
    assert series.mean[0] == pytest.approx(0.2 - 0.001 + 0.01)  # seeds 0, 1, 2: mean offset 0.01
    many = load_run(make_run(tmp_path / "many", seeds=(0, 1, 2, 3, 4, 5)))
    series = step_series(many.jobs_of("grpo"), "reward_var", 0.95)
    assert series.banded
    assert np.all(series.low <= series.mean + 1e-12) and np.all(series.mean <= series.high + 1e-12)
    assert np.all(series.high - series.low > 0)
    assert series.low.min() >= series.per_seed.min() - 1e-12


def test_curve_bands_follow_the_interval_rule(tmp_path, make_run):
    """The band is the table's bootstrap (seed draws, mean curves, expanded percentiles); under
    5 seeds there is none (each seed's curve is drawn instead), as the table gives per-seed
    speedups instead of an interval."""
    from rollcli.analysis.analyze import seed_curves
    from rollcli.analysis.load import load_run
    from rollcli.analysis.plots import curve_band

    few = seed_curves(load_run(make_run(tmp_path / "few", seeds=(0, 1, 2))), "grpo")["rollouts"]
    assert curve_band(few, 0.95) is None
    run = load_run(make_run(tmp_path / "five", seeds=(0, 1, 2, 3, 4)))
    curves = seed_curves(run, "grpo")["rollouts"]
    grid, low, high = curve_band(curves, 0.95)
    mean_x, mean_y = (a[0] for a in curves.mean_curves(curves.all_seeds()))
    inside = np.interp(grid, mean_x, mean_y)
    assert np.all(low <= inside + 1e-12) and np.all(inside <= high + 1e-12)
    assert np.all(high - low > 0)  # seeds differ by 0.01 each: a real spread
    # never wider than the seeds themselves (a mean of draws stays within them)
    assert low.min() >= curves.y.min() - 1e-12 and high.max() <= curves.y.max() + 1e-12
    steps_grid, _, _ = curve_band(curves, 0.95, by_step=True)
    assert steps_grid[0] == 0 and steps_grid[-1] == curves.steps[-1]


def test_parse_formats():
    assert parse_formats("md, tex") == ["md", "latex"]
    assert parse_formats(None) == ["md", "latex", "csv", "json"]
    with pytest.raises(RollcliError, match="unknown report format html"):
        parse_formats("md,html")


def test_cli_report(synthetic_run, tmp_path):
    runner = CliRunner()
    out = tmp_path / "files"
    result = runner.invoke(
        app,
        ["report", str(synthetic_run), "--format", "md,json", "--out", str(out), "--no-plots"],
        env={"COLUMNS": "220"},
    )
    assert result.exit_code == 0, result.output
    assert "1.25x (1.25, 1.25, 1.25)" in result.output and ">= 5.12k" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "report.md"]
    bad = runner.invoke(app, ["report", str(tmp_path / "nope")])
    assert bad.exit_code != 0
    assert isinstance(bad.exception, RollcliError)
    help_text = runner.invoke(app, ["report", "--help"], env={"COLUMNS": "120"}).output
    assert "--format" in help_text and "--wandb" in help_text
