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
    assert parse_target("rise:0.5") == {"at": "rise", "value": 0.5}
    assert parse_target("Rise=1") == {"at": "rise", "value": 1.0}
    for bad in ("rise", "rise:0", "rise:1.5", "rise:half"):
        with pytest.raises(StoreError, match=r"rise takes the fraction .* in \(0, 1\]"):
            parse_target(bad)
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


def _set_spec(run: Path, section: str, **values) -> None:
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["spec"].setdefault(section, {}).update(values)
    (run / "manifest.json").write_text(json.dumps(manifest))


def test_runs_of_another_setting_are_refused_naming_the_keys(two_runs, tmp_path):
    """Issue 28: 'GRPO 1.20x over GRPO' across a 4,096- and a 512-prompt pool printed nothing."""
    a, b = two_runs
    _set_spec(b, "backend", num_train_prompts=512)
    _set_spec(a, "backend", num_train_prompts=4096)
    _set_spec(b, "budget", rollouts_per_step=128)
    with pytest.raises(StoreError) as error:
        load_runs([a, b])
    message = str(error.value)
    assert "backend.num_train_prompts: 4096 -> 512" in message
    assert "budget.rollouts_per_step: 64 -> 128" in message and "--allow-mismatch" in message
    forced = analyze_run(load_runs([a, b], allow_mismatch=True))
    assert any("backend.num_train_prompts" in w for w in forced.warnings)
    # seeds, allocators, launch and tracking may differ: that is what a comparison varies
    _set_spec(b, "backend", num_train_prompts=4096)
    _set_spec(b, "budget", rollouts_per_step=64)
    _set_spec(b, "tracking", wandb={"mode": "offline"})
    assert not analyze_run(load_runs([a, b])).warnings


def test_cli_refuses_a_mismatch_unless_allowed(cli, two_runs):
    a, b = two_runs
    _set_spec(b, "eval", every=10)
    refused = cli(["report", a, b, "--no-plots"])
    assert refused.exit_code == 1 and "eval.every: 5 -> 10" in refused.stderr
    assert not (a / "report" / "vs-b").exists()
    forced = cli(["report", a, b, "--json", "--no-plots", "--allow-mismatch"])
    assert forced.exit_code == 0, forced.output
    assert any("eval.every: 5 -> 10" in w for w in json.loads(forced.stdout)["warnings"])


def test_another_target_writes_its_own_folder(cli, synthetic_run):
    """Issue 28: `report RUN --target X` overwrote the run's own report (with --no-plots, a
    table for one target beside plots for another)."""
    run = synthetic_run
    for extra in ([], ["--target", "0.6"], ["--baseline", "pc"]):
        result = cli(["report", run, "--no-plots", "--format", "json", *extra])
        assert result.exit_code == 0, result.output
        if not extra:
            own = json.loads((run / "report" / "report.json").read_text())
    assert json.loads((run / "report" / "report.json").read_text()) == own
    other = json.loads((run / "report" / "target-0.6" / "report.json").read_text())
    assert other["target"]["value"] == pytest.approx(0.6)
    assert (run / "report" / "baseline-pc" / "report.json").is_file()
