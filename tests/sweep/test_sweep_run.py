"""Sweeps end to end on the sim backend: file errors, planning with shared jobs, run, resume, report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollcli.errors import SpecError
from rollcli.sweep.file import load_sweep_file
from rollcli.sweep.plan import plan_sweep
from rollcli.testing.slurm import NO_CLUSTER_REASON, cluster_answers

BASE = """\
name: base
backend: {kind: sim, num_train_prompts: 256}
budget: {steps: 6, rollouts_per_step: 64}
allocators:
  grpo: {kind: uniform, n: 8}
  pc: {kind: pilot_commit, n_pilot: 4, n_commit: 12}
seeds: [0]
eval: {every: 2}
target: {baseline: grpo}
launch: {executor: local}
tracking: {wandb: {mode: disabled}}
"""

SWEEP = """\
name: pc-mini
base: base.yaml
grid:
  allocators.pc.p_lower: "0.0,0.125"
  allocators.pc.p_upper: "0.5,0.75"
seeds: "range(0,2)"
"""


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Path:
    (tmp_path / "base.yaml").write_text(BASE)
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    return tmp_path


def test_plan_shares_the_baseline_between_points(sweep_dir: Path):
    plan = plan_sweep(load_sweep_file(sweep_dir / "sweep.yaml"))
    assert len(plan.points) == 4
    # 4 points x (grpo + pc) x 2 seeds = 16 point-jobs; grpo is the same in every point
    assert plan.num_point_jobs == 16
    assert len(plan.plan) == 2 + 4 * 2
    assert {p.jobs["grpo"] for p in plan.points} == {plan.points[0].jobs["grpo"]}
    assert len({p.jobs["pc"] for p in plan.points}) == 4
    assert plan.focus() == ["pc"]


SUITE = """\
name: mini-suite
base: base.yaml
overrides: ["~allocators.pc.p_lower"]
scenarios:
  easy: [backend.difficulty_mean=0.0]
  hard: [backend.difficulty_mean=2.0, backend.score_noise=20]
  wide: [backend.num_train_prompts=1024]
