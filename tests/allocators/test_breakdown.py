"""The ledger's breakdown of generated rollouts: hand-computed cases for every part and path."""

from __future__ import annotations

import json

import numpy as np

from rollcli.allocators.api import BudgetLedger, Group, Outcome
from rollcli.allocators.breakdown import informative_mask


def outcome(prompt: int, rewards: list[float], tokens: list[int], first_ref: int) -> Outcome:
    refs = tuple(range(first_ref, first_ref + len(rewards)))
    return Outcome(prompt, "main", np.array(rewards), np.array(tokens), 0, refs)


def parts(ledger: BudgetLedger) -> dict[str, int]:
    return {k: v for k, v in ledger.where.total.items() if v}


def test_informative_mask_reads_variance_and_baselines() -> None:
    groups = [
        Group(0, (1, 2), np.array([1.0, 0.0])),
        Group(1, (3, 4), np.array([1.0, 1.0])),
        Group(2, (5,), np.array([1.0])),  # one rollout, GRPO: advantage 0
        Group(3, (6,), np.array([1.0]), baseline=0.25),  # r - baseline != 0
        Group(4, (7, 8), np.array([0.5, 0.5]), baseline=0.5),
    ]
    assert informative_mask(groups).tolist() == [True, False, False, True, False]
    assert informative_mask([]).tolist() == []


def test_outcome_groups_split_into_informative_zero_var_and_decision() -> None:
    """Uniform/DAPO-like: groups reuse the told refs; an untrained outcome is decision-only."""
    ledger = BudgetLedger()
    ledger.start_step()
    told = [
        outcome(0, [1, 0, 1], [10, 20, 30], 0),
        outcome(1, [1, 1, 1], [5, 5, 5], 3),
        outcome(2, [0, 0, 0], [7, 8, 9], 6),
    ]
    ledger.record(told)
    ledger.record_trained([Group(o.prompt_id, o.refs, o.rewards) for o in told[:2]])
    assert parts(ledger) == {
        "informative_rollouts": 3,
        "informative_tokens": 60,
        "zero_var_rollouts": 3,
        "zero_var_tokens": 15,
        "decision_rollouts": 3,
        "decision_tokens": 24,
        "informative_groups": 1,
    }
    assert ledger.where.step == ledger.where.total
    assert ledger.where.held_rollouts == 0


def test_merged_groups_and_held_rollouts_across_steps() -> None:
    """Pilot-Commit-like: a pilot waits (held) while live, trains merged with its commit next
    step; another pilot ages out (decision). Subsets (PODS-like) leave the rest as decision."""
    ledger = BudgetLedger()
    ledger.start_step()
    pilot_a = outcome(0, [1, 0], [3, 4], 0)
    pilot_b = outcome(1, [1, 1], [1, 2], 2)
    screened = outcome(2, [1, 0, 0, 1], [1, 1, 1, 1], 4)
    ledger.record([pilot_a, pilot_b, screened])
    kept = Group(2, (4, 5), np.array([1.0, 0.0]))  # a subset of 2 of its 4
    ledger.record_trained([kept], live={0, 1, 2, 3})
    where = ledger.where
    assert (where.held_rollouts, where.held_tokens) == (4, 10)
    assert parts(ledger) == {
        "informative_rollouts": 2,
        "informative_tokens": 2,
        "decision_rollouts": 2,
        "decision_tokens": 2,
        "informative_groups": 1,
    }
    ledger.start_step()
    commit = outcome(0, [0, 0], [6, 6], 8)
    ledger.record([commit])
    merged = Group(0, (0, 1, 8, 9), np.array([1.0, 0.0, 0.0, 0.0]))
    ledger.record_trained([merged], live=set())  # pilot b is gone: decision
    assert (where.held_rollouts, where.held_tokens) == (0, 0)
    assert where.step == {
        "informative_rollouts": 4,
        "informative_tokens": 19,
        "zero_var_rollouts": 0,
        "zero_var_tokens": 0,
        "decision_rollouts": 2,
        "decision_tokens": 3,
        "skipped_rollouts": 0,
        "informative_groups": 1,
    }
    total = where.total
    trained_or_gone = sum(total[f"{p}_rollouts"] for p in ("informative", "zero_var", "decision"))
    assert trained_or_gone == ledger.num_rollouts == 10
    tokens = sum(total[f"{p}_tokens"] for p in ("informative", "zero_var", "decision"))
    assert tokens == ledger.num_tokens == 26


def test_skipped_and_state_round_trip_mid_step() -> None:
    ledger = BudgetLedger()
    ledger.start_step()
    ledger.record_skipped(16)
    a = outcome(0, [1, 0], [3, 4], 0)
    ledger.record([a])
    ledger.record_trained([], live={0, 1})  # held into the next step
    ledger.start_step()
    b = outcome(1, [0, 1], [2, 2], 2)
    ledger.record([b])
    state = json.loads(json.dumps(ledger.state_dict()))  # a checkpoint with the step half done
    restored = BudgetLedger()
    restored.load_state_dict(state)
    for led in (ledger, restored):
        led.record_trained([Group(0, (0, 1), a.rewards), Group(1, (2, 3), b.rewards)])
    assert restored.where.total == ledger.where.total
    assert ledger.where.total["skipped_rollouts"] == 16
    assert ledger.where.total["informative_rollouts"] == 4
    assert ledger.where.total["informative_tokens"] == 11
    old = {k: v for k, v in state.items() if k != "where"}  # a checkpoint before the breakdown
    restored.load_state_dict(old)
    assert restored.where.total["informative_rollouts"] == 0 and not restored.where.held
