"""The verl trainer's advantage step honours a group's baseline (r - b, no std division) next to
verl's own GRPO estimator for the other groups, through padding and batch reordering."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytestmark = [
    pytest.mark.verl,  # importing verl's trainer module takes ~10 s of CPU
    pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs the verl extra"),
]


def _batch(rewards: list[float], uids: list[str], baselines: np.ndarray, length: int = 3):
    import torch
    from verl import DataProto

    n = len(rewards)
    scores = torch.zeros(n, length)
    mask = torch.ones(n, length)
    mask[0, 2] = 0  # a shorter response: the advantage covers its own tokens only
    for i, r in enumerate(rewards):
        last = int(mask[i].sum()) - 1
        scores[i, last] = r  # verl puts the outcome reward on the last response token
    return DataProto.from_dict(
        tensors={
            "token_level_rewards": scores,
            "token_level_scores": scores,
            "response_mask": mask,
        },
        non_tensors={"uid": np.array(uids, dtype=object), "rollcli_baseline": baselines},
    )


def test_baseline_rows_get_reward_minus_baseline_and_the_rest_grpo() -> None:
    import torch
    from omegaconf import OmegaConf

    from rollcli.backends.verl.advantages import baseline_column, compute_group_advantages

    # group a: GRPO over [1, 0]; group b: baseline 0.25 over [1, 1, 0]; group c: one rollout, 0.5
    rewards = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    uids = ["a", "a", "b", "b", "b", "c"]
    column = baseline_column([None, 0.25, 0.5], [2, 3, 1])
    assert np.isnan(column[:2]).all() and column[2:].tolist() == [0.25, 0.25, 0.25, 0.5]
    algorithm = OmegaConf.create({"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": True})
    batch = compute_group_advantages(_batch(rewards, uids, column), algorithm)
    adv = batch.batch["advantages"]
    mask = batch.batch["response_mask"]
    grpo = 0.5 / (np.sqrt(0.5) + 1e-6)  # (r - mean) / (sample std + eps) of [1, 0]
    expected = np.array([grpo, -grpo, 0.75, 0.75, -0.25, 0.5])[:, None] * mask.numpy()
    np.testing.assert_allclose(adv.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert batch.batch["returns"].numpy() == pytest.approx(adv.numpy())
    # rows keep their baseline when the batch is reordered (verl's balancing does this)
    reordered = _batch(rewards, uids, column)
    reordered.reorder(torch.tensor([5, 4, 3, 2, 1, 0]))
    again = compute_group_advantages(reordered, algorithm).batch["advantages"]
    assert again[0].sum().item() == pytest.approx(
        0.5 * reordered.batch["response_mask"][0].sum().item()
    )
    assert again[1].sum().item() == pytest.approx(-0.25 * 3)


def test_no_baselines_is_verl_unchanged() -> None:
    from omegaconf import OmegaConf
    from verl.trainer.ppo.ray_trainer import compute_advantage

    from rollcli.backends.verl.advantages import apply_baselines, compute_group_advantages

    algorithm = OmegaConf.create({"adv_estimator": "grpo"})
    rewards, uids = [1.0, 0.0, 0.0, 1.0], ["a", "a", "b", "b"]
    column = np.full(4, np.nan)
    ours = compute_group_advantages(_batch(rewards, uids, column), algorithm)
    theirs = compute_advantage(_batch(rewards, uids, column), adv_estimator="grpo")
    assert ours.batch["advantages"].equal(theirs.batch["advantages"])
    assert apply_baselines(theirs) == 0


def test_all_wrong_group_of_different_lengths_learns_only_from_the_shaped_reward() -> None:
    """Success vs training reward in verl's advantage step: the scores (rm_scores, what the
    allocator read) of an all-wrong group stay 0, the overlong penalty on each response's last
    token makes its training rewards differ, and verl's GRPO gives the longer answer the lower
    advantage; without shaping the group has zero advantage (tiny and sim: test_*shaping.py)."""
    from types import SimpleNamespace

    import torch
    from omegaconf import OmegaConf

    from rollcli.backends.verl.advantages import compute_group_advantages, shaped_token_rewards
    from rollcli.backends.verl.config import VerlConfig

    length = 8
    scores = torch.zeros(3, length)  # all wrong: every score is 0
    mask = torch.zeros(3, length)
    for row, n in enumerate((3, 6, 8)):  # responses of 3, 6 and 8 tokens
        mask[row, :n] = 1
    algorithm = OmegaConf.create({"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": True})
    config = VerlConfig(
        model="tiny", max_response_len=length, overlong_buffer_len=4, overlong_penalty_factor=1.0
    )
    uids = np.array(["g"] * 3, dtype=object)
    results = {}
    for name, backend in {
        "shaped": config,
        "plain": SimpleNamespace(
            **{"overlong_buffer_len": 0, "overlong_penalty_factor": 1.0, "max_response_len": length}
        ),
    }.items():
        rewards = shaped_token_rewards(scores, mask, backend)
        batch = _shaped_batch(rewards, scores, mask, uids)
        results[name] = (rewards, compute_group_advantages(batch, algorithm).batch["advantages"])
    rewards, adv = results["shaped"]
    assert scores.sum() == 0  # the success is untouched
    np.testing.assert_allclose(
        rewards.sum(-1).numpy(), [0.0, -0.5, -1.0]
    )  # DAPO: L_max 8, buffer 4
    assert rewards[1, 5] == -0.5 and rewards[2, 7] == -1.0  # on each response's last token
    per_row = (adv * mask).sum(-1) / mask.sum(-1)
    assert per_row[0] > per_row[1] > per_row[2]
    assert not results["plain"][1].any()


def _shaped_batch(rewards, scores, mask, uids):
    from verl import DataProto

    return DataProto.from_dict(
        tensors={
            "token_level_rewards": rewards,
            "token_level_scores": scores,
            "response_mask": mask,
        },
        non_tensors={"uid": uids, "rollcli_baseline": np.full(len(uids), np.nan)},
    )


def test_all_wrong_group_with_well_formed_answers_learns_from_the_format_score() -> None:
    """format_score in verl's advantage step: the scores of an all-wrong group stay 0 (what the
    allocator read), the boxed-but-wrong responses get +f on their last token, so verl's GRPO
    ranks them above the unformatted one; a right answer is not paid twice."""
    import torch
    from omegaconf import OmegaConf

    from rollcli.backends.verl.advantages import compute_group_advantages, shaped_token_rewards
    from rollcli.backends.verl.config import VerlConfig

    length = 6
    mask = torch.ones(4, length)
    mask[1, 4:] = 0  # a 4-token response: the bonus goes on its own last token
    scores = torch.zeros(4, length)
    config = VerlConfig(model="tiny", max_response_len=length, format_score=0.1)
    flags = np.array([1.0, 1.0, 0.0, 1.0])
    rewards = shaped_token_rewards(scores, mask, config, flags)
    assert scores.sum() == 0
    np.testing.assert_allclose(rewards.sum(-1).numpy(), [0.1, 0.1, 0.0, 0.1], rtol=1e-6)
    assert rewards[1, 3] == pytest.approx(0.1) and rewards[0, 5] == pytest.approx(0.1)
    uids = np.array(["g"] * 4, dtype=object)
    algorithm = OmegaConf.create({"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": True})
    adv = compute_group_advantages(_shaped_batch(rewards, scores, mask, uids), algorithm)
    per_row = (adv.batch["advantages"] * mask).sum(-1) / mask.sum(-1)
    assert per_row[2] < 0 < per_row[0]  # the unformatted answer is pushed down
    right = scores.clone()
    right[0, length - 1] = 1.0  # a right, well-formed answer keeps exactly 1
    assert shaped_token_rewards(right, mask, config, flags).sum(-1)[0].item() == 1.0
    with pytest.raises(ValueError, match="no format flags"):
        shaped_token_rewards(scores, mask, config, None)
    off = VerlConfig(model="tiny", max_response_len=length)
    assert shaped_token_rewards(scores, mask, off, flags) is scores


def test_all_failing_group_learns_from_its_fractions_of_tests_passed() -> None:
    """code_partial_credit in verl's advantage step: the scores of an all-failing group stay 0
    (what the allocator read), each solution gets w x its fraction of tests passed on its last
    token, so verl's GRPO ranks the one passing more tests higher; a passing solution stays 1."""
    import torch
    from omegaconf import OmegaConf

    from rollcli.backends.verl.advantages import compute_group_advantages, shaped_token_rewards
    from rollcli.backends.verl.config import VerlConfig

    length = 6
    mask = torch.ones(4, length)
    mask[1, 3:] = 0  # a 3-token response: the credit goes on its own last token
    scores = torch.zeros(4, length)
    config = VerlConfig(
        model="tiny", max_response_len=length, reward="code", code_partial_credit=0.5
    )
    passed = np.array([0.5, 0.75, 0.0, 0.25])
    rewards = shaped_token_rewards(scores, mask, config, np.zeros(4), passed)
    assert scores.sum() == 0
    np.testing.assert_allclose(rewards.sum(-1).numpy(), [0.25, 0.375, 0.0, 0.125], rtol=1e-6)
    assert rewards[1, 2] == pytest.approx(0.375) and rewards[0, 5] == pytest.approx(0.25)
    uids = np.array(["g"] * 4, dtype=object)
    algorithm = OmegaConf.create({"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": True})
    adv = compute_group_advantages(_shaped_batch(rewards, scores, mask, uids), algorithm)
    per_row = (adv.batch["advantages"] * mask).sum(-1) / mask.sum(-1)
    assert per_row[2] < per_row[3] < 0 < per_row[0] < per_row[1]
    right = scores.clone()
    right[0, length - 1] = 1.0  # a passing solution keeps exactly 1
    assert shaped_token_rewards(right, mask, config, None, passed).sum(-1)[0].item() == 1.0
    with pytest.raises(ValueError, match="no tests-passed column"):
        shaped_token_rewards(scores, mask, config, None, None)


