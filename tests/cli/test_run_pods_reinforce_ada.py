"""PODS and Reinforce-Ada through ``rollcli run`` on the sim and tiny backends: the jobs finish,
the metrics rows count generated and trained rollouts apart, the summary table is printed.

(verl: tests/backends/verl/test_verl_peers_subset.py runs the same kinds in verl's trainer.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rollcli.store.atomic import read_json, read_jsonl

ALLOCATORS = {
    "grpo": {"kind": "uniform", "n": 4},
    "pods": {"kind": "pods", "n": 16, "m": 4},  # 16 prompts: 256 generated, 64 trained a step
    "ada": {"kind": "reinforce_ada", "round_repeat": 4, "max_rounds": 3},  # 16 prompts
}
TINY = {
    "kind": "tiny", "max_level": 1, "num_train_prompts": 64, "eval_prompts_per_level": 8,
    "eval_samples": 2, "d_model": 16, "num_layers": 1, "num_heads": 2, "base_steps": 150,
    "base_batch_size": 16, "base_lr": 1e-2, "lr": 1e-3,
}  # fmt: skip


def _spec(folder: Path, name: str, backend: dict) -> Path:
    spec = {
        "name": name,
        "backend": backend,
        "budget": {"steps": 3, "rollouts_per_step": 64},
        "allocators": ALLOCATORS,
        "seeds": [0],
        "eval": {"every": 3},
        "target": {"baseline": "grpo"},
        "launch": {"executor": "local", "max_parallel": 2},
        "tracking": {"wandb": {"mode": "disabled"}},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _check_run(cli, spec: Path, runs: Path) -> None:
    result = cli(["run", spec, "--runs-dir", runs])
    assert result.exit_code == 0, result.output
    assert "pods" in result.stdout and "ada" in result.stdout  # the summary table
    run_dir = runs / spec.stem
    manifest = read_json(run_dir / "manifest.json")
    jobs = {j["allocator"]: j["id"] for j in manifest["plan"]["jobs"] if j["type"] == "train"}
    rows = {a: read_jsonl(run_dir / "jobs" / i / "metrics.jsonl")[1:] for a, i in jobs.items()}
    for a in jobs:
        assert [r["step"] for r in rows[a]] == [1, 2, 3], a
        assert "eval/accuracy" in rows[a][-1]
    assert [r["step_rollouts"] for r in rows["pods"]] == [256] * 3
    assert [r["rollouts_trained"] for r in rows["pods"]] == [64] * 3
    assert rows["pods"][-1]["cum_rollouts"] == 4 * rows["pods"][-1]["cum_rollouts_trained"]
    assert all(r["alloc/mean_top"] <= 4 for r in rows["pods"])
    for r in rows["ada"]:
        assert r["prompts_trained"] == 16 and r["rollouts_trained"] <= 64
        assert 64 <= r["step_rollouts"] <= 16 * 4 * 3  # round 0 for all, at most 3 rounds
        assert r["step_rollouts"] == 16 * r["alloc/draws_per_prompt"]  # every draw counted
        assert 1 <= r["alloc/rounds"] <= 3


def test_sim(cli, tmp_path: Path) -> None:
    backend = {"kind": "sim", "num_train_prompts": 256, "num_eval_prompts": 64}
    _check_run(cli, _spec(tmp_path, "peers-sim", backend), tmp_path / "runs")


@pytest.mark.slow
def test_tiny(cli, tmp_path: Path) -> None:
    backend = {**TINY, "cache_dir": str(tmp_path / "cache")}
    _check_run(cli, _spec(tmp_path, "peers-tiny", backend), tmp_path / "runs")
