"""The sim backend honours a group's baseline: advantage r - b, no std division (Group.baseline)."""

from __future__ import annotations

import numpy as np
import pytest

from rollcli.allocators.api import Ask, AskItem, Group
from rollcli.backends.sim import create_sim_backend
from rollcli.backends.sim.backend import SimBackend

SMALL = {"kind": "sim", "num_train_prompts": 128, "num_eval_prompts": 64}


def make(**knobs: object) -> SimBackend:
    # one optimiser step per update, so theta moves by lr times the whole batch's gradient
    config = {**SMALL, "optimizer": "sgd", "lr": 0.1, "score_noise": 0.0, "num_minibatches": 1}
    return create_sim_backend({**config, **knobs}, seed=0)


def outcome_with(backend: SimBackend, prompt: int, rewards: list[float]):
    for _ in range(500):
        (outcome,) = backend.generate(Ask((AskItem(prompt, len(rewards)),)))
        if outcome.rewards.tolist() == rewards:
            return outcome
    pytest.fail(f"no {rewards} group for prompt {prompt} in 500 tries")


@pytest.mark.parametrize("std_normalize", [True, False])
def test_baseline_group_next_to_a_grpo_group_matches_the_hand_computed_step(
    std_normalize: bool,
) -> None:
    backend = make(std_normalize=std_normalize)
    mixed = outcome_with(backend, 3, [1.0, 0.0, 0.0, 0.0])
    solved = outcome_with(backend, 5, [1.0, 1.0, 1.0, 1.0])
    (p5,) = backend.success_probabilities(np.array([5]))
    grpo = Group(3, mixed.refs, mixed.rewards)
    based = Group(5, solved.refs, solved.rewards, baseline=0.25)
    metrics = backend.update([grpo, based])
    # GRPO group: sum_j A_j (r_j - p) is 1.5 with std division (A = 1.5, -.5, -.5, -.5), else
    # 0.75 (A = .75, -.25, ...), for any p. Baseline group: A = 1 - 0.25 = 0.75 on each of the
    # 4 rollouts, whatever std_normalize says, so its sum is 4 * 0.75 * (1 - p5). 8 rollouts.
    signal = ((1.5 if std_normalize else 0.75) + 4 * 0.75 * (1 - p5)) / 8
    assert metrics["signal_norm"] == pytest.approx(signal, rel=1e-6)
    assert backend.theta[0] == pytest.approx(0.1 * signal, rel=1e-6)
    assert metrics["informative_groups"] == 2.0
    assert metrics["adv_abs_mean"] == pytest.approx(
        ((np.array([3, 1, 1, 1]) * (0.5 if std_normalize else 0.25)).sum() + 3.0) / 8, rel=1e-5
    )


def test_without_a_baseline_a_solved_group_teaches_nothing_and_with_one_it_does() -> None:
    plain, based = make(), make()
    for backend, baseline in ((plain, None), (based, 0.5)):
        solved = outcome_with(backend, 5, [1.0, 1.0, 1.0])
        metrics = backend.update([Group(5, solved.refs, solved.rewards, baseline=baseline)])
        assert metrics["informative_groups"] == (0.0 if baseline is None else 1.0)
    start = make().theta[0]
    assert plain.theta[0] == start  # zero gradient: plain SGD does not move
    assert based.theta[0] > start  # r - b > 0 on solved rollouts: the ability goes up
    # a group of one rollout has no GRPO baseline (advantage 0) but learns against its own
    single = make()
    (outcome,) = single.generate(Ask((AskItem(7, 1),)))
    metrics = single.update([Group(7, outcome.refs, outcome.rewards, baseline=0.5)])
    assert metrics["adv_abs_mean"] == 0.5 and metrics["informative_groups"] == 1.0
