"""State helpers: every value an allocator keeps survives a JSON round trip exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rollcli.allocators import Group, Outcome
from rollcli.allocators.state import (
    PromptHistory,
    array_from_json,
    array_to_json,
    group_from_json,
    group_to_json,
    outcome_from_json,
    outcome_to_json,
    prompt_dict_from_json,
    prompt_dict_to_json,
)


def through_json(value):
    return json.loads(json.dumps(value, allow_nan=False))  # standard JSON: no NaN literals


@pytest.mark.parametrize(
    "array",
    [
        np.array([0.1, 1 / 3, -2.5e-300, 1e308]),
        np.array([[np.nan, np.inf], [-np.inf, 0.0]]),
        np.arange(6, dtype=np.int64).reshape(2, 3),
        np.array([True, False]),
        np.zeros((0, 4), dtype=np.float32),
        np.array([7], dtype=np.uint8),
    ],
)
def test_arrays_round_trip_bit_exactly(array: np.ndarray) -> None:
    back = array_from_json(through_json(array_to_json(array)))
    assert back.dtype == array.dtype and back.shape == array.shape
    assert back.tobytes() == array.tobytes()


def test_array_to_json_refuses_objects() -> None:
    with pytest.raises(TypeError, match="dtype object"):
        array_to_json(np.array([{}], dtype=object))


def test_prompt_dicts_keep_int_keys_and_order() -> None:
    stats = {40: 0.5, 3: 0.25, 17: 1.0}
    items = through_json(prompt_dict_to_json(stats))
    back = prompt_dict_from_json(items)
    assert back == stats and list(back) == [40, 3, 17]
    arrays = {5: np.array([1.0, 2.0]), 1: np.array([np.nan])}
    back = prompt_dict_from_json(
        through_json(prompt_dict_to_json(arrays, array_to_json)), array_from_json
    )
    assert list(back) == [5, 1] and back[5].tolist() == [1.0, 2.0] and np.isnan(back[1][0])


def test_outcomes_and_groups_round_trip() -> None:
    o = Outcome(3, "pilot", np.array([1.0, 0.0]), np.array([12, 30]), 4, (10, 11))
    back = outcome_from_json(through_json(outcome_to_json(o)))
    assert (back.prompt_id, back.phase, back.policy_version, back.refs) == (3, "pilot", 4, (10, 11))
    assert back.rewards.tolist() == [1.0, 0.0] and back.num_tokens.tolist() == [12, 30]
    plain = Group(3, (10, 11), np.array([1.0, 0.0]))
    assert group_to_json(plain) == [3, [10, 11], [1.0, 0.0]]  # as written before baselines
    with_baseline = Group(3, (10, 11), np.array([1.0, 0.0]), baseline=0.375)
    for g in (plain, with_baseline):
        back = group_from_json(through_json(group_to_json(g)))
        assert (back.prompt_id, back.refs, back.baseline) == (g.prompt_id, g.refs, g.baseline)
        assert back.rewards.tolist() == g.rewards.tolist()


def test_prompt_history_keeps_the_last_values() -> None:
    history = PromptHistory(maxlen=3)
    history.extend(7, [1, 0])
    history.extend(2, [0.5])
    history.extend(7, [1, 1])
    assert history.get(7) == (0.0, 1.0, 1.0) and history.count(7) == 4
    assert history.get(99) == () and history.count(99) == 0 and 99 not in history
    assert history.prompts() == [7, 2] and len(history) == 2
    restored = PromptHistory(maxlen=3)
    restored.load_state_dict(through_json(history.state_dict()))
    assert restored.state_dict() == history.state_dict() and restored.get(7) == history.get(7)
    restored.append(2, 0.0)
    assert restored.get(2) == (0.5, 0.0)
    with pytest.raises(ValueError, match="maxlen 3, this one None"):
        PromptHistory().load_state_dict(history.state_dict())
    with pytest.raises(ValueError, match="maxlen"):
        PromptHistory(0)
    unbounded = PromptHistory()
    unbounded.extend(1, range(100))
    assert len(unbounded.get(1)) == 100
