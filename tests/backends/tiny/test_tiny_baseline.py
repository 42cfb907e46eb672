"""The tiny backend honours a group's baseline: advantage r - b, no std division (Group.baseline)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rollcli.allocators.api import Ask, AskItem, Group
from rollcli.backends import create_backend
from rollcli.backends.tiny.grpo import group_advantages

from .conftest import micro_config


def test_advantages_with_baselines_hand_cases() -> None:
    grpo, based, single, flat = group_advantages(
        [np.array([1.0, 0.0]), np.array([1.0, 0.0, 0.0]), np.array([1.0]), np.ones(3)],
        baselines=[None, 0.25, 0.5, 0.75],
    )
    assert grpo.tolist() == pytest.approx([0.7071, -0.7071], abs=1e-4)  # GRPO, as before
    assert based.tolist() == [0.75, -0.25, -0.25]  # no mean, no std division
    assert single.tolist() == [0.5] and flat.tolist() == [0.25, 0.25, 0.25]
    (dr,) = group_advantages([np.array([1.0, 0.0])], std_normalize=False, baselines=[0.9])
    assert dr.tolist() == pytest.approx([0.1, -0.9])


@pytest.mark.parametrize("std_normalize", [True, False])
def test_update_trains_equal_rewards_against_their_baseline(
    tiny_cache: Path, std_normalize: bool
) -> None:
    backend = create_backend(micro_config(tiny_cache, std_normalize=std_normalize), seed=0)
    (outcome,) = backend.generate(Ask((AskItem(0, 4),)))
    weights = {k: v.clone() for k, v in backend.model.state_dict().items()}
    plain = backend.update([Group(0, outcome.refs, np.ones(4))])
    assert plain["skipped"] == 1.0 and plain["rows_forwarded"] == 0
    assert all(torch.equal(weights[k], v) for k, v in backend.model.state_dict().items())
    based = backend.update([Group(0, outcome.refs, np.ones(4), baseline=0.25)])
    assert based["skipped"] == 0.0 and based["rows_forwarded"] == 4
    assert based["adv_abs_mean"] == pytest.approx(0.75)
    assert not all(torch.equal(weights[k], v) for k, v in backend.model.state_dict().items())
