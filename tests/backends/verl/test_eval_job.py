"""Eval jobs (``rollcli.backends.verl.eval_job.run_eval_job``): checkpoints of a verl train job evaluated one by one.

The train job is a folder laid out as verl writes it (``checkpoints/global_step_<N>/actor``,
``metrics.jsonl``). Checkpoints either carry the full model in ``actor/huggingface`` (verl's
``hf_model`` save content), or only shards: then ``export_hf`` is replaced by a fake that writes a
folder, since merging real FSDP shards needs a verl training run. The end-to-end test uses a tiny
Qwen2 saved in code and the transformers engine; the others a scripted engine with known answers.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
import yaml

from rollcli.eval.engines import Sample
from rollcli.eval.engines.base import BaseEngine
from rollcli.store.atomic import append_jsonl, atomic_write_json, atomic_write_text, read_jsonl

TRAIN, EVAL = "train00001", "eval000001"
CUM = {0: (0, 0), 1: (64, 9000), 2: (128, 17500)}


def _answers() -> dict[str, str]:
    from rollcli.eval.benchmarks import load_benchmark

    return {
        p.question: p.answer or ""
        for name in ("math500", "gsm8k")
        for p in load_benchmark(name, limit=3)
    }


class StepEngine(BaseEngine):
    """Gold answers from checkpoint step 2 on, wrong ones before (the step is in the model path)."""

    name = "scripted"
    preferred_batch_prompts = 8
    created: list[str] = []

    def __init__(self, model: str, on_generate=None) -> None:
        self.model, self.on_generate = model, on_generate
        self.good = "global_step_1" not in model
        self.answers = _answers()
        self.prompts: list[str] = []
        StepEngine.created.append(model)

    def generate(self, prompts, *, n, temperature, top_p, max_tokens, seed):
        if self.on_generate is not None:
            self.on_generate(self)
        self.prompts.extend(prompts)
        out = []
        for prompt in prompts:
            gold = next(a for q, a in self.answers.items() if q in prompt)
            answer = gold if self.good else "wrong"
            out.append([Sample(f"so \\boxed{{{answer}}}", 4) for _ in range(n)])
        return out


def _make_run(tmp: Path, *, suite, samples, steps=(1, 2), hf_weights=True, **evals) -> Path:
    """jobs/<train>/ with checkpoints and metrics; jobs/<eval>/config.yaml; returns the eval job."""
    train = tmp / "jobs" / TRAIN
    for step in steps:
        actor = train / "checkpoints" / f"global_step_{step}" / "actor"
        (actor / "huggingface").mkdir(parents=True)
        atomic_write_json(actor / "huggingface" / "config.json", {"model_type": "qwen2"})
        if hf_weights:
            atomic_write_text(actor / "huggingface" / "model.safetensors", "weights")
    append_jsonl(
        train / "metrics.jsonl",
        [{"step": s, "cum_rollouts": r, "cum_tokens": t} for s, (r, t) in CUM.items()],
    )
    job = tmp / "jobs" / EVAL
    config = {
        "experiment": "t",
        "job": {"id": EVAL, "type": "eval", "allocator": "grpo", "seed": 0, "train_job": TRAIN},
        "backend": {"kind": "verl", "device": "cpu", "model": "tiny", "max_response_len": 16},
        "eval": {"every": 1, "suite": list(suite), "samples": samples, "jobs": True, **evals},
        "tracking": {"wandb": {"mode": "disabled"}},
    }
    atomic_write_text(job / "config.yaml", yaml.safe_dump(config))
    return job


@pytest.fixture
def scripted(monkeypatch):
    """Route the job's engine to StepEngine; returns the hook setter list."""
    import rollcli.backends.verl.eval_job as job_module

    StepEngine.created = []
    hooks: list = []

    def factory(kind, model, settings):
        assert kind == "hf"  # device cpu
        return lambda: StepEngine(str(model), hooks[0] if hooks else None)

    monkeypatch.setattr(job_module, "_engine_factory", factory)
    return hooks


