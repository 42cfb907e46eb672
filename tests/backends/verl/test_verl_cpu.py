"""verl's real trainer on CPU with a tiny Qwen2 model: Pilot-Commit (with resume) and VIGOR.

(uniform runs through ``rollcli run experiments/verl-cpu.yaml`` in test_experiments.py, with the
same checks.) One private Ray cluster serves the whole module. Each job runs verl's legacy trainer through
:func:`rollcli.backends.verl.run_train_job` with ``trace_groups`` on, and the tests check that
what verl generated and trained is exactly what the allocator asked for and grouped: every ask
item became that many generated rows of that prompt, every trained row carries its group's uid
(pilot and commit rollouts of a prompt under one uid), its prompt and the reward the allocator
was told, and the ledger in ``metrics.jsonl`` counts every generated rollout. The reward is
:func:`rollcli.backends.verl.rewards.toy_reward` (a fair coin per response): a random tiny model
never solves MATH, and the allocators need variance to act on.
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

pytestmark = [
    pytest.mark.verl,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs the verl extra"),
]

BACKEND = {
    "kind": "verl",
    "device": "cpu",
    "model": "tiny",
    "train_data": "math_train",
    "train_max_samples": 48,
    "val_max_samples": 2,
    "max_prompt_len": 384,
    "max_response_len": 12,
    "lr": 1.0e-4,
    "reward": "rollcli.backends.verl.rewards:toy_reward",
    "trace_groups": True,
    "val_before_train": False,
}


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    from rollcli.backends.verl.runner import init_cpu_ray

    init_cpu_ray()
    yield
    ray.shutdown()


def write_job(job_dir: Path, allocator: dict, *, steps: int, rollouts: int, **backend) -> Path:
    job_dir.mkdir(parents=True, exist_ok=True)
    config = {
        "experiment": "verl-cpu-test",
        "job": {"id": job_dir.name, "type": "train", "allocator": allocator["kind"], "seed": 0},
        "backend": {**BACKEND, **backend},
        "allocator": allocator,
        "budget": {"steps": steps, "rollouts_per_step": rollouts},
        "eval": {"suite": ["math500"], "every": 2, "samples": 2},
        "checkpoint": {"every": 1},
        "tracking": {"wandb": {"mode": "disabled"}},
    }
    (job_dir / "config.yaml").write_text(yaml.safe_dump(config))
    return job_dir


def run(job_dir: Path) -> list[dict]:
    from rollcli.backends.verl import run_train_job

    rows: list[dict] = []
    run_train_job(job_dir, callbacks=[rows.append])
    return rows


def test_pilot_commit_groups_and_resume(tmp_path, ray_cluster, trace, check_consistency):
    allocator = {
        "kind": "pilot_commit",
        "n_pilot": 4,
        "n_commit": 4,
        "p_lower": 0.25,
        "p_upper": 0.75,
        "pilot_batch_factor": 2,
        "on_max_rounds": "stop",
    }
    job = write_job(tmp_path / "pc", allocator, steps=2, rollouts=16)
    run(job)
    first = trace(job)
    state_2 = json.loads((job / "checkpoints/global_step_2/rollcli/state.json").read_text())
    # resume: same job, budget raised to 3 steps; verl restores the actor, we the allocator
    config = yaml.safe_load((job / "config.yaml").read_text())
    config["budget"]["steps"] = 3
    (job / "config.yaml").write_text(yaml.safe_dump(config))
    run(job)
    # step 2 evaluated as the last step of the first run, step 3 as the last of the resumed one
    metrics = check_consistency(job, eval_steps={2, 3}, initial_eval=False)
    steps = trace(job)
    assert steps[:2] == first and [m["step"] for m in metrics] == [1, 2, 3]
    assert metrics[1]["cum_rollouts"] == state_2["allocator"]["ledger"]["num_rollouts"]
    phases = {}
    for t in steps:
        for rnd in t["rounds"]:
            for prompt, _n, phase, refs in rnd["items"]:
                phases.update({r: (prompt, phase) for r in refs})
    for t in steps:
        for g in t["groups"]:
            kinds = Counter(phases[r][1] for r in g["refs"])
            assert kinds == {"pilot": 4, "commit": 4}  # one GRPO group: pilot + commit rollouts
    # survivors piloted before the restart are committed after it, with their stored pilots
    pilot_step = {
        r: t["step"]
        for t in steps
        for rnd in t["rounds"]
        for p, _, ph, refs in rnd["items"]
        if ph == "pilot"
        for r in refs
    }
    assert any(pilot_step[r] < 3 for g in steps[2]["groups"] for r in g["refs"] if r in pilot_step)


def test_vigor_uneven_groups_and_minibatches(tmp_path, ray_cluster, trace, check_consistency):
    allocator = {"kind": "vigor", "m0": 2, "alpha": 0.5, "gamma": 2.0, "rounds": 3}
    job = write_job(tmp_path / "vigor", allocator, steps=2, rollouts=24, num_minibatches=2)
    run(job)
    metrics = check_consistency(job, eval_steps={2}, initial_eval=False)
    steps = trace(job)
    sizes = {len(g["refs"]) for t in steps for g in t["groups"]}
    assert len(sizes) > 1  # refined prompts got more rollouts than dropped ones
    assert all(len(t["rounds"]) >= 2 for t in steps)
    # two optimiser steps a step, as verl counted them (one grad norm per mini-batch), on
    # equal mini-batches that hold every trained row (padded with zero-weight rows)
    assert [t["trained"]["optimizer_steps"] for t in steps] == [2.0, 2.0]
    for t, m in zip(steps, metrics, strict=True):
        assert m["train/minibatches"] == 2.0 and m["train/optimizer_steps"] == 2.0
        rows = t["trained"]["rows"]
        assert 2 * t["trained"]["minibatch_rows"] == rows + m["train/pad_rows"]
    # every reward came back from the graders with its timeout flag: none hit its deadline
    assert [m["reward/timeouts"] for m in metrics if m["step"] > 0] == [0, 0]


def test_greso_refill_rounds_drop_constant_groups(tmp_path, ray_cluster, trace, check_consistency):
    # B = 4 informative groups of 4; rounds of at most 4 prompts, refills of at least 2; a pool of
    # 12 prompts, so the last steps run in epoch 1, where p_easy / p_hard adapt
    allocator = {
        "kind": "greso",
        "n": 4,
        "sampling_factor": 1.0,
        "min_sampling_factor": 0.5,
        "max_rounds": 4,
        "on_max_rounds": "stop",
    }
    job = write_job(tmp_path / "greso", allocator, steps=4, rollouts=16, train_max_samples=12)
    run(job)
    metrics = check_consistency(job)
    for t, m in zip(trace(job), metrics, strict=True):
        sizes = [len(r["items"]) for r in t["rounds"]]
        assert sizes[0] == 4 and all(2 <= s <= 4 for s in sizes[1:])
        assert m["alloc/rounds"] == len(sizes) and m["alloc/rolled_out"] == sum(sizes)
        assert len(t["groups"]) <= 4 and m["alloc/informative"] >= len(t["groups"])
        for g in t["groups"]:  # only informative groups train, each of n rollouts
            assert len(g["refs"]) == 4 and max(g["rewards"]) > min(g["rewards"])
    assert metrics[-1]["epoch"] >= 1 and metrics[-1]["alloc/adaptations"] >= 1


def test_bayes_budget_pilots_then_commits(tmp_path, ray_cluster, trace, check_consistency):
    # 16 rollouts a step: half on pilots of 2 (4 prompts), the rest split by the posterior
    # predictive into groups of 2..8; a pool of 12, so step 3 sees prompts piloted before
    allocator = {"kind": "bayes_budget", "n_pilot": 2, "pilot_share": 0.5, "n_max": 8}
    job = write_job(tmp_path / "bayes", allocator, steps=3, rollouts=16, train_max_samples=12)
    run(job)
    metrics = check_consistency(job)
    for t, m in zip(trace(job), metrics, strict=True):
        assert [rnd["items"][0][2] for rnd in t["rounds"]] == ["pilot", "commit"]
        pilots = {p: refs for p, _n, ph, refs in t["rounds"][0]["items"]}
        commits = {p: refs for p, _n, ph, refs in t["rounds"][1]["items"]}
        assert [len(r) for r in pilots.values()] == [2] * 4
        assert sum(len(r) for r in commits.values()) == 8 and m["step_rollouts"] == 16
        for g in t["groups"]:  # a committed prompt trains its pilot and commit rollouts as one
            pid = g["prompt_id"]
            assert sorted(g["refs"]) == sorted([*pilots.get(pid, []), *commits.get(pid, [])])
            if pid not in commits:  # an uncommitted pilot trains only if it has reward variance
                assert max(g["rewards"]) > min(g["rewards"])
        assert m["alloc/pilots"] == 4
