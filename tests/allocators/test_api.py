"""The protocol's value types: the column-wise ``many`` builders equal the constructors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rollcli.allocators.api import AskItem, Group, Outcome


def test_askitem_many_equals_the_constructor() -> None:
    items = AskItem.many([3, 1, 4], 8, "pilot")
    assert items == [AskItem(3, 8, "pilot"), AskItem(1, 8, "pilot"), AskItem(4, 8, "pilot")]
    assert AskItem.many([], 8) == []
    with pytest.raises(ValueError, match="num_rollouts must be positive"):
        AskItem.many([1], 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        items[0].num_rollouts = 2  # type: ignore[misc]


def test_outcome_many_equals_the_constructor_and_checks_lengths() -> None:
    rewards = [np.array([1.0, 0.0]), np.array([1.0])]
    tokens = [np.array([5, 6]), np.array([7])]
    refs = [(10, 11), (12,)]
    built = Outcome.many([0, 2], ["main", "commit"], rewards, tokens, 3, refs)
    expected = [
        Outcome(p, ph, r, t, 3, f)
        for p, ph, r, t, f in zip([0, 2], ["main", "commit"], rewards, tokens, refs, strict=True)
    ]
    assert [(o.prompt_id, o.phase, o.policy_version, o.refs) for o in built] == [
        (o.prompt_id, o.phase, o.policy_version, o.refs) for o in expected
    ]
    assert all(
        a.rewards is b.rewards and a.num_tokens is b.num_tokens
        for a, b in zip(built, expected, strict=True)
    )
    with pytest.raises(
        ValueError, match="outcome of prompt 2: 2 rewards, 1 token counts and 1 refs"
    ):
        Outcome.many([0, 2], ["main"] * 2, [rewards[0], rewards[0]], tokens, 0, refs)
    with pytest.raises(ValueError, match="one entry per prompt"):
        Outcome.many([0], ["main"], rewards, tokens, 0, refs)


def test_group_many_equals_the_constructor() -> None:
    rewards = [np.array([1.0, 0.0]), np.array([0.0])]
    built = Group.many([5, 6], [(1, 2), (3,)], rewards)
    assert [(g.prompt_id, g.refs, g.baseline) for g in built] == [
        (5, (1, 2), None),
        (6, (3,), None),
    ]
    assert built[0].rewards is rewards[0] and built[1].size == 1
    with pytest.raises(ValueError, match="one entry per prompt"):
        Group.many([5], [(1, 2), (3,)], rewards)


def test_prompts_per_step_names_the_kind_and_the_knob() -> None:
    from rollcli.allocators import create_allocator

    with pytest.raises(
        ValueError, match=r"^uniform: rollouts_per_step=20 is not divisible by n=8$"
    ):
        create_allocator({"kind": "uniform"}, num_prompts=10, rollouts_per_step=20, seed=0)
    with pytest.raises(ValueError, match=r"pilot_commit: .* by n_pilot \+ n_commit = 128$"):
        create_allocator({"kind": "pilot_commit"}, num_prompts=10, rollouts_per_step=20, seed=0)
    uniform = create_allocator({"kind": "uniform"}, num_prompts=10, rollouts_per_step=64, seed=0)
    assert uniform.prompts_per_step(16, "n=16") == 4


def test_askitem_many_takes_one_count_per_prompt() -> None:
    from rollcli.allocators.api import AskItem

    items = AskItem.many([3, 1], [2, 5], "extra")
    assert items == [AskItem(3, 2, "extra"), AskItem(1, 5, "extra")]
    with pytest.raises(ValueError, match="positive"):
        AskItem.many([3, 1], [2, 0])
    with pytest.raises(ValueError, match="2 counts for 1 prompts"):
        AskItem.many([3], [2, 2])
