"""PODS and Reinforce-Ada inside verl's real trainer on CPU, through ``rollcli run``.

One job each (tiny Qwen2 model, the coin-flip reward of verl-cpu.yaml, 2 steps each):
PODS generates 4 rollouts per prompt and verl trains the 2 of the max-variance subset;
Reinforce-Ada runs its rounds and verl trains every kept rollout on ``r - baseline`` (no std
division), where the baseline is the success rate over every rollout drawn for the prompt;
a second Reinforce-Ada job keeps one rollout per prompt, so verl trains groups of one rollout
(a group of one is trained only because it carries a baseline). The trace of each job
(``backend.trace_groups``) holds the asks with their rewards, the groups and the advantage of
every trained row, so the checks read what verl actually did. CI runs PODS and the
one-rollout Reinforce-Ada job; the two-rollout one runs with ``--verl-matrix``.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from rollcli.allocators.pods import max_variance_subsets

pytestmark = [
    pytest.mark.verl,
    pytest.mark.slow,
    pytest.mark.timeout(1200),  # one verl job beside another: run_allocator_job's CLI limit + 100 s
    pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs the verl extra"),
]


ALLOCATORS = {
    "pods": {"kind": "pods", "n": 4, "m": 2},  # 4 prompts, 16 generated, 8 trained
    "ada": {"kind": "reinforce_ada", "num_keep": 2, "round_repeat": 2, "max_rounds": 2},
    "ada1": {"kind": "reinforce_ada", "num_keep": 1, "round_repeat": 2, "max_rounds": 2},
}


def _drawn(step: dict) -> dict[int, list[float]]:
    """Every reward drawn for each prompt in this step, in generation order."""
    out: dict[int, list[float]] = {}
    for rnd in step["rounds"]:
        for (prompt, n, _phase, refs), rewards in zip(rnd["items"], rnd["rewards"], strict=True):
            assert len(refs) == len(rewards) == n
            out.setdefault(prompt, []).extend(rewards)
    return out


def test_pods_on_verl(trace, check_consistency, run_allocator_job):
    # one round of 4 prompts x 4; verl trains the max-variance 2 of each
    job = run_allocator_job("pods", ALLOCATORS["pods"], steps=2, rollouts_per_step=8)
    metrics = check_consistency(job, eval_steps={2}, initial_eval=True)
    assert [m["cum_rollouts"] for m in metrics] == [16, 32]
    assert [m["cum_rollouts_trained"] for m in metrics] == [8, 16]
    for step in trace(job):
        ((items, rewards),) = [(r["items"], r["rewards"]) for r in step["rounds"]]
        expected = [
            [refs[i] for i in max_variance_subsets(np.array(r), 2)]
            for (_p, _n, _ph, refs), r in zip(items, rewards, strict=True)
        ]
        assert [g["refs"] for g in step["groups"]] == expected
        assert all(g["baseline"] is None for g in step["groups"])
        assert step["trained"]["rows"] == 8


@pytest.mark.parametrize(
    ("name", "keep"), [("ada1", 1), pytest.param("ada", 2, marks=pytest.mark.verl_matrix)]
)
def test_reinforce_ada_on_verl(name, keep, trace, check_consistency, run_allocator_job):
    # every trained row's advantage is r - (success rate over all drawn)
    job = run_allocator_job(name, ALLOCATORS[name], steps=2, rollouts_per_step=8)
    singletons = 0
    metrics = check_consistency(job, eval_steps={2}, initial_eval=True)
    assert [m["step"] for m in metrics] == [1, 2]
    for step in trace(job):
        drawn = _drawn(step)
        assert 1 <= len(step["rounds"]) <= 2
        advantages = dict(zip(step["trained"]["refs"], step["trained"]["advantages"], strict=True))
        for g in step["groups"]:
            rewards = drawn[g["prompt_id"]]
            rate = sum(r > 0.7 for r in rewards) / len(rewards)
            assert g["baseline"] == pytest.approx(rate)
            assert 1 <= len(g["refs"]) <= keep
            singletons += len(g["refs"]) == 1
            for ref, r in zip(g["refs"], g["rewards"], strict=True):
                assert advantages[ref] == pytest.approx(r - rate, abs=1e-6)
    assert all(m["train/singleton_groups"] == 0 for m in metrics)  # none left out
    if keep == 1:
        assert singletons >= 16  # 8 prompts a step, each a group of one
