"""Group-aligned mini-batches: how a backend splits one step's training groups into optimiser steps.

Every published GRPO recipe takes several optimiser steps per rollout step (REFERENCE.md §1): the
step's batch is shuffled and cut into ``num_minibatches`` mini-batches, one optimiser step each.
:func:`split_minibatches` is that cut for rollcli's backends, with two properties the allocators
need: a group (one prompt's GRPO group, whose advantages are normalised together) never straddles
two mini-batches, and the mini-batches hold as equal numbers of rollouts as group boundaries
allow, also when groups have different sizes (VIGOR, Pilot-Commit's pilot + commit groups).

The cut: shuffle the groups with the backend's generator, then place boundary ``j`` at the group
edge nearest to ``j * total / k`` (ties to the lower edge), keeping every mini-batch non-empty, so
each mini-batch is within one group of ``total / k`` rollouts. With fewer groups than ``k``, each
group is its own mini-batch (a group-aligned cut cannot make more): the caller reports how many
it got. ``k = 1`` draws nothing from the generator and keeps the groups' order.

verl splits rows, not groups: :func:`row_minibatches` sizes its mini-batches for a step (verl
asserts that the mini-batch size divides the batch and divides by the data-parallel size).

numpy only: the sim, tiny and verl backends share it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["split_minibatches", "check_num_minibatches", "row_minibatches"]


def check_num_minibatches(value: object) -> None:
    """Raise ``ValueError`` naming the knob unless ``value`` is an int >= 1."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"num_minibatches must be an integer >= 1, got {value!r}")


def split_minibatches(
    sizes: Sequence[int], num_minibatches: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Indices of the groups in each mini-batch, in training order (see the module docstring).

    ``sizes`` are the groups' rollout counts (each >= 1). Returns ``min(num_minibatches,
    len(sizes))`` non-empty index arrays that together hold every group exactly once; an empty
    list for no groups.
    """
    check_num_minibatches(num_minibatches)
    counts = np.asarray(sizes, dtype=np.int64)
    num_groups = int(counts.size)
    if num_groups == 0:
        return []
    if num_minibatches == 1:
        return [np.arange(num_groups)]
    if counts.min() < 1:
        raise ValueError(f"every group needs at least one rollout, got sizes {counts.tolist()}")
    order = rng.permutation(num_groups)
    parts = min(num_minibatches, num_groups)
    # edges[i] = rollouts in the first i groups of the shuffled order, i = 0 .. num_groups
    edges = np.concatenate(([0], np.cumsum(counts[order])))
    total = float(edges[-1])
    cuts: list[int] = []
    previous = 0
    for j in range(1, parts):
        ideal = total * j / parts
        upper = int(np.searchsorted(edges, ideal, side="left"))  # first edge >= ideal
        cut = upper
        if upper > 0 and ideal - edges[upper - 1] <= edges[upper] - ideal:
            cut = upper - 1
        cut = min(max(cut, previous + 1), num_groups - (parts - j))
        cuts.append(cut)
        previous = cut
    return np.split(order, cuts)


def row_minibatches(num_rows: int, num_minibatches: int, divisor: int = 1) -> tuple[int, int, int]:
    """``(mini-batches, rows per mini-batch, padded rows)`` for a step of ``num_rows`` rows.

    The batch is padded (with rows that carry no loss) to a multiple of ``k * divisor`` so that
    ``k`` mini-batches of equal size, each a multiple of ``divisor`` (the data-parallel size, times
    the micro-batch size when it must divide), hold it. ``k`` is ``num_minibatches`` unless the
    step is so small that a mini-batch would hold padding only; then the largest ``k`` for which
    none does.
    """
    check_num_minibatches(num_minibatches)
    if num_rows < 1 or divisor < 1:
        raise ValueError(f"need rows >= 1 and divisor >= 1, got {num_rows} and {divisor}")
    for k in range(min(num_minibatches, num_rows), 0, -1):
        padded = -(-num_rows // (k * divisor)) * k * divisor
        if padded - num_rows < padded // k:  # the last mini-batch holds a real row
            return k, padded // k, padded
    raise AssertionError("unreachable: one mini-batch always fits")
