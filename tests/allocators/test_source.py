"""PromptSource's whole-pool methods (active prompts, seeded random draws), the ledger's trained
counts and the group's baseline field."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rollcli.allocators import BudgetLedger, Group, PromptSource


def source_with(deferred: list[int], evicted: list[int], num_prompts: int = 10) -> PromptSource:
    source = PromptSource(num_prompts=num_prompts, seed=0)
    for p in deferred:
        source.defer(p)
    for p in evicted:
        source.evict(p)
    return source


def test_active_prompts() -> None:
    source = source_with(deferred=[1, 4], evicted=[4, 7])  # evicting 4 un-defers it
    assert source.active_prompts().tolist() == [0, 2, 3, 5, 6, 8, 9]
    assert source.active_prompts(include_deferred=True).tolist() == [0, 1, 2, 3, 5, 6, 8, 9]
    assert source.is_deferred(1) and not source.is_deferred(4)
    assert source.num_active == 8
    source.new_epoch()  # deferred prompts come back
    assert source.active_prompts().tolist() == [0, 1, 2, 3, 5, 6, 8, 9]
    fresh = PromptSource(num_prompts=4, seed=0)
    assert fresh.active_prompts().tolist() == fresh.active_prompts(include_deferred=True).tolist()
    assert fresh.active_prompts().dtype == np.int64


def test_sample_is_seeded_distinct_and_active_only() -> None:
    source = source_with(deferred=[0, 1, 2], evicted=[3, 4], num_prompts=50)
    draws = [source.sample(10, np.random.default_rng(5)) for _ in range(2)]
    assert draws[0] == draws[1]  # the same generator state gives the same prompts
    assert len(set(draws[0])) == 10 and not set(draws[0]) & {0, 1, 2, 3, 4}
    assert (
        draws[0]
        == np.random.default_rng(5).choice(source.active_prompts(), 10, replace=False).tolist()
    )
    assert sorted(source.sample(100, np.random.default_rng(0))) == source.active_prompts().tolist()
    assert set(source.sample(48, np.random.default_rng(0), include_deferred=True)) >= {0, 1, 2}
    assert source.sample(0, np.random.default_rng(0)) == []
    before = json.dumps(source.state_dict())
    source.sample(5, np.random.default_rng(1))
    assert json.dumps(source.state_dict()) == before  # no cursor or epoch moves


def test_sample_with_weights() -> None:
    source = source_with(deferred=[], evicted=[0], num_prompts=6)
    weights = np.array([100.0, 0.0, 1.0, 0.0, 3.0, 0.0])  # prompt 0 is evicted: ignored
    assert sorted(source.sample(2, np.random.default_rng(2), weights=weights)) == [2, 4]
    counts = np.zeros(6)
    rng = np.random.default_rng(3)
    for _ in range(4000):
        counts[source.sample(1, rng, weights=weights)] += 1
    assert counts[[0, 1, 3, 5]].sum() == 0
    assert abs(counts[4] / counts[2] - 3.0) < 0.35
    with pytest.raises(ValueError, match="only 2 active prompts have weight > 0"):
        source.sample(3, rng, weights=weights)
    with pytest.raises(ValueError, match="one weight per prompt"):
        source.sample(1, rng, weights=np.ones(5))
    with pytest.raises(ValueError, match="finite and >= 0"):
        source.sample(1, rng, weights=-np.ones(6))
    with pytest.raises(ValueError, match="k must be >= 0"):
        source.sample(-1, rng)


def test_ledger_counts_trained_rollouts_and_reads_old_states() -> None:
    ledger = BudgetLedger()
    ledger.start_step()
    groups = [Group(0, (1, 2, 3), np.zeros(3)), Group(1, (4,), np.ones(1), baseline=0.5)]
    ledger.record_trained(groups)
    assert (ledger.step_trained_rollouts, ledger.num_trained_rollouts) == (4, 4)
    ledger.start_step()
    ledger.record_trained(groups[:1])
    assert (ledger.step_trained_rollouts, ledger.num_trained_rollouts) == (3, 7)
    state = ledger.state_dict()
    old = {k: v for k, v in state.items() if "trained" not in k}  # written before the counters
    restored = BudgetLedger()
    restored.load_state_dict(old)
    assert restored.num_trained_rollouts == 0 and restored.num_rollouts == ledger.num_rollouts
    restored.load_state_dict(state)
    assert restored == ledger


def test_group_baseline() -> None:
    g = Group(2, (5, 6), np.array([1.0, 1.0]), baseline=np.float64(0.25))
    assert g.baseline == 0.25 and type(g.baseline) is float
    assert Group(2, (5,), np.ones(1)).baseline is None
    with pytest.raises(ValueError, match="baseline must be finite"):
        Group(2, (5,), np.ones(1), baseline=float("nan"))
