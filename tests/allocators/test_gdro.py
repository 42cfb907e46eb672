"""Rollout-GDRO: the square-root rule and the shadow price's hold on the mean budget (no
official code exists; arXiv 2601.19280's abstract and summaries are the source)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rollcli.allocators import create_allocator
from rollcli.allocators.gdro import GdroConfig, gdro_bins, gdro_counts, gdro_price_update
from rollcli.testing.allocator_contract import make_pool
from rollcli.testing.fakes import FakeBackend, drive_step


def test_bins_from_last_visit_pass_rate() -> None:
    share = np.array([0.0, 0.19, 0.2, 0.99, 1.0, 0.5])
    seen = np.array([True, True, True, True, True, False])
    assert gdro_bins(share, seen, 5).tolist() == [0, 0, 1, 4, 4, 5]


def test_square_root_rule() -> None:
    # n_b = clip(round(sqrt(v_b / mu)), n_min, n_max), v_b = p_b (1 - p_b) of the bin's mean
    share = np.array([0.5, 0.5, 0.1, 0.0, 1.0, 0.3])
    seen = np.array([True, True, True, True, True, False])
    bins = gdro_bins(share, seen, 2)  # [1, 1, 0, 0, 1, 2]
    mu = 0.25 / 64
    counts, proxy = gdro_counts(bins, share, mu, num_bins=2, n_min=2, n_max=16)
    p0, p1 = 0.05, (0.5 + 0.5 + 1.0) / 3
    assert proxy.tolist() == pytest.approx([p0 * (1 - p0), p1 * (1 - p1), 0.25])
    want = [min(max(round(math.sqrt(v / mu)), 2), 16) for v in proxy]
    assert counts.tolist() == [want[b] for b in bins]
    assert counts[-1] == 8  # unseen: the mean budget at the starting price


def test_price_rises_over_budget_and_falls_under() -> None:
    assert gdro_price_update(1.0, 10.0, 8, 0.5) > 1.0
    assert gdro_price_update(1.0, 6.0, 8, 0.5) < 1.0
    assert gdro_price_update(1.0, 8.0, 8, 0.5) == 1.0


def test_shadow_price_holds_the_mean_budget_over_steps() -> None:
    pool = make_pool(400, seed=3)
    config = GdroConfig(n_mean=8, n_min=2, n_max=32, num_bins=5, dual_lr=0.5)
    alloc = create_allocator(config, num_prompts=400, rollouts_per_step=256, seed=0)
    backend = FakeBackend(pool, seed=0)
    spent = []
    for step in range(120):
        drive_step(alloc, backend, step)
        spent.append(alloc.ledger.step_rollouts)
    # 32 prompts a step: the mean over the last 80 steps is within 5 % of 32 * 8
    assert np.mean(spent[40:]) == pytest.approx(256, rel=0.05)
    # and the counts differ across bins (the rule is not a constant n)
    assert alloc.stats()["max_n"] > alloc.stats()["min_n"]


def test_the_price_resumes() -> None:
    config = GdroConfig(n_mean=4, n_min=2, n_max=8)
    alloc = create_allocator(config, num_prompts=50, rollouts_per_step=32, seed=0)
    backend = FakeBackend(make_pool(50), seed=0)
    for step in range(3):
        drive_step(alloc, backend, step)
    again = create_allocator(config, num_prompts=50, rollouts_per_step=32, seed=0)
    again.load_state_dict(json.loads(json.dumps(alloc.state_dict())))
    assert again.mu == alloc.mu
