"""What a first GPU run needs from the compiled verl config (issue 24), checked on CPU.

Attention chosen explicitly (flash-attn checked when the job starts), Ray's address explicit on
every path, vLLM's context set to prompt + response, code-sandbox pools sized from the node's
CPUs. The composed config is verl's own (Hydra), so a key verl does not know fails here.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from rollcli.backends.verl.overrides import VerlPaths, compile_overrides, verl_config_from_mapping
from rollcli.errors import RollcliError

needs_verl = pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs verl")
PATHS = VerlPaths(model="m", train_files="t.parquet", val_files="v.parquet", checkpoints="ckpt")
ATTN = "+actor_rollout_ref.model.override_config.attn_implementation"
ADDRESS = "+ray_kwargs.ray_init.address"


def cuda_job(nodes: int = 1, **backend) -> dict:
    return {
        "experiment": "first-h200",
        "job": {"id": "abc", "type": "train", "allocator": "grpo", "seed": 0},
        "backend": {
            "kind": "verl",
            "model": "Qwen/Qwen2.5-3B",
            "max_prompt_len": 2048,
            "max_response_len": 8192,
            **backend,
        },
        "allocator": {"kind": "uniform", "n": 8},
        "budget": {"steps": 10, "rollouts_per_step": 1024},
        "eval": {"every": 5},
        "checkpoint": {"every": 5},
        "tracking": {"wandb": {"mode": "disabled"}},
        "launch": {"nodes": nodes, "gpus_per_node": 8, "cpus_per_task": 64},
    }


def value(lines: list[str], key: str) -> str | None:
    found = [line.split("=", 1)[1] for line in lines if line.split("=", 1)[0] == key]
    assert len(found) <= 1, f"{key} set twice"
    return found[0] if found else None


def test_attention_is_explicit_on_every_device():
    """verl's default is flash_attention_2 whether or not flash-attn is installed; rollcli
    names the implementation: flash_attention_2 on cuda (auto), the sdpa fallback, eager on cpu."""
    assert value(compile_overrides(cuda_job(), PATHS), ATTN) == "'flash_attention_2'"
    assert value(compile_overrides(cuda_job(attention="sdpa"), PATHS), ATTN) == "'sdpa'"
    cpu = cuda_job(device="cpu", model="tiny")
    cpu["launch"] = {}
    assert value(compile_overrides(cpu, PATHS), ATTN) == "'eager'"
    with pytest.raises(ValueError, match="flash_attention_2.*needs device 'cuda'"):
        verl_config_from_mapping({**cpu["backend"], "attention": "flash_attention_2"})
    with pytest.raises(ValueError, match="attention"):
        verl_config_from_mapping({**cuda_job()["backend"], "attention": "flash"})


def test_vllm_context_is_prompt_plus_response():
    """Without it vLLM takes the model's own context (4,096 for Qwen2.5-Math-1.5B) and cuts
    responses short of max_response_len without a word."""
    assert value(
        compile_overrides(cuda_job(), PATHS), "actor_rollout_ref.rollout.max_model_len"
    ) == (str(2048 + 8192))


def test_ray_address_is_explicit_on_every_path(monkeypatch, tmp_path):
    """One node: a private cluster ('local'), never the one Ray's address file names. Several
    nodes: the bootstrap's head, added at job start; missing, the job stops with the reason."""
    from rollcli.backends.verl.runner import job_overrides

    assert value(compile_overrides(cuda_job(), PATHS), ADDRESS) == "'local'"
    multi = cuda_job(nodes=2)
    assert value(compile_overrides(multi, PATHS), ADDRESS) is None
    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:20001")
    assert value(job_overrides(tmp_path, multi, PATHS), ADDRESS) == "'10.1.2.3:20001'"
    assert value(job_overrides(tmp_path, cuda_job(), PATHS), ADDRESS) == "'local'"
    monkeypatch.delenv("RAY_ADDRESS")
    with pytest.raises(RollcliError, match="RAY_ADDRESS is unset"):
        job_overrides(tmp_path, multi, PATHS)


