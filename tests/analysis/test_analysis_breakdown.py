"""Where every rollout went: real sim runs through ``rollcli run``, then ``rollcli report``'s
breakdown table, files and plot; the parts add up to what each job generated."""

from __future__ import annotations

from pathlib import Path

import yaml

from rollcli.analysis.breakdown import PARTS, job_breakdown, run_breakdown
from rollcli.analysis.load import load_run
from rollcli.store.atomic import read_json
from rollcli.testing.rows import check_metrics_rows

STEPS = 8
ALLOCATORS = {
    "grpo": {"kind": "uniform", "n": 8},
    "pc": {"kind": "pilot_commit", "n_pilot": 4, "n_commit": 4, "on_max_rounds": "stop"},
    "greso": {"kind": "greso", "n": 8, "on_max_rounds": "stop"},
    "pods": {"kind": "pods", "n": 16, "m": 4},
}


def _run(cli, tmp_path: Path) -> Path:
    spec = {
        "name": "where",
        # a small pool: GRESO meets prompts again after the first epoch, and skips some
        "backend": {"kind": "sim", "num_train_prompts": 24, "num_eval_prompts": 32},
        "budget": {"steps": STEPS, "rollouts_per_step": 64},
        "allocators": ALLOCATORS,
        "seeds": [0, 1],
        "eval": {"every": 4},
        "target": {"baseline": "grpo"},
        "launch": {"executor": "local", "max_parallel": 2},
        "tracking": {"wandb": {"mode": "disabled"}},
    }
    path = tmp_path / "where.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = cli(["run", path, "--runs-dir", tmp_path / "runs"])
    assert result.exit_code == 0, result.output
    return tmp_path / "runs" / "where"


def test_breakdown_of_a_real_run(cli, tmp_path: Path) -> None:
    run_dir = _run(cli, tmp_path)
    run = load_run(run_dir)
    for job in run.jobs:
        check_metrics_rows(job.rows, num_steps=STEPS, eval_steps={4, 8})
        b = job_breakdown(job)
        assert b is not None
        assert sum(b.rollouts.values()) == b.generated == job.rows[-1]["cum_rollouts"]
        assert sum(b.tokens.values()) == b.generated_tokens == job.rows[-1]["cum_tokens"]
        trained = job.rows[-1]["cum_rollouts_trained"]
        assert b.rollouts["informative"] + b.rollouts["zero_var"] == trained
        assert b.true_signal is not None and b.true_signal > 0  # sim knows p
    rows = {b.allocator: b for b in run_breakdown(run)}
    assert sorted(rows) == sorted(ALLOCATORS)  # baseline first, then the plan order
    grpo, pods, greso = rows["grpo"], rows["pods"], rows["greso"]
    assert grpo.rollouts["decision"] == grpo.rollouts["held"] == 0 and grpo.skipped == 0
    assert pods.share("decision") == 0.75  # 16 generated, 4 kept per prompt
    assert greso.skipped > 0 and greso.rollouts["zero_var"] == 0  # it trains informative only
    assert rows["pc"].rollouts["decision"] > 0
    for b in rows.values():
        assert abs(sum(b.share(p) for p in PARTS) - 1.0) < 1e-12
        assert 0 < b.groups_per_1k <= 1000 / 4 and b.signal_per_1k > 0

    result = cli(["report", run_dir, "--format", "md"])
    assert result.exit_code == 0, result.output
    assert "Where every rollout went" in result.stdout
    report = run_dir / "report"
    for name in ("breakdown.md", "breakdown.csv", "breakdown.json", "breakdown.png"):
        assert (report / name).is_file(), name
    table = (report / "breakdown.md").read_text()
    assert "| pods | 2 |" in table and "75.0%" in table
    assert "## Where every rollout went" in (report / "report.md").read_text()
    saved = {d["allocator"]: d for d in read_json(report / "breakdown.json")}
    assert saved["pods"]["rollouts"]["decision"] == pods.rollouts["decision"]
    assert len(saved["greso"]["jobs"]) == 2


def test_breakdown_table_stays_readable_at_80_columns() -> None:
    """Issue 28: the rollout-breakdown table collapsed at 80 columns."""
    from rich.console import Console

    from rollcli.analysis.breakdown import AllocatorBreakdown, breakdown_table

    parts = {"informative": 61_440.0, "zero_var": 20_480.0, "decision": 40_960.0, "held": 0.0}
    rows = [
        AllocatorBreakdown(
            allocator=name,
            seeds=[0, 1, 2, 3, 4],
            generated=122_880.0,
            generated_tokens=1.2e7,
            rollouts=parts,
            tokens={p: v * 100 for p, v in parts.items()},
            skipped=2048.0,
            groups_per_1k=12.5,
            signal_per_1k=3.1,
        )
        for name in ("grpo", "reinforce_ada", "pilot_commit")
    ]
    narrow = Console(record=True, width=80)
    narrow.print(breakdown_table(rows, max_width=80))
    text = narrow.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    line = next(x for x in text.splitlines() if "reinforce_ada" in x)
    assert "50.0%" in line and "16.7%" in line and "33.3%" in line and "12.5" in line
    wide = Console(record=True, width=200)
    wide.print(breakdown_table(rows, max_width=200))
    assert "Signal / 1k" in wide.export_text()
