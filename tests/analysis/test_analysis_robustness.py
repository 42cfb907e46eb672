"""The robustness table of a suite: outcomes, the geometric mean and its interval by hand, and
`rollcli report` of a synthetic suite run folder whose per-scenario speedups are known exactly."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rollcli.analysis.ablation import analyze_sweep
from rollcli.analysis.curves import Bounded
from rollcli.analysis.robustness import geometric_mean, outcome, robustness
from rollcli.store.atomic import atomic_write_json, read_json

from .conftest import write_synthetic_run


def test_outcome_of_a_speedup_against_the_baseline():
    assert outcome(Bounded(1.4), (1.1, 1.8)) == "win"
    assert outcome(Bounded(0.8), (0.7, 0.95)) == "loss"
    assert outcome(Bounded(1.2), (0.9, 1.5)) == "tie"
    assert outcome(Bounded(1.0), (1.0, 1.0)) == "tie"  # an interval that holds 1 exactly
    assert outcome(Bounded(1.6, "upper"), None) == "loss"  # never reached the baseline's target
    assert outcome(Bounded(1.2, "lower"), None) == "win"  # only the baseline never reached it
    assert outcome(Bounded(0.8, "lower"), None) == "n/a"
    assert outcome(Bounded(1.3), None) == "n/a"  # under 5 seeds: no interval, no verdict
    assert outcome(Bounded.unknown(), None) == "n/a"


def test_geometric_mean_and_its_interval_by_hand():
    speedups = [Bounded(2.0), Bounded(0.5), Bounded(1.0)]
    cis = [(1.5, 3.0), (0.4, 0.6), (0.8, 1.1)]
    value, ci = geometric_mean(speedups, cis, confidence=0.95)
    assert value.kind == "exact" and value.value == pytest.approx(1.0)
    z = 1.959963984540054
    # each side's half-width on the log scale is z * se_i; the mean of three has se sqrt(sum)/3
    low_se = math.sqrt(sum((math.log(s) - math.log(lo)) ** 2 for s, (lo, _) in
                           zip([2.0, 0.5, 1.0], cis, strict=True))) / z / 3  # fmt: skip
    high_se = math.sqrt(sum((math.log(hi) - math.log(s)) ** 2 for s, (_, hi) in
                            zip([2.0, 0.5, 1.0], cis, strict=True))) / z / 3  # fmt: skip
    assert ci == pytest.approx((math.exp(-z * low_se), math.exp(z * high_se)))
    # by hand: log-widths below 0.2877, 0.2231, 0.2231 -> sqrt(0.1823)/3 = 0.1423
    assert ci[0] == pytest.approx(math.exp(-0.14233), abs=1e-4)
    # one scenario without an interval: the mean stands, its interval does not
    assert geometric_mean(speedups, [*cis[:2], None]) == (Bounded(1.0), None)


def test_geometric_mean_of_bounds():
    upper, ci = geometric_mean([Bounded(2.0), Bounded(0.5, "upper")], [(1.5, 3.0), None])
    assert (upper.kind, ci) == ("upper", None) and upper.value == pytest.approx(1.0)
    mixed, _ = geometric_mean([Bounded(2.0, "lower"), Bounded(0.5, "upper")], [None, None])
    assert mixed.kind == "unknown"
    assert geometric_mean([], [])[0].kind == "unknown"


FIVE = (0, 1, 2, 3, 4)


def _acc(k: int, s: int) -> float:
    return 0.30 + 0.05 * k + 0.01 * s


def _capped(k: int, s: int) -> float:
    return min(0.50, _acc(k, s))  # below every seed-mean target (~0.72): never reached


# scenario -> (held out, {allocator: rollouts per step}); the same accuracy curves as the
# baseline (64 a step), so each speedup is exactly 64 / rollouts per step, in every seed
SCENARIOS = {
    "alpha": (False, {"fast": 32, "same": 64, "slow": 128}),
    "beta": (False, {"fast": 16, "same": 64, "slow": 80}),
    "gamma": (True, {"fast": 128, "same": 64, "slow": 128}),
}


def write_synthetic_suite(run_dir: Path) -> Path:
    """A suite run folder: three scenarios (gamma held out), each an experiment of
    :func:`write_synthetic_run`, one manifest over all of their jobs and a sweep.json."""
    jobs, points = [], []
    for index, (scenario, (held, per_step)) in enumerate(SCENARIOS.items()):
        allocators = {"grpo": ("uniform", 64, 5, 0.1, _acc)}
        allocators |= {n: ("uniform", r, 5, 0.1, _acc) for n, r in per_step.items()}
        allocators["never"] = ("uniform", 64, 5, 0.1, _capped)
        write_synthetic_run(run_dir, allocators=allocators, seeds=FIVE, tag=scenario[0])
        manifest = read_json(run_dir / "manifest.json")
        train = [j for j in manifest["plan"]["jobs"] if j["type"] == "train"]
        jobs += train
        by_allocator: dict[str, list[str]] = {}
        for job in train:
            by_allocator.setdefault(job["allocator"], []).append(job["id"])
        points.append(
            {
                "index": index,
                "values": {"scenario": scenario},
                "scenario": scenario,
                "holdout": held,
                "overrides": [],
                "target": manifest["spec"]["target"],
                "jobs": by_allocator,
            }
        )
    manifest["plan"]["jobs"] = jobs
    atomic_write_json(run_dir / "manifest.json", manifest)
    atomic_write_json(
        run_dir / "sweep.json",
        {
            "name": "synthetic-suite",
            "axes": ["scenario"],
            "grid_axes": [],
            "focus": ["fast", "same", "slow", "never"],
            "scenarios": list(SCENARIOS),
            "holdout": [s for s, (held, _) in SCENARIOS.items() if held],
            "points": points,
        },
    )
    return run_dir


@pytest.fixture
def suite_run(tmp_path: Path) -> Path:
    return write_synthetic_suite(tmp_path / "runs" / "synthetic-suite")


def test_robustness_of_a_synthetic_suite(suite_run: Path):
    rob = robustness(analyze_sweep(suite_run))
    assert (rob.baseline, rob.scenarios, rob.holdout) == ("grpo", ["alpha", "beta"], ["gamma"])
    by = {entry.allocator: entry for entry in rob.allocators}
    fast = by["fast"]
    assert [r.speedup.value for r in fast.results] == pytest.approx([2.0, 4.0, 0.5])
    assert [r.outcome for r in fast.results] == ["win", "win", "loss"]
    assert fast.suite.geomean.value == pytest.approx(math.sqrt(8.0))
    assert fast.suite.ci == pytest.approx((math.sqrt(8.0), math.sqrt(8.0)))  # every seed alike
    assert (fast.suite.wins, fast.suite.ties, fast.suite.losses) == (2, 0, 0)
    assert fast.suite.worst.value == pytest.approx(2.0)
    assert fast.holdout is not None and fast.holdout.scenarios == ("gamma",)
    assert fast.holdout.geomean.value == pytest.approx(0.5) and fast.holdout.losses == 1
    same = by["same"]
    assert same.suite.record() == "0/2/0" and same.suite.geomean.value == pytest.approx(1.0)
    slow = by["slow"]
    assert slow.suite.geomean.value == pytest.approx(math.sqrt(0.5 * 0.8))
    assert slow.suite.worst.value == pytest.approx(0.5) and slow.suite.losses == 2
    never = by["never"]
    assert [r.outcome for r in never.results] == ["loss", "loss", "loss"]
    assert never.suite.geomean.kind == "upper" and never.suite.ci is None


def test_cli_report_of_a_suite_prints_and_writes_the_robustness_table(suite_run: Path, cli):
    result = cli(["report", str(suite_run), "--no-plots"])
    assert result.exit_code == 0, result.output
    assert "W/T/L" in result.output and "hold-out" in result.output
    assert "2.83" in result.output  # fast's geometric mean over alpha and beta
    report = json.loads((suite_run / "report" / "report.json").read_text())
    assert report["kind"] == "suite"
    fast = report["robustness"]["allocators"]["fast"]
    assert fast["suite"]["geomean"]["value"] == pytest.approx(math.sqrt(8.0))
    assert (fast["suite"]["wins"], fast["holdout"]["losses"]) == (2, 1)
    assert fast["scenarios"]["gamma"]["holdout"] is True
    assert fast["scenarios"]["beta"]["outcome"] == "win"
    md = (suite_run / "report" / "robustness.md").read_text()
    assert "## Hold-out (1 scenario," in md and "| fast |" in md
    as_json = cli(["report", str(suite_run), "--no-plots", "--json"])
    assert as_json.exit_code == 0
    assert json.loads(as_json.output)["robustness"]["holdout"] == ["gamma"]


def test_cli_report_still_refuses_a_plain_sweep(suite_run: Path, cli):
    sweep = read_json(suite_run / "sweep.json")
    del sweep["scenarios"], sweep["holdout"]
    atomic_write_json(suite_run / "sweep.json", sweep)
    result = cli(["report", str(suite_run)])
    assert result.exit_code != 0 and "sweep run folder" in result.output


def test_a_suite_crossed_with_an_axis_has_a_row_per_allocator_and_axis_value():
    from rollcli.analysis.ablation import Ablation, PointResult

    def point(index: int, scenario: str, upper: float, speedup: float) -> PointResult:
        values = {"scenario": scenario, "allocators.pc.p_upper": upper}
        ci = (speedup * 0.9, speedup * 1.1)
        return PointResult(index, values, "pc", Bounded(speedup), ci, None, 0.5, 0.5, 1.0, 5)

    results = [point(0, "a", 0.5, 2.0), point(1, "a", 0.75, 0.5),
               point(2, "b", 0.5, 8.0), point(3, "b", 0.75, 0.5)]  # fmt: skip
    ablation = Ablation("s", ["scenario", "allocators.pc.p_upper"], [], ["pc"], results,
                        baseline="grpo", scenarios=["a", "b"])  # fmt: skip
    rob = robustness(ablation)
    assert [e.allocator for e in rob.allocators] == ["pc (p_upper=0.5)", "pc (p_upper=0.75)"]
    assert rob.allocators[0].suite.geomean.value == pytest.approx(4.0)
    assert rob.allocators[1].suite.record() == "0/0/2"


def test_cli_report_of_a_suite_takes_another_target(suite_run: Path, cli):
    """`--target` applies to every scenario of a suite (it was ignored) and writes its own folder.
    At 30 % of grpo's rise (0.32 -> 0.72: target 0.44), `never` (grpo's curves, capped at 0.50
    from evaluation 4 on) reaches it with grpo: a tie, where at grpo's final it loses."""
    result = cli(["report", str(suite_run), "--no-plots", "--target", "rise:0.3"])
    assert result.exit_code == 0, result.output
    report = json.loads((suite_run / "report" / "target-rise-0.3" / "report.json").read_text())
    never = report["robustness"]["allocators"]["never"]
    assert never["scenarios"]["alpha"]["outcome"] == "tie"
    assert never["suite"]["geomean"]["value"] == pytest.approx(1.0)
    fast = report["robustness"]["allocators"]["fast"]
    assert fast["suite"]["geomean"]["value"] == pytest.approx(math.sqrt(8.0))
    assert not (suite_run / "report" / "report.json").exists()  # the spec target's stays apart
    default = robustness(analyze_sweep(suite_run))
    assert {e.allocator: e for e in default.allocators}["never"].suite.losses == 2