holdout: [wide]
seeds: "range(0,2)"
"""


def test_a_suite_runs_every_point_in_every_scenario(sweep_dir: Path):
    (sweep_dir / "suite.yaml").write_text(
        SUITE.replace('overrides: ["~allocators.pc.p_lower"]\n', "")
    )
    plan = plan_sweep(load_sweep_file(sweep_dir / "suite.yaml"))
    assert [p.scenario.name for p in plan.points] == ["easy", "hard", "wide"]
    assert [p.labels for p in plan.points] == [{"scenario": s} for s in ("easy", "hard", "wide")]
    hard = plan.points[1]
    assert hard.overrides == ("backend.difficulty_mean=2.0", "backend.score_noise=20")
    assert (hard.spec.backend.difficulty_mean, hard.spec.backend.score_noise) == (2.0, 20.0)
    # every scenario changes the backend: nothing is shared, 3 x 2 allocators x 2 seeds
    assert len(plan.plan) == 12 and plan.focus() == ["pc"]
    manifest = plan.to_manifest()
    assert manifest["axes"] == ["scenario"]
    assert (manifest["scenarios"], manifest["holdout"]) == (["easy", "hard", "wide"], ["wide"])
    assert [(p["scenario"], p["holdout"]) for p in manifest["points"]] == [
        ("easy", False),
        ("hard", False),
        ("wide", True),
    ]
    # crossed with an axis: scenarios x points
    (sweep_dir / "grid.yaml").write_text(
        SUITE.replace(
            'overrides: ["~allocators.pc.p_lower"]', "grid: {allocators.pc.p_upper: '0.5,0.75'}"
        )
    )
    crossed = plan_sweep(load_sweep_file(sweep_dir / "grid.yaml"))
    assert len(crossed.points) == 6
    assert crossed.points[3].labels == {"scenario": "hard", "allocators.pc.p_upper": 0.75}


def test_a_scenario_that_fails_validation_is_named(sweep_dir: Path):
    (sweep_dir / "suite.yaml").write_text(
        SUITE.replace('overrides: ["~allocators.pc.p_lower"]\n', "").replace(
            "score_noise=20", "score_noise=-1"
        )
    )
    with pytest.raises(SpecError, match=r"point 1 \(scenario hard\) .*score_noise=-1"):
        plan_sweep(load_sweep_file(sweep_dir / "suite.yaml"))


def test_point_that_fails_validation_is_named(sweep_dir: Path):
    (sweep_dir / "bad.yaml").write_text(SWEEP.replace('"0.5,0.75"', '"0.5,0.05"'))
    with pytest.raises(SpecError, match=r"point 3 .*p_upper=0.05"):
        plan_sweep(load_sweep_file(sweep_dir / "bad.yaml"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "base: base.yaml\ngird: {a: 1}\n",
            r"sweep.yaml:2:1: gird: unknown key. Did you mean 'grid'",
        ),
        ("grid: {a: 1}\n", "base: missing"),
        ("base: nowhere.yaml\n", "base: no spec at"),
        ("base: base.yaml\nsample: {count: 0, params: {a: 'interval(0,1)'}}\n", "sample.count"),
        ("base: base.yaml\ngrid: {a: 'interval(0,1)'}\n", "grid.a: .*continuous"),
        ("base: base.yaml\nseeds: [-1]\n", "seeds: expected non-negative"),
        ("base: base.yaml\nzip: {a: '1,2', b: '1'}\n", "equal lengths"),
        ("base: base.yaml\nholdout: [a]\n", "holdout: needs scenarios"),
        ("base: base.yaml\nscenarios: [a, b]\n", "scenarios: expected a mapping"),
        ("base: base.yaml\nscenarios: {a b: []}\n", r"sweep.yaml:2:13: scenarios.a b: a scenario"),
        ("base: base.yaml\nscenarios: {a: 3}\n", "scenarios.a: expected a list"),
        (
            "base: base.yaml\nscenarios: {easy: [], hard: []}\nholdout: [hadr]\n",
            "holdout: 'hadr' is not a scenario. Did you mean 'hard'",
        ),
        ("base: base.yaml\nscenarios: {a: []}\nholdout: [a]\n", "holds out every scenario"),
    ],
)
def test_bad_sweep_files(sweep_dir: Path, text: str, message: str):
    (sweep_dir / "sweep.yaml").write_text(text)
    with pytest.raises(SpecError, match=message):
        load_sweep_file(sweep_dir / "sweep.yaml")


def test_cli_dry_run_runs_nothing(sweep_dir: Path, cli):
    result = cli(["sweep", sweep_dir / "sweep.yaml", "--dry-run", "--runs-dir", sweep_dir / "runs"])
    assert result.exit_code == 0, result.output
    assert "4 points -> 10 jobs to run" in result.output
    assert not (sweep_dir / "runs").exists()


def test_cli_bad_sweep_exits_2_and_creates_nothing(sweep_dir: Path, cli):
    (sweep_dir / "sweep.yaml").write_text("base: base.yaml\ngrid: {allocators.pc.p_lowr: '0.1'}\n")
    result = cli(["sweep", sweep_dir / "sweep.yaml", "--runs-dir", sweep_dir / "runs"])
    assert result.exit_code == 2
    assert "p_lowr" in result.stderr and "point 0" in result.stderr
    assert not (sweep_dir / "runs").exists()


@pytest.mark.slow
def test_sweep_runs_resumes_and_reports(sweep_dir: Path, cli):
    runs = sweep_dir / "runs"
    args = ["sweep", str(sweep_dir / "sweep.yaml"), "--runs-dir", str(runs), "-j", "2"]
    result = cli(args)
    assert result.exit_code == 0, result.output
    run_dir = runs / "pc-mini"
    states = [json.loads(p.read_text())["status"] for p in run_dir.glob("jobs/*/state.json")]
    assert states == ["done"] * 10
    ablation = json.loads((run_dir / "report" / "ablation.json").read_text())
    assert len(ablation["points"]) == 4
    assert {p["allocator"] for p in ablation["points"]} == {"pc"}
    for point in ablation["points"]:
        assert point["speedup"]["kind"] in ("exact", "lower", "upper")
        assert 0.0 <= point["final_accuracy"] <= 1.0
    assert (run_dir / "report" / "ablation_heatmap_pc.png").stat().st_size > 1000
    assert (run_dir / "report" / "ablation_allocators_pc_p_lower.pdf").exists()
    # a second run finds every job done and only re-reports
    mtimes = {p: p.stat().st_mtime_ns for p in run_dir.glob("jobs/*/metrics.jsonl")}
    again = cli(args)
    assert again.exit_code == 0, again.output
    assert "10 already done" in again.output
    # --dry-run counts only what is left (it said "10 jobs to run" after a finished sweep)
    dry = cli([*args, "--dry-run"])
    assert dry.exit_code == 0 and "4 points -> 0 jobs to run (10 already done" in dry.output
    assert {p: p.stat().st_mtime_ns for p in run_dir.glob("jobs/*/metrics.jsonl")} == mtimes


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.skipif(not cluster_answers(), reason=NO_CLUSTER_REASON)
def test_sweep_runs_on_the_local_slurm_cluster(sweep_dir: Path, cli):
    """The same sweep as Slurm arrays on the real local cluster, ending in the ablation report."""
    runs = sweep_dir / "slurm runs"
    result = cli(
        [
            "sweep",
            sweep_dir / "sweep.yaml",
            "launch.executor=slurm",
            "launch.time=00:30:00",
            "launch.array_parallelism=4",
            "--runs-dir",
            runs,
        ]
    )
    assert result.exit_code == 0, result.output
    run_dir = runs / "pc-mini"
    states = [json.loads(p.read_text()) for p in run_dir.glob("jobs/*/state.json")]
    assert [s["status"] for s in states] == ["done"] * 10
    assert all("_" in s["slurm"]["job_id"] for s in states)  # submitted as array tasks
    ablation = json.loads((run_dir / "report" / "ablation.json").read_text())
    assert len(ablation["points"]) == 4
