"""Knapsack RL and SPEED inside verl's real trainer on CPU, through ``rollcli run``.

One job each (tiny Qwen2 model, the coin-flip reward of verl-cpu.yaml, a pool of 8
prompts so that prompts come back): Knapsack gives every prompt ``n`` until it has enough
history, then splits the step's rollouts unevenly by its DP, and verl must generate and train
exactly those per-prompt counts; SPEED screens new prompts and continues survivors in the
next generation call, and verl trains each prompt's screen and continuation as one group
(one uid), including steps that train prompts completed earlier without generating. The trace
(``backend.trace_groups``) holds what verl generated and trained, so the checks read what verl
actually did. CI runs SPEED (asks carried into the next generation call, steps that generate
nothing); Knapsack's uneven counts in one ask, as CurES's, run with ``--verl-matrix``.
"""

from __future__ import annotations

import importlib.util
from collections import Counter

import numpy as np
import pytest

from rollcli.allocators.knapsack_dp import knapsack_budget

pytestmark = [
    pytest.mark.verl,
    pytest.mark.slow,
    pytest.mark.timeout(1200),  # one verl job beside another: run_allocator_job's CLI limit + 100 s
    pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs the verl extra"),
]

KNAPSACK = {"kind": "knapsack", "n": 4, "max_n": 10, "min_buffer_length": 4}
SPEED = {"kind": "speed", "n_screen": 2, "n_continue": 6, "gen_batch_factor": 4}


BUDGET = {"steps": 4, "rollouts_per_step": 16, "train_max_samples": 8}


@pytest.mark.verl_matrix
def test_knapsack_on_verl(trace, check_consistency, run_allocator_job):
    job = run_allocator_job("knapsack", KNAPSACK, **BUDGET)
    # Knapsack: 4 prompts a step, 16 rollouts; steps 1-2 visit all 8 prompts with n = 4 each,
    # steps 3-4 revisit them (4 rewards >= min_buffer_length) and the DP splits the 16
    metrics = check_consistency(job, eval_steps={4}, initial_eval=True)
    assert [m["cum_rollouts"] for m in metrics] == [16, 32, 48, 64]
    assert [m["cum_rollouts_trained"] for m in metrics] == [16, 32, 48, 64]
    steps = trace(job)
    seen: dict[int, list[float]] = {}
    uneven = 0
    for step in steps:
        ((rnd,),) = [step["rounds"]]  # one generation call per step
        counts = [n for _p, n, _ph, _refs in rnd["items"]]
        prompts = [p for p, _n, _ph, _refs in rnd["items"]]
        ready = np.array([len(seen.get(p, [])) >= 4 for p in prompts])
        p_hat = np.array(
            [np.mean(seen[p][-16:]) if r else 0.0 for p, r in zip(prompts, ready, strict=True)]
        )
        want = knapsack_budget(p_hat, ready, n=4, max_n=10).budget.tolist()
        assert counts == [k for k in want if k > 0] and sum(counts) == 16
        uneven += len(set(counts)) > 1
        # every prompt's rollouts are one trained group, as generated
        assert [(g["prompt_id"], len(g["refs"])) for g in step["groups"]] == list(
            zip(prompts, counts, strict=True)
        )
        for g in step["groups"]:
            seen.setdefault(g["prompt_id"], []).extend(g["rewards"])
    assert uneven >= 1, "the DP never split a step unevenly"


def test_speed_on_verl(trace, check_consistency, run_allocator_job):
    # B = 16 // 8 = 2 prompts a step, the 8-prompt pool screened each call; a survivor's
    # screen and continuation train together; extra complete prompts train in a later step
    # that generates nothing
    job = run_allocator_job("speed", SPEED, **BUDGET)
    metrics = check_consistency(job, eval_steps={4}, initial_eval=True)
    steps = trace(job)
    phase_of = {}
    for step in steps:
        for rnd in step["rounds"]:
            for _p, n, phase, refs in rnd["items"]:
                assert n == {"screen": 2, "continue": 6}[phase]
                phase_of.update({r: phase for r in refs})
        for g in step["groups"]:
            assert Counter(phase_of[r] for r in g["refs"]) == {"screen": 2, "continue": 6}
        assert len(step["groups"]) == 2
    assert [m["rollouts_trained"] for m in metrics] == [16, 16, 16, 16]
    carried = [m for m in metrics if m["step_rollouts"] == 0]
    assert carried and all(m["prompts_trained"] == 2 for m in carried)
