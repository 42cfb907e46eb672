"""``rollcli report RUN [RUN ...]``: several run folders in one table, ``--target``,
``--baseline``, ``--json`` and ``--out -`` (issue 16: report as a research tool)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollcli.analysis.analyze import analyze_run
from rollcli.analysis.compare import load_runs, parse_target
from rollcli.errors import StoreError
from tests.analysis.conftest import ALLOCATORS, write_synthetic_run

FASTER_PC = ("pilot_commit", 64, 6, 0.12, lambda k, s: min(0.80, 0.30 + 0.08 * k + 0.01 * s))


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """runs/a: grpo + pc; runs/b: the same grpo jobs (a variant shares them) + another pc."""
    a = write_synthetic_run(
        tmp_path / "runs" / "a", allocators={k: ALLOCATORS[k] for k in ("grpo", "pc")}
    )
    b = write_synthetic_run(tmp_path / "runs" / "b", allocators={"pc": FASTER_PC}, tag="b")
    grpo = a / "jobs"
    for job in ("grpo00abcd", "grpo01abcd", "grpo02abcd"):  # b holds a's grpo jobs, as a variant
        (b / "jobs" / job).mkdir(parents=True)
        for name in ("metrics.jsonl", "state.json"):
            (b / "jobs" / job / name).write_bytes((grpo / job / name).read_bytes())
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["plan"]["jobs"][:0] = [
        {"id": f"grpo0{s}abcd", "type": "train", "allocator": "grpo", "seed": s, "depends_on": []}
        for s in (0, 1, 2)
    ]
    manifest["spec"]["allocators"]["grpo"] = {"kind": "uniform"}
    (b / "manifest.json").write_text(json.dumps(manifest))
    return a, b


def test_two_runs_share_the_baseline_and_name_colliding_allocators(two_runs):
    a, b = two_runs
    data = load_runs([a, b])
    assert data.allocators == ["grpo", "a/pc", "b/pc"]  # grpo's jobs are the same jobs: once
    assert data.target.baseline == "grpo" and data.experiment == "a vs b"
    analysis = analyze_run(data)
    faster = analysis.get("b/pc").axes["rollouts"]
    slower = analysis.get("a/pc").axes["rollouts"]
    assert faster.speedup.value > slower.speedup.value > 1
    assert all(faster.paired.values()) and set(faster.seed_speedups) == {0, 1, 2}


def test_unpaired_seeds_are_said_so(tmp_path, two_runs):
    a, _ = two_runs
    c = write_synthetic_run(
        tmp_path / "runs" / "c", allocators={"vigor": ALLOCATORS["vigor"]}, seeds=(5, 6)
    )
    analysis = analyze_run(load_runs([a, c]))
    vigor = analysis.get("vigor").axes["rollouts"]
    assert vigor.paired == {5: False, 6: False}
    from rollcli.analysis.summary import footnotes, summary_rows

    row = next(r for r in summary_rows(analysis) if r["allocator"] == "vigor")
    assert row["seeds"] == "2 (2 unpaired)"
    assert any(line.startswith("unpaired:") for line in footnotes(analysis))


def test_target_and_baseline_overrides(two_runs):
    a, b = two_runs
    assert parse_target("0.6") == {"at": "value", "value": 0.6}
    assert parse_target("peak", "a/pc") == {"at": "peak", "baseline": "a/pc"}
    with pytest.raises(StoreError, match="give final, peak"):
        parse_target("high")
    data = load_runs([a, b], target=parse_target("0.6", "a/pc"))
    assert data.target.baseline == "a/pc" and data.allocators[0] == "a/pc"
    assert analyze_run(data).target_value == pytest.approx(0.6)
    one = load_runs([a], target={"at": "value", "value": 0.5})
    assert analyze_run(one).target_value == pytest.approx(0.5)
    with pytest.raises(StoreError, match="names no allocator"):
        load_runs([a, b], target={"baseline": "nope"})


def test_cli_compare_json_and_stdout(cli, two_runs, tmp_path, monkeypatch):
    a, b = two_runs
    monkeypatch.chdir(tmp_path)
    table = cli(["report", a, b, "--no-plots"])
    assert table.exit_code == 0, table.output
    assert "b/pc" in table.stdout and "a/pc" in table.stdout
    assert (a / "report" / "vs-b" / "report.md").is_file()  # a's own report is left alone
    assert not (a / "report" / "report.md").exists()
    as_json = cli(["report", a, b, "--json", "--no-plots", "--target", "0.6"])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.stdout)  # nothing but the JSON on stdout
    assert data["target"]["value"] == pytest.approx(0.6)
    assert data["order"] == ["grpo", "a/pc", "b/pc"]
    md = cli(["report", a, "--out", "-", "--format", "md"])
    assert md.exit_code == 0, md.output
    assert md.stdout.startswith("# rollcli report: synthetic") and "| grpo |" in md.stdout
    refused = cli(["report", a, "--out", "-"])
    assert refused.exit_code == 1 and "--format md" in refused.stderr
    assert not (tmp_path / "-").exists()
