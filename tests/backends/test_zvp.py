"""RL-ZVP's advantage against the paper's formula (arXiv 2509.21880, eq. 5, as transcribed):

    zero-variance group, response right:  A_t =  alpha * H_t
    zero-variance group, response wrong:  A_t = -alpha * (max_k H_k - H_t)
    any other group:                      GRPO's advantage (unchanged)

H_t: the detached entropy of the policy's next-token distribution at response token t; the max
runs over that response's tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rollcli.backends.zvp import check_zvp, rl_zvp_advantages, zero_variance_rows


def _formula(correct: bool, h: list[float], alpha: float) -> list[float]:
    if correct:
        return [alpha * x for x in h]
    return [-alpha * (max(h) - x) for x in h]


def test_token_advantages_follow_the_formula() -> None:
    rng = np.random.default_rng(0)
    entropy = torch.tensor(rng.uniform(0.0, 3.0, (4, 6)), dtype=torch.float32)
    lengths = [6, 3, 5, 1]
    mask = torch.zeros(4, 6)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1.0
    correct = [True, False, False, True]
    got = rl_zvp_advantages(torch.tensor(correct), entropy, mask, 0.3)
    for b, n in enumerate(lengths):
        h = entropy[b, :n].tolist()
        assert got[b, :n].tolist() == pytest.approx(_formula(correct[b], h, 0.3), abs=1e-6)
        assert got[b, n:].abs().sum() == 0  # nothing off the response
    # the wrong response's most confident token is pushed hardest; its least confident not at all
    row = got[1, :3]
    assert float(row.max()) == 0.0 and float(row.min()) < 0.0
    assert bool((got[[0, 3]] >= 0).all()) and bool((got[[1, 2]] <= 0).all())


def test_entropy_is_detached() -> None:
    entropy = torch.tensor([[0.5, 1.0]], requires_grad=True)
    out = rl_zvp_advantages(torch.tensor([True]), entropy, torch.ones(1, 2), 1.0)
    assert not out.requires_grad


def test_zero_variance_rows_are_grpo_zero_groups() -> None:
    ids = ["a", "a", "b", "b", "b", "c", "d", "d"]
    rewards = [1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    eligible = [True, True, True, True, True, True, False, False]
    rows = zero_variance_rows(ids, rewards, eligible)
    # a: all right (flat); b: mixed; c: one rollout; d: flat but carries a baseline
    assert rows.tolist() == [True, True, False, False, False, False, False, False]


@pytest.mark.parametrize(
    ("mode", "alpha", "match"),
    [("on", 0.1, "zero_variance_advantage"), ("rl_zvp", 0.0, "rl_zvp_alpha"),
     ("rl_zvp", float("nan"), "rl_zvp_alpha"), ("rl_zvp", True, "rl_zvp_alpha")],
)  # fmt: skip
def test_bad_knobs_name_themselves(mode: str, alpha: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        check_zvp("tiny", mode, alpha)
    check_zvp("tiny", "rl_zvp", 0.5)
