"""DAPO dynamic sampling refill and the oracle, on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from rollcli.allocators import AllocatorError, create_allocator
from rollcli.allocators.oracle import oracle_scores
from rollcli.testing import FakeBackend

from .conftest import epoch_order, scripted_by_position

DAPO = {"kind": "dynamic", "n": 4, "gen_batch_factor": 2}  # budget 8 -> B = 2, gen batch 4


def test_refill_until_the_train_batch_is_informative(make) -> None:
    o = epoch_order(8, 0)
    patterns = [[1.0], [1, 0], [0.0], [1.0], [1, 0], [1, 1, 0, 1], [0.0], [0, 1]]
    run = make(DAPO, scripted_by_position(o, patterns), 8)
    groups = run.step(0)
    assert run.asks == [
        [(o[i], 4, "main") for i in range(4)],
        [(o[i], 4, "main") for i in range(4, 8)],
    ]
    # informative in generation order: o1 | o4, o5, o7 -> the first B = 2 train, the rest is discarded
    assert [g.prompt_id for g in groups] == [o[1], o[4]]
    assert run.allocator.ledger.step_rollouts == 32  # every generated rollout counted (4x budget)
    stats = run.allocator.stats()
    assert (stats["gen_batches"], stats["informative"], stats["dropped"]) == (2, 4, 4)
    assert run.allocator.max_step_rollouts == 10 * 4 * 4


def test_max_gen_batches_error_or_train(make) -> None:
    run = make({**DAPO, "max_gen_batches": 3}, FakeBackend(np.ones(32), 0), 8)
    with pytest.raises(AllocatorError, match="after 3 generation batches"):
        run.step(0)
    assert run.allocator.ledger.step_rollouts == 3 * 16
    run = make(
        {**DAPO, "max_gen_batches": 3, "on_max_gen_batches": "train"},
        FakeBackend(np.ones(32), 0),
        8,
    )
    assert run.step(0) == []
    p = np.r_[np.ones(31), 0.5]
    run = make({**DAPO, "max_gen_batches": 8, "on_max_gen_batches": "train"}, FakeBackend(p, 0), 8)
    groups = run.step(0)  # the one informative prompt may turn up: train on what there is
    assert len(groups) <= 1 and all(g.prompt_id == 31 for g in groups)


def test_dynamic_config_errors() -> None:
    with pytest.raises(ValueError, match="n must be >= 2"):
        create_allocator({"kind": "dynamic", "n": 1}, num_prompts=8, rollouts_per_step=8, seed=0)
    with pytest.raises(ValueError, match="not divisible by n=16"):
        create_allocator({"kind": "dynamic"}, num_prompts=8, rollouts_per_step=40, seed=0)


P = np.array([0.0, 1.0, 0.5, 0.9, 0.3, 0.55, 0.05, 0.75])


def test_oracle_picks_the_true_highest_variance(make) -> None:
    run = make({"kind": "oracle_select", "n": 4}, FakeBackend(P, 0), 12)  # B = 3
    groups = run.step(0)
    assert run.asks == [[(2, 4, "main"), (5, 4, "main"), (4, 4, "main")]]  # p(1-p): .25, .2475, .21
    assert [g.prompt_id for g in groups] == [2, 5, 4]
    assert run.allocator.stats()["mean_score"] == pytest.approx((0.25 + 0.2475 + 0.21) / 3)


def test_oracle_scores() -> None:
    p = np.array([0.0, 0.5, 1.0, 0.25])
    assert oracle_scores(p, 4, "variance").tolist() == [0.0, 0.25, 0.0, 0.1875]
    assert oracle_scores(p, 4, "informative").tolist() == pytest.approx(
        [0.0, 0.875, 0.0, 1 - 0.25**4 - 0.75**4]
    )


def test_oracle_candidates_and_eviction(make) -> None:
    run = make({"kind": "oracle_select", "n": 4, "candidate_factor": 1}, FakeBackend(P, 0), 12)
    run.step(0)
    assert sorted(p for p, _, _ in run.asks[0]) == sorted(epoch_order(8, 0)[:3])
    run = make({"kind": "oracle_select", "n": 4}, FakeBackend(P, 0), 12)
    run.allocator.source.evict(2)
    run.step(0)
    assert [p for p, _, _ in run.asks[0]] == [5, 4, 7]


def test_oracle_requires_true_probabilities() -> None:
    with pytest.raises(AllocatorError, match="only the sim backend"):
        create_allocator({"kind": "oracle_select"}, num_prompts=8, rollouts_per_step=8, seed=0)
