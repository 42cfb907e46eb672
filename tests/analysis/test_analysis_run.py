"""Loading and analysing a synthetic run folder whose every crossing is known in closed form."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from rich.console import Console

from rollcli.analysis import analyze_run, load_run, print_summary
from rollcli.analysis.curves import Bounded
from rollcli.errors import StoreError
from rollcli.store.atomic import atomic_write_json, read_json


def test_load_run_reads_plan_and_metrics(synthetic_run):
    run = load_run(synthetic_run)
    assert run.experiment == "synthetic"
    assert run.allocators[0] == "grpo"  # the baseline first
    assert set(run.allocators) == {"grpo", "pc", "dapo", "vigor"}
    assert run.kinds["pc"] == "pilot_commit"
    assert len(run.jobs) == 12  # the report job is not a train job
    job = run.jobs_of("pc")[0]
    x, y = job.eval_curve("accuracy")
    assert list(x) == [0, 320, 640, 960, 1280, 1600, 1920, 2240, 2560]
    assert y[0] == pytest.approx(0.30)


def test_final_target_crossings_and_speedups(synthetic_run):
    a = analyze_run(synthetic_run, min_interval_seeds=3)  # intervals from 3 seeds on
    assert a.target_value == pytest.approx(0.71)  # mean of grpo's finals 0.70, 0.71, 0.72
    grpo = a.get("grpo").axes["rollouts"]
    assert grpo.per_seed[0] == Bounded(2560.0, "lower")  # its final 0.70 misses the mean
    assert grpo.per_seed[1].value == pytest.approx(2560.0)
    assert grpo.per_seed[2].value == pytest.approx(7.8 * 320)
    assert grpo.median.exact and grpo.median.value == pytest.approx(2560.0)

    # the seed-mean curve 0.31 + 0.05 k ends exactly on the target
    assert grpo.mean_curve == Bounded(pytest.approx(2560.0))

    pc = a.get("pc").axes["rollouts"]
    assert pc.mean_curve.value == pytest.approx(6.4 * 320)  # mean curve 0.31 + 0.0625 k
    assert [pc.per_seed[s].value for s in (0, 1, 2)] == pytest.approx(
        [6.56 * 320, 6.4 * 320, 6.24 * 320]
    )
    assert pc.speedup.exact and pc.speedup.value == pytest.approx(1.25)
    assert pc.ci[0] <= 1.25 <= pc.ci[1]
    assert pc.reached == 1.0
    # pc generates 6 tokens per rollout against grpo's 5
    assert a.get("pc").axes["tokens"].speedup.value == pytest.approx(1.25 * 5 / 6)
    assert a.get("pc").step_time_ratio == pytest.approx(1.2)

    dapo = a.get("dapo").axes["rollouts"]
    assert all(b == Bounded(5120.0, "lower") for b in dapo.per_seed.values())
    assert dapo.median == Bounded(5120.0, "lower")
    assert dapo.mean_curve == Bounded(5120.0, "lower")
    assert dapo.speedup == Bounded(0.5, "upper")  # <= 2560 / 5120
    assert dapo.ci is None and dapo.reached == 0.0

    vigor = a.get("vigor")
    assert vigor.axes["rollouts"].per_seed[2].kind == "lower"  # non-monotone, peaks below
    assert vigor.axes["rollouts"].median.value == pytest.approx(5.2 * 320)
    # mean of seeds at k=5: (0.70 + 0.71 + 0.70) / 3, at k=6: (0.75 + 0.75 + 0.70) / 3
    k = 5 + (0.71 - 2.11 / 3) / (2.20 / 3 - 2.11 / 3)
    assert vigor.axes["rollouts"].mean_curve.value == pytest.approx(k * 320)
    assert vigor.axes["rollouts"].speedup.value == pytest.approx(2560 / (k * 320))
    assert vigor.axes["rollouts"].reached == pytest.approx(2 / 3)
    assert vigor.peak_accuracy == pytest.approx((0.75 + 0.75 + 0.70) / 3)
    assert a.get("grpo").axes["rollouts"].speedup == Bounded(1.0)


def test_few_seeds_give_per_seed_speedups_not_an_interval(synthetic_run, tmp_path, make_run):
    """Issue 16: with 2 seeds the interval read `0.58x [0.48, 0.58]` (the point estimate at an
    end: 2 seeds give 3 distinct bootstrap draws). Below 5 seeds: each seed's own speedup."""
    a = analyze_run(synthetic_run)  # 3 seeds
    pc = a.get("pc").axes["rollouts"]
    assert pc.ci is None and pc.few_seeds and a.few_seeds
    # each pc seed against grpo's same seed, the target that seed's own final value
    assert {s: b.value for s, b in pc.seed_speedups.items()} == pytest.approx(
        {0: 1.25, 1: 1.25, 2: 1.25}
    )
    assert pc.paired == {0: True, 1: True, 2: True}
    vigor = a.get("vigor").axes["rollouts"]
    assert vigor.seed_speedups[2] == Bounded(1.0, "upper")  # seed 2 never reaches 0.72
    from rollcli.analysis.summary import footnotes, summary_rows

    rows = {r["allocator"]: r for r in summary_rows(a)}
    assert rows["pc"]["speedup"] == "1.25x (1.25, 1.25, 1.25)"
    assert rows["vigor"]["speedup"].endswith("(1.60, 1.60, <= 1.00)")
    assert rows["dapo"]["speedup"] == "<= 0.50x"  # a bound: no seed values, no interval
    notes = footnotes(a)
    assert any("the speedup each seed alone gives" in n for n in notes)
    # the baseline misses its own mean target on one seed: the footnote says why
    assert any(n.startswith("grpo reached 2/3: its target is the mean") for n in notes)
    two = analyze_run(make_run(tmp_path / "two", seeds=(0, 1)))
    assert two.get("pc").axes["rollouts"].ci is None
    assert "[" not in {r["allocator"]: r for r in summary_rows(two)}["pc"]["speedup"]
    five = analyze_run(make_run(tmp_path / "five", seeds=(0, 1, 2, 3, 4)))
    assert five.get("pc").axes["rollouts"].ci is not None and not five.few_seeds


