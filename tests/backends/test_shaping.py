"""Success vs training reward: DAPO's overlong penalty as published, the knobs, and on sim an
all-wrong group whose responses differ in length stays zero-variance for the allocator, its
filter and the ledger (they read the success) while the advantage, which uses the shaped
training reward, tells its rollouts apart (tiny: tests/backends/tiny/test_tiny_shaping.py;
verl: tests/backends/verl/test_verl_advantages.py)."""

from __future__ import annotations

import numpy as np
import pytest

from rollcli.allocators import create_allocator
from rollcli.allocators.api import Ask, AskItem, BudgetLedger, Group
from rollcli.backends.shaping import (
    check_format_score,
    check_partial_credit,
    format_bonus,
    overlong_penalty,
    partial_credit_bonus,
    training_rewards,
)
from rollcli.backends.sim import create_sim_backend
from rollcli.backends.sim.config import SimConfig
from rollcli.backends.tiny.config import TinyConfig
from rollcli.backends.verl.config import VerlConfig
from rollcli.spec.models import omit_late_knobs
from rollcli.train.loop import TrainLoop


def test_overlong_penalty_is_dapos():
    # L_max 20, buffer 8: free up to 12 tokens, then linear down to -factor at 20 (and beyond)
    lengths = np.array([1, 12, 13, 16, 20, 24])
    got = overlong_penalty(lengths, max_len=20, buffer_len=8, penalty_factor=1.0)
    np.testing.assert_allclose(got, [0, 0, -1 / 8, -0.5, -1.0, -1.5])
    shaped = training_rewards(
        np.array([1.0, 0.0]), np.array([16, 16]), max_len=20, overlong_buffer_len=8
    )
    np.testing.assert_allclose(shaped, [0.5, -0.5])
    off = training_rewards(np.array([1.0, 0.0]), np.array([30, 30]), max_len=20)
    np.testing.assert_array_equal(off, [1.0, 0.0])


def test_knobs_are_checked_and_left_out_of_dumps_at_their_defaults():
    with pytest.raises(ValueError, match="sim backend: overlong_buffer_len must be an integer"):
        create_sim_backend({"kind": "sim", "max_tokens": 100, "overlong_buffer_len": 100}, seed=0)
    with pytest.raises(ValueError, match="tiny backend: overlong_penalty_factor"):
        TinyConfig(overlong_buffer_len=2, overlong_penalty_factor=-1.0)
    assert omit_late_knobs(SimConfig, {"lr": 1, "overlong_buffer_len": 0}) == {"lr": 1}
    kept = {"overlong_buffer_len": 4, "overlong_penalty_factor": 1.0}
    assert omit_late_knobs(TinyConfig, kept) == {"overlong_buffer_len": 4}


def _all_wrong_with_different_lengths(outcomes):
    for outcome in outcomes:
        if not outcome.rewards.any() and np.ptp(outcome.num_tokens) > 0:
            return outcome
    raise AssertionError("no all-wrong group with different lengths was generated")


def _ledger_sees_zero_variance(outcome) -> None:
    ledger = BudgetLedger()
    ledger.record([outcome])
    assert ledger.step_zero_variance_groups == 1


def test_sim_all_wrong_group_is_flat_for_the_allocator_and_shaped_for_the_advantage():
    knobs = {"kind": "sim", "num_train_prompts": 64, "num_eval_prompts": 16, "max_tokens": 4000}
    knobs |= {"difficulty_mean": 4.0, "length_sigma": 0.5}  # mostly wrong, spread lengths
    shaped = create_sim_backend({**knobs, "overlong_buffer_len": 3000}, seed=0)
    plain = create_sim_backend(knobs, seed=0)
    ask = Ask(tuple(AskItem(i, 8) for i in range(64)))
    outcomes = shaped.generate(ask)
    assert [o.rewards.tolist() for o in plain.generate(ask)] == [
        o.rewards.tolist() for o in outcomes
    ]  # shaping changes no draw
    flat = _all_wrong_with_different_lengths(outcomes)
    _ledger_sees_zero_variance(flat)
    group = Group(flat.prompt_id, flat.refs, flat.rewards)
    assert group.reward_variance == 0.0
    metrics = shaped.update([group])
    assert metrics["informative_groups"] == 1 and metrics["adv_abs_mean"] > 0
    assert metrics["shaped_reward_mean"] < 0  # success 0, minus the penalties
    assert plain.update([group])["informative_groups"] == 0
    assert plain.update([group])["informative_groups"] == 0


def test_sim_dynamic_sampling_filters_on_success_with_shaping_on():
    """DAPO's filter inside the real step loop: no trained group is all-wrong or all-right
    although every generated group's shaped rewards differ (lengths are spread)."""
    knobs = {"kind": "sim", "num_train_prompts": 256, "num_eval_prompts": 16, "max_tokens": 4000}
    knobs |= {"length_sigma": 0.5, "overlong_buffer_len": 3000}
    backend = create_sim_backend(knobs, seed=0)
    dapo = create_allocator(
        {"kind": "dynamic", "n": 8, "on_max_gen_batches": "train"},
        num_prompts=256,
        rollouts_per_step=64,
        seed=0,
    )
    row = TrainLoop(backend, dapo, num_steps=1, eval_every=None).run_step()
    assert row["zero_var_frac"] > 0  # the ledger counted flat groups among the generated
    assert row["prompts_trained"] > 0 and row["reward_var"] > 0
    assert "train/shaped_reward_mean" in row


