"""CurES, DPS and BOTS inside verl's real trainer on CPU, through ``rollcli run`` (issue 29).

One job per allocator (tiny Qwen2 model, the coin-flip reward of verl-cpu.yaml, a pool of 8
prompts so that prompts come back, 3 steps of 16 rollouts): CurES asks uneven per-prompt
counts that verl must generate and train as they are; DPS and BOTS choose the step's prompts
from their posteriors and give each ``n``. The trace (``backend.trace_groups``) holds what verl
generated and trained, so the checks read what verl actually did.

CI runs CurES (uneven counts in one ask); DPS and BOTS ask ``n`` each of the prompts they pick,
as uniform does: they run with ``--verl-matrix``.
"""

from __future__ import annotations

import importlib.util

import pytest

pytestmark = [
    pytest.mark.verl,
    pytest.mark.slow,
    pytest.mark.timeout(1200),  # one verl job beside another: run_allocator_job's CLI limit + 100 s
    pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs the verl extra"),
]

ALLOCATORS = {
    # temperature 0.01: the draw follows the posterior; exact rounding keeps 16 a step
    "cures": {"kind": "cures", "n_mean": 4, "temperature": 0.01, "rounding": "exact"},
    "dps": {"kind": "dps", "n": 4, "candidate_factor": 2.0},
    "bots": {"kind": "bots", "n": 4},
}


@pytest.mark.parametrize(
    "name", ["cures", *(pytest.param(n, marks=pytest.mark.verl_matrix) for n in ("dps", "bots"))]
)
def test_cures_dps_and_bots_on_verl(name, trace, check_consistency, run_allocator_job):
    job = run_allocator_job(
        name, ALLOCATORS[name], steps=3, rollouts_per_step=16, train_max_samples=8
    )
    metrics = check_consistency(job, eval_steps={3}, initial_eval=True)
    assert [m["cum_rollouts"] for m in metrics] == [16, 32, 48]
    assert [m["cum_rollouts_trained"] for m in metrics] == [16, 32, 48]
    for step in trace(job):
        ((rnd,),) = [step["rounds"]]  # one generation call per step
        asked = [(p, n) for p, n, _ph, _refs in rnd["items"]]
        # every asked prompt's rollouts train as one group, as generated
        assert [(g["prompt_id"], len(g["refs"])) for g in step["groups"]] == asked
        if name != "cures":
            assert {n for _p, n in asked} == {4} and len(asked) == 4
