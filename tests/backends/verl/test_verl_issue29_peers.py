"""CurES, DPS and BOTS inside verl's real trainer on CPU, through ``rollcli run`` (issue 29).

One spec, three jobs (tiny Qwen2 model, the coin-flip reward of verl-cpu.yaml, a pool of 8
prompts so that prompts come back, 3 steps of 16 rollouts): CurES asks uneven per-prompt
counts that verl must generate and train as they are; DPS and BOTS choose the step's prompts
from their posteriors and give each ``n``. The trace (``backend.trace_groups``) holds what verl
generated and trained, so the checks read what verl actually did.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

pytestmark = [
    pytest.mark.verl,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs the verl extra"),
]

ROOT = Path(__file__).resolve().parents[3]
ALLOCATORS = {
    # temperature 0.01: the draw follows the posterior; exact rounding keeps 16 a step
    "cures": {"kind": "cures", "n_mean": 4, "temperature": 0.01, "rounding": "exact"},
    "dps": {"kind": "dps", "n": 4, "candidate_factor": 2.0},
    "bots": {"kind": "bots", "n": 4},
}


def _spec(folder: Path) -> Path:
    base = yaml.safe_load((ROOT / "experiments" / "verl-cpu.yaml").read_text())
    spec = {
        "name": "verl-cpu-issue29",
        "extends": "base",
        "backend": {**base["backend"], "train_max_samples": 8},
        "budget": {"steps": 3, "rollouts_per_step": 16},
        "allocators": ALLOCATORS,
        "seeds": [0],
        "eval": {"every": 3, "suite": ["math500"], "samples": 2},
        "target": {"baseline": "bots", "metric": "accuracy", "at": "final"},
        "launch": {"executor": "local", "max_parallel": 1},
        "checkpoint": {"every": 1},
        "tracking": {"wandb": {"mode": "disabled"}},
    }
    path = folder / "verl-cpu-issue29.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.timeout(1500)  # three verl jobs in a row, as the CLI timeout below allows
def test_cures_dps_and_bots_on_verl(tmp_path, trace, check_consistency, run_train_jobs):
    jobs = run_train_jobs(_spec(tmp_path), tmp_path / "runs", timeout=1500)
    for name in ALLOCATORS:
        metrics = check_consistency(jobs[name], eval_steps={3}, initial_eval=True)
        assert [m["cum_rollouts"] for m in metrics] == [16, 32, 48], name
        assert [m["cum_rollouts_trained"] for m in metrics] == [16, 32, 48], name
        for step in trace(jobs[name]):
            ((rnd,),) = [step["rounds"]]  # one generation call per step
            asked = [(p, n) for p, n, _ph, _refs in rnd["items"]]
            # every asked prompt's rollouts train as one group, as generated
            assert [(g["prompt_id"], len(g["refs"])) for g in step["groups"]] == asked, name
            if name != "cures":
                assert {n for _p, n in asked} == {4} and len(asked) == 4, name
