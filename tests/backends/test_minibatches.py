"""Group-aligned mini-batch splits (rollcli/backends/minibatches.py): cover, balance, determinism."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollcli.backends.minibatches import row_minibatches, split_minibatches


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 40), min_size=1, max_size=60),
    k=st.integers(1, 12),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_group_once_in_non_empty_balanced_chunks(sizes: list[int], k: int, seed: int) -> None:
    chunks = split_minibatches(sizes, k, np.random.default_rng(seed))
    assert len(chunks) == min(k, len(sizes))
    assert all(len(c) >= 1 for c in chunks)
    assert sorted(int(i) for c in chunks for i in c) == list(range(len(sizes)))
    counts = np.array([sum(sizes[i] for i in c) for c in chunks])
    ideal = sum(sizes) / len(chunks)
    if max(sizes) <= ideal:  # no group alone is bigger than a mini-batch's share
        assert np.all(np.abs(counts - ideal) <= max(sizes))


@given(groups=st.integers(1, 40), size=st.integers(1, 16), k=st.integers(1, 8))
def test_equal_groups_split_into_equal_counts(groups: int, size: int, k: int) -> None:
    chunks = split_minibatches([size] * groups, k, np.random.default_rng(0))
    lengths = [len(c) for c in chunks]
    assert max(lengths) - min(lengths) <= 1  # at most one group apart
    if groups % len(chunks) == 0:
        assert len(set(lengths)) == 1


def test_shuffled_by_the_generator_and_reproducible() -> None:
    sizes = [8] * 16
    a = split_minibatches(sizes, 4, np.random.default_rng(1))
    b = split_minibatches(sizes, 4, np.random.default_rng(1))
    c = split_minibatches(sizes, 4, np.random.default_rng(2))
    assert [x.tolist() for x in a] == [x.tolist() for x in b]
    assert [x.tolist() for x in a] != [x.tolist() for x in c]
    assert np.concatenate(a).tolist() != list(range(16))  # shuffled, not in order


def test_one_minibatch_keeps_order_and_draws_nothing() -> None:
    rng = np.random.default_rng(3)
    before = rng.bit_generator.state
    (chunk,) = split_minibatches([3, 1, 2], 1, rng)
    assert chunk.tolist() == [0, 1, 2]
    assert rng.bit_generator.state == before


def test_unequal_groups_hand_case() -> None:
    # VIGOR-like sizes: whatever the shuffle, 2 chunks of 30 + 2 + 2 + 4 + 2 = 40 rollouts are
    # the big group alone against the rest (the only split within one group of 20)
    for seed in range(10):
        chunks = split_minibatches([30, 2, 2, 4, 2], 2, np.random.default_rng(seed))
        counts = sorted(sum([30, 2, 2, 4, 2][i] for i in c) for c in chunks)
        assert counts in ([10, 30], [8, 32], [6, 34], [4, 36], [2, 38])
        assert len(chunks) == 2


def test_empty_and_bad_input() -> None:
    assert split_minibatches([], 4, np.random.default_rng(0)) == []
    with pytest.raises(ValueError, match="num_minibatches"):
        split_minibatches([1, 2], 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="at least one rollout"):
        split_minibatches([1, 0], 2, np.random.default_rng(0))


@given(rows=st.integers(1, 300), k=st.integers(1, 16), divisor=st.integers(1, 8))
def test_row_minibatches_divide_and_hold_real_rows(rows: int, k: int, divisor: int) -> None:
    parts, mini, padded = row_minibatches(rows, k, divisor)
    assert 1 <= parts <= k and parts * mini == padded >= rows
    assert mini % divisor == 0
    assert padded - rows < mini  # no mini-batch of padding only
    if rows % (k * divisor) == 0 or rows >= k * k * divisor:
        assert parts == k  # then padding (< k * divisor rows) cannot fill a mini-batch


def test_row_minibatches_hand_cases() -> None:
    assert row_minibatches(24, 2) == (2, 12, 24)
    assert row_minibatches(22, 4) == (4, 6, 24)
    assert row_minibatches(3, 4) == (3, 1, 3)
    assert row_minibatches(10, 4, divisor=4) == (3, 4, 12)  # 4 x 4 rows would hold 6 pads
    with pytest.raises(ValueError, match="num_minibatches"):
        row_minibatches(4, 0)