def test_peak_value_and_smoothed_targets(tmp_path, make_run):
    run = make_run(
        tmp_path / "peak", target={"baseline": "vigor", "at": "peak", "metric": "eval/accuracy"}
    )
    a = analyze_run(run)
    # the peak of vigor's seed-mean curve (k = 6..8)
    assert a.target_value == pytest.approx((0.75 + 0.75 + 0.70) / 3)
    assert a.allocators[0].name == "vigor"
    assert a.get("vigor").axes["rollouts"].mean_curve.value == pytest.approx(6 * 320)

    run = make_run(tmp_path / "value", target={"baseline": "grpo", "at": "value", "value": 0.5})
    a = analyze_run(run)
    assert a.target_value == 0.5
    assert a.get("grpo").axes["rollouts"].per_seed[0].value == pytest.approx(1280.0)

    run = make_run(tmp_path / "smooth", target={"baseline": "grpo", "smooth": 3})
    a = analyze_run(run)
    # trailing mean of the last three evaluations: 0.65, 0.66, 0.67
    assert a.target_value == pytest.approx(0.66)


def test_rise_target_is_a_fraction_of_the_baselines_rise(tmp_path, make_run):
    """grpo rises from 0.31 to 0.71 (seed means): half-way is 0.51, crossed at evaluation 4
    (1,280 rollouts); pc (0.31 + 0.0625 k) crosses it at k = 3.2 (1,024): 1.25x, every seed alike
    (each seed's own target is half of its own rise)."""
    run = make_run(tmp_path / "rise", target={"baseline": "grpo", "at": "rise", "value": 0.5})
    a = analyze_run(run)
    assert a.target_value == pytest.approx(0.51)
    grpo, pc = a.get("grpo").axes["rollouts"], a.get("pc").axes["rollouts"]
    assert grpo.mean_curve.value == pytest.approx(1280.0)
    assert pc.mean_curve.value == pytest.approx(1024.0)
    assert pc.speedup.value == pytest.approx(1.25)
    assert all(s.value == pytest.approx(1.25) for s in pc.seed_speedups.values())
    assert "50% of grpo's rise" in load_run(run).target.describe()
    bad = make_run(tmp_path / "bad", target={"baseline": "grpo", "at": "rise", "value": 1.5})
    with pytest.raises(StoreError, match="rise.*not in \\(0, 1\\]"):
        load_run(bad)


def test_default_baseline_is_the_first_uniform_allocator(tmp_path, make_run):
    run = make_run(tmp_path / "r", target={"at": "final"})
    assert load_run(run).target.baseline == "grpo"


