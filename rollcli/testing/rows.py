"""The metrics-row contract (docs/CONTRACTS.md §4), as one check every backend's rows must pass.

``check_metrics_rows(rows, num_steps=..., eval_steps=..., initial_eval=...)`` asserts what
analysis and the live view rely on: a ``step: 0`` row, then one row per step with every key of
:data:`STEP_KEYS`, cumulative rollouts and tokens that are the sums of the per-step counts,
the breakdown of each step's rollouts and tokens (informative + zero_var + decision + the change
in held = generated; informative + zero_var = trained), shares and means in range, ``wall_s`` not decreasing, allocator stats that have their own column
not repeated as ``alloc/*``, update metrics as ``train/*`` and ``eval/accuracy`` exactly at the
evaluated steps. The sim, tiny and verl-on-CPU tests all call it on real runs.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from rollcli.train.rows import TOP_LEVEL_STATS

__all__ = ["STEP_KEYS", "check_metrics_rows"]

STEP_KEYS = frozenset(
    {
        "step", "cum_rollouts", "cum_tokens", "step_rollouts", "step_tokens", "wall_s",
        "time/generate_s", "time/allocate_s", "time/update_s", "time/eval_s", "time/step_s",
        "reward_mean", "reward_var", "gen_reward_var", "zero_var_frac", "prompts_trained",
        "rollouts_trained", "cum_rollouts_trained", "evicted", "deferred", "epoch", "policy_version",
        "rollouts_informative", "rollouts_zero_var", "rollouts_decision", "rollouts_held",
        "rollouts_skipped", "tokens_informative", "tokens_zero_var", "tokens_decision",
        "tokens_held", "groups_informative",
    }
)  # fmt: skip


def check_metrics_rows(
    rows: Sequence[dict[str, Any]],
    *,
    num_steps: int,
    eval_steps: Collection[int],
    initial_eval: bool = True,
    binary_rewards: bool = True,
) -> None:
    """Assert the row contract on the rows of one uninterrupted (or resumed) run."""
    assert [r["step"] for r in rows] == list(range(num_steps + 1)), [r["step"] for r in rows]
    first = rows[0]
    assert (first["cum_rollouts"], first["cum_tokens"], first["wall_s"]) == (0, 0, 0.0)
    assert ("eval/accuracy" in first) == initial_eval, first
    cum_rollouts = cum_tokens = cum_trained = held = held_tokens = 0
    version = int(first["policy_version"])
    for prev, row in zip(rows, rows[1:], strict=False):
        step = row["step"]
        missing = STEP_KEYS - set(row)
        assert not missing, f"step {step}: missing {sorted(missing)}"
        cum_rollouts += row["step_rollouts"]
        cum_tokens += row["step_tokens"]
        cum_trained += row["rollouts_trained"]
        assert (row["cum_rollouts"], row["cum_tokens"]) == (cum_rollouts, cum_tokens), step
        if row["step_rollouts"]:
            assert row["step_tokens"] >= row["step_rollouts"], step
        else:  # a step that trains only groups completed in earlier steps (SPEED)
            assert row["step_tokens"] == 0 and row["rollouts_trained"] > 0, step
        assert 0.0 <= row["zero_var_frac"] <= 1.0, step
        assert row["reward_var"] >= 0.0 and row["gen_reward_var"] >= 0.0, step
        if binary_rewards:
            assert 0.0 <= row["reward_mean"] <= 1.0, step
        assert row["rollouts_trained"] >= row["prompts_trained"] >= 0, step
        assert row["cum_rollouts_trained"] == cum_trained <= cum_rollouts, step
        # where every rollout went: the parts of this step's generation, and the held level
        assert row["rollouts_informative"] + row["rollouts_zero_var"] == row["rollouts_trained"]
        assert row["step_rollouts"] == row["rollouts_informative"] + row["rollouts_zero_var"] + (
            row["rollouts_decision"] + row["rollouts_held"] - held
        ), step
        assert row["step_tokens"] == row["tokens_informative"] + row["tokens_zero_var"] + (
            row["tokens_decision"] + row["tokens_held"] - held_tokens
        ), step
        held, held_tokens = row["rollouts_held"], row["tokens_held"]
        assert min(row[k] for k in STEP_KEYS if k.startswith(("rollouts_", "tokens_"))) >= 0, step
        assert row["prompts_trained"] >= row["groups_informative"] >= 0, step
        assert row["wall_s"] >= prev["wall_s"], step
        assert min(row[k] for k in STEP_KEYS if k.startswith("time/")) >= 0.0, step
        assert row["policy_version"] >= version, step  # updates only move it forward
        version = row["policy_version"]
        assert any(key.startswith("train/") for key in row), step
        assert not {f"alloc/{key}" for key in TOP_LEVEL_STATS} & set(row), step
        assert ("eval/accuracy" in row) == (step in eval_steps), step
        if "eval/accuracy" in row:
            assert 0.0 <= row["eval/accuracy"] <= 1.0, step
