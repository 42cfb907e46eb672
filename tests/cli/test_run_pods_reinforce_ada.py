"""PODS and Reinforce-Ada through ``rollcli run`` on the sim and tiny backends: the jobs finish,
the metrics rows count generated and trained rollouts apart, the summary table is printed.

(verl: tests/backends/verl/test_verl_peers_subset.py runs the same kinds in verl's trainer.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

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


def _check_run(run_peers, name: str, backend: dict) -> None:
    result, rows = run_peers(
        name, backend, ALLOCATORS, baseline="grpo", rollouts_per_step=64, max_parallel=2
    )
    assert "pods" in result.stdout and "ada" in result.stdout  # the summary table
    for a in ALLOCATORS:
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


def test_sim(run_peers) -> None:
    _check_run(
        run_peers, "peers-sim", {"kind": "sim", "num_train_prompts": 256, "num_eval_prompts": 64}
    )


@pytest.mark.slow
def test_tiny(run_peers, tmp_path: Path) -> None:
    _check_run(run_peers, "peers-tiny", {**TINY, "cache_dir": str(tmp_path / "cache")})