def test_rl_zvp_reshapes_only_zero_variance_groups() -> None:
    """RL-ZVP (eq. 5): all-right group: alpha * H_t; all-wrong: -alpha * (max H - H_t); a
    mixed group keeps verl's GRPO, a baseline group its r - b, a pad row stays 0."""
    import torch
    from omegaconf import OmegaConf

    from rollcli.backends.verl.advantages import apply_rl_zvp, compute_group_advantages

    rewards = [1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    uids = ["right", "right", "wrong", "wrong", "mixed", "mixed", "based", "based", "pad8"]
    column = np.array([np.nan] * 6 + [0.5, 0.5, np.nan])
    batch = _batch(rewards, uids, column)
    batch.batch["response_mask"][8] = 0  # a pad row: no response tokens
    algorithm = OmegaConf.create({"adv_estimator": "grpo", "norm_adv_by_std_in_grpo": True})
    batch = compute_group_advantages(batch, algorithm)
    before = batch.batch["advantages"].clone()
    entropys = torch.tensor(np.random.default_rng(0).uniform(0.0, 2.0, (9, 3)), dtype=torch.float32)
    assert apply_rl_zvp(batch, entropys, 0.5) == 4
    adv, mask = batch.batch["advantages"], batch.batch["response_mask"]
    for row in range(4):
        h = entropys[row][mask[row] > 0]
        want = 0.5 * h if rewards[row] > 0.5 else -0.5 * (h.max() - h)
        torch.testing.assert_close(adv[row][mask[row] > 0], want)
        assert adv[row][mask[row] == 0].abs().sum() == 0
    assert adv[4:].equal(before[4:])  # mixed (GRPO), baseline and pad rows unchanged
    assert batch.batch["returns"][:4].equal(adv[:4])
