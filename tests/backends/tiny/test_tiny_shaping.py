"""Success vs training reward on tiny: an all-wrong group whose answers differ in length stays
zero-variance for the allocator and the ledger while the advantage, from the shaped training
reward (DAPO's overlong penalty), trains on it (sim and the shaping itself:
tests/backends/test_shaping.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rollcli.allocators.api import Ask, AskItem, BudgetLedger, Group
from rollcli.backends import create_backend
from rollcli.backends.shaping import overlong_penalty

from .conftest import micro_config


def test_tiny_all_wrong_group_is_flat_for_the_allocator_and_shaped_for_the_advantage(
    tiny_cache: Path,
):
    # the micro base model is always wrong: every group is all-wrong, answers of 1..4 tokens
    config = micro_config(tiny_cache, overlong_buffer_len=4, overlong_penalty_factor=1.0)
    shaped = create_backend(config, seed=0)
    outcomes = shaped.generate(Ask(tuple(AskItem(i, 8) for i in range(16))))
    flat = next(o for o in outcomes if not o.rewards.any() and np.ptp(o.num_tokens) > 0)
    ledger = BudgetLedger()
    ledger.record([flat])
    assert ledger.step_zero_variance_groups == 1
    group = Group(flat.prompt_id, flat.refs, flat.rewards)
    penalty = overlong_penalty(
        flat.num_tokens, max_len=shaped.max_new_tokens, buffer_len=4, penalty_factor=1.0
    )
    assert np.ptp(penalty) > 0, (flat.num_tokens, shaped.max_new_tokens)
    np.testing.assert_allclose(shaped._training_rewards(group), penalty)
    metrics = shaped.update([group])
    assert metrics["rows_forwarded"] > 0 and metrics["optimizer_steps"] > 0
    plain = create_backend(micro_config(tiny_cache), seed=0)
    plain.generate(Ask(tuple(AskItem(i, 8) for i in range(16))))
    assert plain.update([group])["rows_forwarded"] == 0