def test_rows_per_checkpoint_and_macro_average(tmp_path: Path, scripted):
    from rollcli.backends.verl.eval_job import run_eval_job

    job = _make_run(
        tmp_path, suite=("math500", "gsm8k"), samples={"math500": 2, "gsm8k": 1}, limit=3
    )
    run_eval_job(job)
    rows = read_jsonl(job / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    first, second = rows
    assert (first["cum_rollouts"], first["cum_tokens"]) == CUM[1]
    assert (second["cum_rollouts"], second["cum_tokens"]) == CUM[2]
    assert first["eval/accuracy"] == 0.0 and second["eval/accuracy"] == 1.0
    assert second["eval/math500"] == second["eval/gsm8k"] == 1.0
    assert second["eval/math500/pass@2"] == 1.0
    # k per benchmark and the limit: 3 problems x 2 samples for math500, x 1 for gsm8k
    assert len(read_jsonl(job / "eval" / "2" / "math500" / "samples.jsonl")) == 6
    assert len(read_jsonl(job / "eval" / "2" / "gsm8k" / "samples.jsonl")) == 3
    assert [Path(m).parts[-3] for m in StepEngine.created] == ["global_step_1", "global_step_2"]


def test_resume_recomputes_only_missing_checkpoint(tmp_path: Path, scripted):
    from rollcli.backends.verl.eval_job import run_eval_job

    job = _make_run(tmp_path, suite=("math500",), samples=1, limit=3)
    run_eval_job(job)
    kept = (job / "eval" / "1" / "math500" / "samples.jsonl").read_bytes()
    rows = read_jsonl(job / "metrics.jsonl")
    shutil.rmtree(job / "eval" / "2")
    StepEngine.created = []
    run_eval_job(job)
    assert [Path(m).parts[-3] for m in StepEngine.created] == ["global_step_2"]
    assert (job / "eval" / "1" / "math500" / "samples.jsonl").read_bytes() == kept
    assert read_jsonl(job / "metrics.jsonl") == rows  # one row per step, no duplicates
    StepEngine.created = []
    run_eval_job(job)  # all done: no model is loaded
    assert StepEngine.created == []


def test_stop_between_benchmarks_then_resume(tmp_path: Path, scripted):
    from rollcli.backends.verl.eval_job import run_eval_job

    job = _make_run(tmp_path, suite=("math500", "gsm8k"), samples=1, limit=3)
    stop = threading.Event()
    scripted.append(lambda engine: stop.set())  # stop while the first benchmark generates
    run_eval_job(job, stop=stop)
    assert not (job / "metrics.jsonl").exists()
    assert not (job / "eval" / "1" / "summary.json").exists()
    assert len(read_jsonl(job / "eval" / "1" / "math500" / "samples.jsonl")) == 3
    assert not (job / "eval" / "1" / "gsm8k").exists()
    scripted.clear()
    run_eval_job(job)
    assert [r["step"] for r in read_jsonl(job / "metrics.jsonl")] == [1, 2]
    assert len(read_jsonl(job / "eval" / "1" / "math500" / "samples.jsonl")) == 3  # not redone


def test_shard_only_checkpoints_are_exported_then_removed(tmp_path: Path, scripted, monkeypatch):
    import rollcli.backends.verl.export as export
    from rollcli.backends.verl.eval_job import run_eval_job

    exported = []

    def fake_export(job_dir, out_dir, *, step=None):
        out = Path(out_dir)
        tmp = out.with_name(out.name + ".partial")
        tmp.mkdir(parents=True)
        atomic_write_json(tmp / "config.json", {"model_type": "qwen2"})
        atomic_write_text(tmp / "model.safetensors", f"step {step}")
        tmp.rename(out)
        exported.append(step)
        return out

    monkeypatch.setattr(export, "export_hf", fake_export)
    job = _make_run(tmp_path, suite=("math500",), samples=1, limit=2, hf_weights=False)
    run_eval_job(job)
    assert exported == [1, 2]
    assert [Path(m).parts[-1] for m in StepEngine.created] == ["step_1", "step_2"]
    assert not any((job / "models").iterdir())  # exports are dropped once results are stored
    assert [r["eval/accuracy"] for r in read_jsonl(job / "metrics.jsonl")] == [1.0, 1.0]


def test_config_errors_are_clear(tmp_path: Path):
    from rollcli.backends.verl.eval_job import EvalJobError, run_eval_job

    job = _make_run(tmp_path, suite=("math500",), samples=1, steps=())
    with pytest.raises(EvalJobError, match="no verl checkpoint"):
        run_eval_job(job)
    shutil.rmtree(tmp_path / "jobs" / TRAIN)
    with pytest.raises(EvalJobError, match="does not exist"):
        run_eval_job(job)


def test_livecodebench_comes_from_the_specs_local_release():
    """An eval job reads LiveCodeBench from eval.livecodebench (compute nodes are offline)."""
    from rollcli.backends.verl.eval_job import EvalJobError, EvalJobSettings

    config = {
        "job": {"train_job": TRAIN, "seed": 1},
        "eval": {
            "suite": ["livecodebench"],
            "livecodebench": {"path": "/data/lcb", "version": "v5_v6"},
        },
        "backend": {"max_response_len": 64},
    }
    settings = EvalJobSettings.from_config(config)
    assert (settings.lcb_path, settings.lcb_version) == ("/data/lcb", "v5_v6")
    del config["eval"]["livecodebench"]
    with pytest.raises(EvalJobError, match="eval.livecodebench.path"):
        EvalJobSettings.from_config(config)


@pytest.mark.slow
def test_end_to_end_tiny_model_through_the_job_entry(tmp_path: Path, tiny_model_dir: Path):
    """A real transformers engine on a tiny Qwen2, through ``python -m rollcli.jobs.entry``'s
    ``run_job``; then one checkpoint's results are deleted and only that one is recomputed."""
    import rollcli.eval.engines as engines
    from rollcli.backends.verl.eval_job import run_eval_job
    from rollcli.jobs.entry import run_job
    from rollcli.store.state import read_state

    job = _make_run(tmp_path, suite=("math500",), samples=2, limit=3, temperature=0.7)
    for step in (1, 2):
        hf = tmp_path / "jobs" / TRAIN / "checkpoints" / f"global_step_{step}" / "actor"
        shutil.rmtree(hf / "huggingface")
        shutil.copytree(tiny_model_dir, hf / "huggingface")
    assert run_job(job) == 0
    assert read_state(job)["status"] == "done"
    rows = read_jsonl(job / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    assert all(
        0.0 <= r["eval/accuracy"] <= 1.0 and r["eval/accuracy"] == r["eval/math500"] for r in rows
    )
    samples = read_jsonl(job / "eval" / "1" / "math500" / "samples.jsonl")
    assert len(samples) == 6 and all(0 < s["tokens"] <= 16 for s in samples)

    created = []
    original = engines.create_engine

    def counting(kind, model, **options):
        created.append(Path(model).parts[-3])
        return original(kind, model, **options)

    shutil.rmtree(job / "eval" / "1")
    try:
        engines.create_engine = counting
        run_eval_job(job)
    finally:
        engines.create_engine = original
    assert created == ["global_step_1"]
    assert read_jsonl(job / "metrics.jsonl") == rows  # same seed, same samples, same row


def test_analysis_merges_eval_job_rows_into_the_train_curve(tmp_path: Path):
    from rollcli.analysis import load_run

    train_rows = [
        {"step": 0, "cum_rollouts": 0, "cum_tokens": 0, "eval/accuracy": 0.1},
        {"step": 1, "cum_rollouts": 64, "cum_tokens": 900},
        {"step": 2, "cum_rollouts": 128, "cum_tokens": 1800, "eval/accuracy": 0.3},
    ]
    eval_rows = [
        {"step": 1, "cum_rollouts": 64, "cum_tokens": 900, "eval/accuracy": 0.2},
        {"step": 2, "cum_rollouts": 128, "cum_tokens": 1800, "eval/accuracy": 0.9},
        {"step": 3, "cum_rollouts": 192, "cum_tokens": 2700, "eval/accuracy": 0.4},
    ]
    append_jsonl(tmp_path / "jobs" / TRAIN / "metrics.jsonl", train_rows)
    append_jsonl(tmp_path / "jobs" / EVAL / "metrics.jsonl", eval_rows)
    plan = [
        {"id": TRAIN, "type": "train", "allocator": "grpo", "seed": 0, "depends_on": []},
        {"id": EVAL, "type": "eval", "allocator": "grpo", "seed": 0, "depends_on": [TRAIN]},
    ]
    spec = {"name": "t", "allocators": {"grpo": {"kind": "uniform"}}, "budget": {"steps": 3}}
    atomic_write_json(
        tmp_path / "manifest.json", {"experiment": "t", "spec": spec, "plan": {"jobs": plan}}
    )
    run = load_run(tmp_path)
    assert [j.job_id for j in run.jobs] == [TRAIN]
    x, y = run.jobs[0].eval_curve("accuracy")
    # step 1 filled from the eval job, step 2 keeps the train job's own number, step 3 added
    assert x.tolist() == [0, 64, 128, 192]
    assert y.tolist() == [0.1, 0.2, 0.3, 0.4]