def _flat_all_wrong_outcome():
    """Four failed rollouts of one prompt, checked zero-variance for the ledger and its group."""
    from rollcli.allocators.api import Outcome

    outcome = Outcome(
        prompt_id=0,
        phase="main",
        rewards=np.zeros(4),
        num_tokens=np.full(4, 10, dtype=np.int64),
        policy_version=0,
        refs=(0, 1, 2, 3),
    )
    _ledger_sees_zero_variance(outcome)
    assert Group(0, outcome.refs, outcome.rewards).reward_variance == 0.0
    return outcome


def test_format_score_pays_wrong_well_formed_answers_only():
    """verl's format_score: a wrong response in the expected form earns f, a wrong one without
    it 0, a right one 1 (not 1 + f); with the overlong penalty both add up."""
    success = np.array([1.0, 1.0, 0.0, 0.0])
    formatted = np.array([1.0, 0.0, 1.0, 0.0])
    np.testing.assert_allclose(format_bonus(success, formatted, 0.1), [0, 0, 0.1, 0])
    got = training_rewards(
        success, np.full(4, 5), max_len=20, format_score=0.1, formatted=formatted
    )
    np.testing.assert_allclose(got, [1.0, 1.0, 0.1, 0.0])
    both = training_rewards(
        success,
        np.array([5, 5, 16, 16]),
        max_len=20,
        overlong_buffer_len=8,
        format_score=0.1,
        formatted=formatted,
    )
    np.testing.assert_allclose(both, [1.0, 1.0, -0.4, -0.5])
    with pytest.raises(ValueError, match="format flag"):
        training_rewards(success, np.full(4, 5), max_len=20, format_score=0.1)
    with pytest.raises(ValueError, match="verl backend: format_score must be a number in"):
        check_format_score("verl", 1.0)
    assert omit_late_knobs(VerlConfig, {"format_score": 0.0, "lr": 1}) == {"lr": 1}


def test_all_wrong_group_is_flat_for_the_allocator_while_format_scores_differ():
    """The success vs training reward pattern for the format score: an all-wrong group, some of
    its answers well-formed, is zero-variance for the ledger and its group (what filters read)
    while its training rewards differ (verl's advantage step: test_verl_advantages.py)."""
    outcome = _flat_all_wrong_outcome()
    success = outcome.rewards
    shaped = training_rewards(
        success, outcome.num_tokens, max_len=20, format_score=0.1, formatted=[1, 0, 1, 1]
    )
    assert np.ptp(shaped) > 0 and shaped.tolist() == [0.1, 0.0, 0.1, 0.1]


def test_code_partial_credit_pays_failing_solutions_by_their_fraction_of_tests():
    """code_partial_credit w: a failing solution earns w x its fraction of tests passed, a
    passing one stays exactly 1 (not 1 + w), a timed-out one (fraction 0) 0; with the format
    score both add up, and the knobs are checked."""
    success = np.array([1.0, 0.0, 0.0, 0.0])
    passed = np.array([1.0, 0.5, 0.0, 0.75])
    np.testing.assert_allclose(partial_credit_bonus(success, passed, 0.4), [0, 0.2, 0, 0.3])
    got = training_rewards(
        success, np.full(4, 5), max_len=20, partial_credit=0.4, tests_passed=passed
    )
    np.testing.assert_allclose(got, [1.0, 0.2, 0.0, 0.3])
    both = training_rewards(
        success,
        np.full(4, 5),
        max_len=20,
        format_score=0.1,
        formatted=np.ones(4),
        partial_credit=0.4,
        tests_passed=passed,
    )
    np.testing.assert_allclose(both, [1.0, 0.3, 0.1, 0.4])
    with pytest.raises(ValueError, match="fraction of tests"):
        training_rewards(success, np.full(4, 5), max_len=20, partial_credit=0.4)
    with pytest.raises(ValueError, match="verl backend: code_partial_credit must be a number"):
        check_partial_credit("verl", 1.0)
    with pytest.raises(ValueError, match=r"code_partial_credit \+ format_score must be <= 1"):
        check_partial_credit("verl", 0.7, 0.4)
    check_partial_credit("verl", 0.6, 0.4)  # a failing solution still earns < 1
    assert omit_late_knobs(VerlConfig, {"code_partial_credit": 0.0, "lr": 1}) == {"lr": 1}


def test_all_wrong_group_is_flat_for_the_allocator_while_partial_credits_differ():
    """The success vs training reward pattern for partial credit: an all-failing group whose
    solutions pass different shares of their tests is zero-variance for the ledger and its
    group while its training rewards differ."""
    outcome = _flat_all_wrong_outcome()
    success = outcome.rewards
    shaped = training_rewards(
        success,
        outcome.num_tokens,
        max_len=20,
        partial_credit=0.5,
        tests_passed=[0.5, 0.0, 0.25, 0.75],
    )
    assert np.ptp(shaped) > 0 and shaped.tolist() == [0.25, 0.0, 0.125, 0.375]