def test_sandbox_pools_are_sized_from_the_nodes_cpus():
    """verl's 8 reward workers each held one sandbox: 8 concurrent solutions on a 64-CPU node.
    Now every node gets 8 reward workers whose pools share the CPUs the GPUs' workers leave."""
    from rollcli.backends.verl.overrides import (
        REWARD_WORKERS_PER_NODE,
        sandbox_workers_per_process,
    )

    assert sandbox_workers_per_process(64, 8) == (64 - 16 - 4) // 8 == 5
    assert sandbox_workers_per_process(4, 8) == 1  # never below one
    lines = compile_overrides(cuda_job(nodes=2, reward="code"), PATHS)
    assert value(lines, "reward.num_workers") == str(2 * REWARD_WORKERS_PER_NODE)
    assert value(lines, "+reward.custom_reward_function.reward_kwargs.sandbox_workers") == "5"
    # math grading is cheap: verl's defaults stay
    assert value(compile_overrides(cuda_job(), PATHS), "reward.num_workers") is None


def test_reward_function_sizes_its_sandbox_pool(monkeypatch):
    """compute_score builds this process's pool with the compiled number of workers."""
    from rollcli.backends.verl import rewards

    built = []

    class FakePool:
        def __init__(self, size, rollout_timeout_s):
            built.append(size)

        def close(self):
            return None

    import rollcli.eval.graders.sandbox as sandbox

    monkeypatch.setattr(sandbox, "SandboxPool", FakePool)
    monkeypatch.setattr(rewards, "_POOLS", {})
    assert rewards._pool("code", 10.0, 5).rollcli_size == 5
    assert rewards._pool("code", 10.0, 5) is rewards._POOLS["code"]  # reused
    rewards._pool("code", 10.0, 2)  # another size: rebuilt
    assert built == [5, 2]


def test_cuda_job_without_flash_attn_stops_before_anything_starts(monkeypatch, tmp_path):
    """Every FSDP worker used to fail in init_model with transformers' FlashAttention2 error;
    the job now stops at its start with the install command (or the sdpa knob)."""
    from rollcli.backends.verl import runner
    from rollcli.backends.verl.gpu_stack import check_attention, install_commands

    monkeypatch.setitem(sys.modules, "flash_attn", None)  # import flash_attn -> ImportError
    # online, so the model-cache preflight passes whatever an earlier test in this worker set
    # (the SmolLM2 fixture sets HF_HUB_OFFLINE=1 for its session)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")

    def reached(*args, **kwargs):
        raise AssertionError("the job went on to prepare its inputs")

    monkeypatch.setattr(runner, "prepare_inputs", reached)
    with pytest.raises(RollcliError) as error:
        runner.run_train_job(tmp_path, job=cuda_job())
    message = str(error.value)
    assert install_commands()[1] in message and "attention: sdpa" in message
    assert 'pip install --no-build-isolation "flash-attn==2.8.3"' in message
    check_attention("sdpa")  # the fallback needs no flash-attn
    with pytest.raises(AssertionError, match="prepare its inputs"):
        runner.run_train_job(tmp_path, job=cuda_job(attention="sdpa"))


@needs_verl
@pytest.mark.parametrize("nodes", [1, 2])
def test_verl_composes_the_gpu_settings(nodes, monkeypatch, tmp_path):
    from rollcli.backends.verl.runner import compose_config, job_overrides

    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:20001")
    config = compose_config(job_overrides(tmp_path, cuda_job(nodes=nodes, reward="code"), PATHS))
    assert config.actor_rollout_ref.model.override_config.attn_implementation == (
        "flash_attention_2"
    )
    assert config.actor_rollout_ref.rollout.max_model_len == 10240
    assert config.ray_kwargs.ray_init.address == ("local" if nodes == 1 else "10.1.2.3:20001")
    assert config.reward.num_workers == 8 * nodes
    assert config.reward.custom_reward_function.reward_kwargs.sandbox_workers == 5


