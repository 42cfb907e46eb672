"""verl's trainer across the two nodes of the REAL two-node cluster, on CPU (trainer.nnodes=2).

``rollcli run`` submits a ``launch.nodes: 2`` job; the Ray bootstrap forms one Ray cluster over
rcnode1 and rcnode2 (one fake GPU each), and verl places one FSDP actor/rollout worker on each
node — a gloo process group of two ranks across the veth pair — for 2 GRPO steps that write
their metrics. ~5 GB and ~2-3 minutes: skipped without the two-node cluster or verl.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from rollcli.store.atomic import read_jsonl
from rollcli.store.state import read_state
from rollcli.testing.slurm import two_node_skip_reason, use_two_node_cluster, wait_for

SKIP = two_node_skip_reason()
pytestmark = [
    pytest.mark.verl,
    pytest.mark.slurm,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs the verl extra"),
    pytest.mark.skipif(SKIP is not None, reason=str(SKIP)),
]

SPEC = """\
name: verl-two-node
backend:
  kind: verl
  device: cpu
  model: tiny
  train_data: math_train
  train_max_samples: 48
  val_max_samples: 2
  max_prompt_len: 384
  max_response_len: 12
  lr: 1.0e-4
  reward: rollcli.backends.verl.rewards:toy_reward
  trace_groups: true
  val_before_train: false
budget: {steps: 2, rollouts_per_step: 16}
allocators:
  grpo: {kind: uniform, n: 4}
seeds: [0]
eval: {every: 2, suite: [math500], samples: 2}
target: {baseline: grpo}
launch: {executor: slurm, nodes: 2, gpus_per_node: 1, cpus_per_task: 4, time: "00:30:00"}
tracking: {wandb: {mode: disabled}}
"""


@pytest.mark.timeout(1200)  # a two-node verl job through Slurm on a shared 2-core box
def test_verl_job_spans_both_nodes(tmp_path, cli, monkeypatch, check_consistency):
    cluster = use_two_node_cluster(monkeypatch)
    monkeypatch.setenv("ROLLCLI_RAY_OBJECT_STORE_BYTES", str(300 * 1024 * 1024))
    monkeypatch.setenv("ROLLCLI_RAY_JOIN_TIMEOUT", "180")
    spec = tmp_path / "verl-two-node.yaml"
    spec.write_text(SPEC)
    runs = tmp_path / "runs"
    result = cli(["run", spec, "--detach", "--runs-dir", runs])
    assert result.exit_code == 0, result.output
    [train] = [
        d
        for d in (runs / "verl-two-node" / "jobs").iterdir()
        if yaml.safe_load((d / "config.yaml").read_text())["job"]["type"] == "train"
    ]
    try:
        wait_for(lambda: read_state(train)["status"] in ("done", "failed"), 540, "the verl job")
    finally:
        cli(["cancel", runs / "verl-two-node"])
    state = read_state(train)
    assert state["status"] == "done", state["error_tail"]
    overrides = json.loads((train / "verl" / "overrides.json").read_text())
    assert "trainer.nnodes=2" in overrides and "trainer.n_gpus_per_node=1" in overrides
    joined = json.loads((train / "ray" / f"cluster-{state['slurm']['job_id']}.0.json").read_text())
    # joins the job's own cluster by its address, never through Ray's address file
    assert f"+ray_kwargs.ray_init.address='{joined['address']}'" in overrides
    # one actor/rollout worker on each node, one process group of two ranks, by address
    workers = json.loads((train / "verl" / "workers.json").read_text())["actor_rollout"]
    assert sorted((w["rank"], w["host"], w["ip"]) for w in workers) == [
        (0, cluster.hosts[0], cluster.addresses[0]),
        (1, cluster.hosts[1], cluster.addresses[1]),
    ]
    assert {w["world_size"] for w in workers} == {2}
    assert {w["master"].split(":")[0] for w in workers} == {cluster.addresses[0]}
    assert joined["resources"]["GPU"] == 2.0 and joined["num_nodes"] == 2
    # 2 GRPO steps whose metrics agree with what the allocator asked for and grouped
    metrics = check_consistency(train, eval_steps={2}, initial_eval=False)
    assert [m["step"] for m in metrics] == [1, 2]
    assert all(m["rollouts_trained"] == 16 for m in metrics)
    assert "eval/accuracy" in read_jsonl(train / "metrics.jsonl")[-1]
    assert Path(state["slurm"]["submission"]).read_text().count("#SBATCH --nodes=2") == 1
