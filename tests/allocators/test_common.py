"""rollcli.allocators._common.greedy_counts: the greedy that hora, vip and xrpo share."""

from __future__ import annotations

import itertools

import numpy as np

from rollcli.allocators._common import greedy_counts


def brute_force(gains: np.ndarray, quota: int) -> np.ndarray:
    """One unit at a time to the row whose next gain is largest (ties: the earlier row)."""
    counts = np.zeros(len(gains), dtype=np.int64)
    for _ in range(quota):
        nxt = [g[c] if c < len(g) else -np.inf for g, c in zip(gains, counts, strict=True)]
        best = int(np.argmax(np.round(nxt, 12)))
        if nxt[best] == -np.inf:
            break
        counts[best] += 1
    return counts


def test_the_greedy_matches_one_unit_at_a_time():
    rng = np.random.default_rng(0)
    for rows, depth, quota in itertools.product((1, 3, 6), (1, 4), (0, 1, 5, 30)):
        gains = -np.sort(-rng.random((rows, depth)), axis=1)  # each row non-increasing
        gains[rng.random((rows, depth)) < 0.2] = -np.inf
        gains = np.where(np.isneginf(gains).cumsum(axis=1) > 0, -np.inf, gains)  # -inf to the end
        assert np.array_equal(greedy_counts(gains, quota), brute_force(gains, quota))


def test_ties_to_12_decimals_go_to_the_earlier_row():
    gains = np.array([[0.3], [0.3 + 1e-14], [0.1]])
    assert greedy_counts(gains, 1).tolist() == [1, 0, 0]


def test_forbidden_entries_are_never_taken():
    gains = np.array([[1.0, -np.inf], [-np.inf, -np.inf]])
    assert greedy_counts(gains, 5).tolist() == [1, 0]
    assert greedy_counts(np.zeros((0, 3)), 4).tolist() == []
