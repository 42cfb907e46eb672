"""Knapsack RL and SPEED through ``rollcli run`` on the sim and tiny backends (3 steps each).

The knapsack needs prompts it has seen before: a pool of 16 prompts, 8 a step, so step 3
revisits step 1's and splits its rollouts by the DP. SPEED's groups are a screen plus a
continuation. The rows are checked for what each allocator promises: exact budgets for the
knapsack, screen + continuation groups for SPEED.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backends.tiny.conftest import learning_micro_config

ALLOCATORS = {
    "knapsack": {"kind": "knapsack", "n": 4, "max_n": 12, "min_buffer_length": 4},
    # the tiny micro model is rarely right: train what is complete after 10 calls
    "speed": {
        "kind": "speed",
        "n_screen": 2,
        "n_continue": 2,
        "gen_batch_factor": 2,
        "max_gen_calls": 10,
        "on_max_gen_calls": "train",
    },  # fmt: skip
}


@pytest.mark.parametrize("kind", ["sim", pytest.param("tiny", marks=pytest.mark.slow)])
def test_knapsack_and_speed_run(run_peers, tmp_path: Path, kind: str) -> None:
    if kind == "sim":
        backend = {"kind": "sim", "num_train_prompts": 16, "num_eval_prompts": 32}
    else:
        backend = learning_micro_config(tmp_path / "cache", num_train_prompts=16)
    _, rows = run_peers(
        f"budget-peers-{kind}", backend, ALLOCATORS, baseline="knapsack", rollouts_per_step=32
    )
    knapsack, speed = rows["knapsack"], rows["speed"]
    assert [r["step_rollouts"] for r in knapsack] == [32, 32, 32]  # exactly the budget
    assert [r["rollouts_trained"] for r in knapsack] == [32, 32, 32]
    assert knapsack[-1]["alloc/ready"] == 8  # step 3 revisits step 1's prompts
    assert knapsack[0]["alloc/max_budget"] == knapsack[0]["alloc/min_budget"] == 4
    # B = 32 // 4 = 8 complete prompts a step (fewer only where it gave up after 9 calls)
    assert all(0 < r["prompts_trained"] <= 8 for r in speed)
    assert all(r["rollouts_trained"] == 4 * r["prompts_trained"] for r in speed)
    assert all(r["prompts_trained"] == 8 or r["alloc/gen_calls"] == 9 for r in speed)
    if kind == "sim":
        assert [r["prompts_trained"] for r in speed] == [8, 8, 8]