def test_validation_grades_each_answer_once(monkeypatch):
    """verl's reward loop already scored every validation row with the training reward; rows it
    grades the same way keep that score (a LiveCodeBench validation ran twice: in the reward
    workers, then again on the driver's one sandbox worker)."""
    import json

    from rollcli.backends.verl import evaluation

    graded = {"code": [], "math": []}

    def fake(kind):
        def grade(pairs, deadline_s):
            graded[kind].extend(text for text, _ in pairs)
            return [(1.0, False)] * len(pairs)

        return grade

    monkeypatch.setattr(evaluation, "code_scores", fake("code"))
    monkeypatch.setattr(evaluation, "math_scores", fake("math"))
    tests = json.dumps({"tests": [{"input": "1\n", "output": "1\n", "testtype": "stdin"}]})
    texts, golds = ["code-a", "math-b", "code-c"], [tests, "42", tests]
    reward = [(0.0, True), (0.0, False), (1.0, False)]
    out = evaluation.grade_answers(texts, golds, 10.0, reward_mode="code", reward_results=reward)
    assert graded == {"code": [], "math": ["math-b"]}  # code rows: the reward loop's result
    assert out == [(0.0, True), (1.0, False), (1.0, False)]
    graded = {"code": [], "math": []}
    out = evaluation.grade_answers(texts, golds, 10.0, reward_mode="math", reward_results=reward)
    assert graded == {"code": ["code-a", "code-c"], "math": []}
    assert out == [(1.0, False), (0.0, False), (1.0, False)]
    graded = {"code": [], "math": []}
    evaluation.grade_answers(texts, golds, 10.0, reward_mode="verl", reward_results=reward)
    assert graded == {"code": ["code-a", "code-c"], "math": ["math-b"]}  # another grader: regrade


@needs_verl
def test_evaluate_suite_takes_the_reward_loops_code_scores(monkeypatch):
    """The wiring: evaluate_suite reads rm_scores and the timeout flags verl's reward loop put on
    the validation rows, and under reward: code grades no code row again."""
    import json

    import numpy as np
    import torch
    from verl import DataProto

    from rollcli.backends.verl import evaluation
    from rollcli.backends.verl.config import VerlConfig
    from rollcli.backends.verl.rewards import TIMEOUT_KEY

    tests = json.dumps({"tests": [{"input": "1\n", "output": "1\n", "testtype": "stdin"}]})
    golds = [tests, "42", tests]

    def must_not_grade(pairs, deadline_s):
        raise AssertionError("graded a second time")

    monkeypatch.setattr(evaluation, "code_scores", must_not_grade)
    monkeypatch.setattr(evaluation, "math_scores", lambda pairs, d: [(1.0, False)] * len(pairs))

    class Tokenizer:
        def batch_decode(self, ids, skip_special_tokens=True):
            return [f"answer {i}" for i in range(len(ids))]

    class Trainer:
        backend_config = VerlConfig(model="m", reward="code")
        tokenizer = Tokenizer()
        val_dataset = [{"x": i} for i in range(3)]

        class config:  # noqa: N801 - the attribute path verl's config has
            class actor_rollout_ref:  # noqa: N801
                class rollout:  # noqa: N801
                    class val_kwargs:  # noqa: N801
                        do_sample = True

        def _collate(self, rows):
            return {
                "input_ids": torch.zeros(len(rows), 2, dtype=torch.long),
                "extra_info": np.array([{"k": 1}] * len(rows), dtype=object),
            }

        def generate_rows(self, batch, ks, meta):
            assert meta["validate"] is True
            rm = torch.zeros(3, 4)
            rm[:, -1] = torch.tensor([0.0, 0.0, 1.0])
            return DataProto.from_single_dict(
                {
                    "rm_scores": rm,
                    "responses": torch.ones(3, 4, dtype=torch.long),
                    "response_mask": torch.ones(3, 4, dtype=torch.long),
                    "reward_model": np.array([{"ground_truth": g} for g in golds], dtype=object),
                    "data_source": np.array(["livecodebench", "math500", "livecodebench"]),
                    TIMEOUT_KEY: np.array([1.0, 0.0, 0.0]),
                }
            )

    metrics = evaluation.evaluate_suite(Trainer(), step=5)
    assert metrics["eval/livecodebench"] == 0.5 and metrics["eval/math500"] == 1.0
    assert metrics["eval/grading_timeouts"] == 1.0