def test_partial_and_missing_jobs_are_warned(tmp_path, make_run):
    run = make_run(tmp_path / "r", statuses={("pc", 1): "running"})
    (run / "jobs" / "vigor00abc" / "metrics.jsonl").unlink()
    a = analyze_run(run)
    assert any("pc/seed 1: running" in w for w in a.warnings)
    assert any("vigor/seed 0" in w and "no eval/accuracy" in w for w in a.warnings)
    assert 0 not in a.get("vigor").axes["rollouts"].per_seed


def test_torn_and_repeated_rows(tmp_path, make_run):
    run = make_run(tmp_path / "r")
    path = run / "jobs" / "grpo00abcd" / "metrics.jsonl"
    rows = path.read_text().splitlines()
    resumed = json.loads(rows[40])
    resumed["eval/accuracy"] = 0.99  # a resumed job rewrote step 40: the last row wins
    path.write_text("\n".join(rows) + "\n" + json.dumps(resumed) + "\n" + '{"step": 41, "cum_')
    job = load_run(run).jobs_of("grpo")[0]
    assert job.num_steps == 40
    assert job.eval_curve("accuracy")[1][-1] == 0.99


def test_bad_run_folders(tmp_path, make_run):
    with pytest.raises(StoreError, match="not a run folder"):
        load_run(tmp_path)
    run = make_run(tmp_path / "r")
    manifest = read_json(run / "manifest.json")
    manifest["spec"]["target"]["baseline"] = "grpoo"
    atomic_write_json(run / "manifest.json", manifest)
    with pytest.raises(StoreError, match="grpoo.*allocators: grpo"):
        load_run(run)


def test_print_summary(synthetic_run):
    console = Console(record=True, width=250)
    analysis = print_summary(synthetic_run, console=console)
    text = console.export_text()
    assert analysis.get("pc").axes["rollouts"].speedup.value == pytest.approx(1.25)
    for needle in (
        "rollouts to target",
        "1.25x (1.25, 1.25, 1.25)",
        ">= 5.12k",
        "<= 0.50x",
        "0.7100",
        "baseline",
    ):
        assert needle in text
    assert "Zero-var frac" in text
    narrow = Console(record=True, width=80)
    print_summary(synthetic_run, console=narrow)
    text = narrow.export_text()
    assert (
        "1.25x (1.25, 1.25, 1.25)" in text
        and "Zero-var frac" not in text
        and "rollcli report" in text
    )
    assert max(len(line) for line in text.splitlines()) <= 80


def test_import_is_cheap():
    code = (
        "import sys, rollcli.analysis as a; assert 'numpy' not in sys.modules; "
        "a.print_summary; a.load_run; "
        "bad = [m for m in ('matplotlib', 'wandb', 'torch') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("width", [80, 160])
def test_terminal_table_matches_golden(synthetic_run, width, monkeypatch):
    """What a person reads at the end of `rollcli run` / in `rollcli report`, at 80 and 160
    columns (checked in tmux too: docs/LOG.md): the widest table that fits, never a squeezed one
    (at 160 the 13-column table had wrapped headers and cut cells), and the footnotes wrapped at
    words. Regenerate with ROLLCLI_UPDATE_GOLDEN=1 after a deliberate change."""
    import os
    from pathlib import Path

    monkeypatch.chdir(synthetic_run.parent)
    console = Console(record=True, width=width)
    print_summary(synthetic_run.name, console=console)
    text = "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"
    assert max(map(len, text.splitlines())) <= width
    assert "…" not in text  # no cut header or cell
    golden = Path(__file__).resolve().parents[1] / "golden" / "report" / f"terminal-{width}.txt"
    if os.environ.get("ROLLCLI_UPDATE_GOLDEN") == "1":
        golden.write_text(text)
    assert text == golden.read_text()


def test_terminal_footnotes_keep_their_brackets(make_run, tmp_path):
    """Issue 28: rich read '[low, high]' as markup and printed ': 95% bootstrap interval...'."""
    import io

    from rich.console import Console

    from rollcli.analysis.summary import print_analysis

    run = make_run(tmp_path / "runs" / "six", seeds=(0, 1, 2, 3, 4, 5))
    buffer = io.StringIO()
    print_analysis(analyze_run(run, num_resamples=200), Console(file=buffer, width=200))
    text = buffer.getvalue()
    assert "[low, high]: 95% bootstrap interval over seeds" in text
    assert "Speedup [95% CI]" in text
