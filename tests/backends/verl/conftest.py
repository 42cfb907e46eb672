"""Shared checks of a verl job folder traced with ``trace_groups``: asks, groups, trained rows.

Exposed as fixtures (the suite imports test modules with ``--import-mode=importlib``), with
the tiny Hugging Face model the eval-job tests load.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rollcli.store.atomic import read_jsonl
from rollcli.testing.rows import check_metrics_rows


def _trace(job_dir: Path) -> list[dict]:
    return read_jsonl(job_dir / "verl" / "trace.jsonl")


def _expected_evals(job_dir: Path, num_steps: int) -> tuple[set[int], bool]:
    """The evaluated steps and whether step 0 evaluates, from the job's config (an
    uninterrupted run: every ``eval.every`` steps and the last; none without a suite)."""
    config = yaml.safe_load((job_dir / "config.yaml").read_text())
    evaluation, backend = config.get("eval") or {}, config["backend"]
    if not (evaluation.get("suite") or backend.get("val_data")):
        return set(), False
    every = int(evaluation.get("every", 5))
    steps = {s for s in range(1, num_steps + 1) if s % every == 0 or s == num_steps}
    return steps, bool(backend.get("val_before_train", True))


def _check_consistency(
    job_dir: Path, *, eval_steps: set[int] | None = None, initial_eval: bool | None = None
) -> list[dict]:
    """The rows follow the metrics-row contract of every backend, and the generated and trained
    rows agree with the allocator's asks and groups, step by step. The evaluated steps default
    to those of an uninterrupted run of the job's config."""
    rows = read_jsonl(job_dir / "metrics.jsonl")
    expected_steps, expected_initial = _expected_evals(job_dir, len(rows) - 1)
    eval_steps = expected_steps if eval_steps is None else eval_steps
    initial_eval = expected_initial if initial_eval is None else initial_eval
    check_metrics_rows(
        rows, num_steps=len(rows) - 1, eval_steps=eval_steps, initial_eval=initial_eval
    )
    metrics = [r for r in rows if r["step"] > 0]
    steps = _trace(job_dir)
    assert [t["step"] for t in steps] == [m["step"] for m in metrics]
    ref_prompt: dict[int, int] = {}
    cum = 0
    for t, m in zip(steps, metrics, strict=True):
        generated = 0
        for rnd in t["rounds"]:
            for prompt, n, _phase, refs in rnd["items"]:
                assert len(refs) == n
                ref_prompt.update({r: prompt for r in refs})
                generated += n
        cum += generated
        assert m["step_rollouts"] == generated
        assert m["cum_rollouts"] == cum  # every generated rollout is counted
        trained = t["trained"]
        # verl trains a group of one rollout only when it carries a baseline (Group.baseline)
        groups = [
            g
            for g in t["groups"]
            if len(g["refs"]) >= 2 or (g["refs"] and g.get("baseline") is not None)
        ]
        assert trained["rows"] == sum(len(g["refs"]) for g in groups)
        assert trained["refs"] == [r for g in groups for r in g["refs"]]
        assert trained["rewards"] == pytest.approx([x for g in groups for x in g["rewards"]])
        # the trainer's rows: one uid per group, the group's prompt on every row
        for i, g in enumerate(groups):
            rows = [j for j, u in enumerate(trained["uids"]) if u == f"g{t['step']}x{i}"]
            assert len(rows) == len(g["refs"])
            assert {trained["prompts"][j] for j in rows} == {g["prompt_id"]}
            assert {ref_prompt[r] for r in g["refs"]} == {g["prompt_id"]}
        assert m["prompts_trained"] == len(t["groups"])
    return metrics


ROOT = Path(__file__).resolve().parents[3]
ROLLCLI = [sys.executable, "-c", "from rollcli.cli.app import main; main()"]


def _run_train_jobs(spec: Path, runs: Path, timeout: int) -> dict[str, Path]:
    """``rollcli run SPEC`` into ``runs``; asserts it succeeds and returns each train job's
    folder by allocator name."""
    result = subprocess.run(
        [*ROLLCLI, "run", str(spec), "--runs-dir", str(runs)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    run_dir = runs / yaml.safe_load(spec.read_text())["name"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return {
        j["allocator"]: run_dir / "jobs" / j["id"]
        for j in manifest["plan"]["jobs"]
        if j["type"] == "train"
    }


@pytest.fixture
def run_train_jobs():
    """``run_train_jobs(spec, runs, timeout)``: run a spec through the CLI, return
    ``{allocator: job_dir}`` of its train jobs."""
    return _run_train_jobs


# below the allocator modules' pytest timeout (1200 s), so a stuck job fails with the CLI's output
ALLOCATOR_JOB_TIMEOUT_S = 1100


@pytest.fixture
def run_allocator_job(tmp_path):
    """``run_allocator_job(name, allocator, steps=, rollouts_per_step=, **backend)``: one
    allocator's job of a verl-cpu.yaml spec through ``rollcli run`` (its folder)."""
    from rollcli.testing.verl_jobs import write_verl_cpu_spec

    def run(name: str, allocator: dict, *, steps: int, rollouts_per_step: int, **backend) -> Path:
        spec = write_verl_cpu_spec(
            tmp_path,
            f"verl-cpu-{name}",
            {name: allocator},
            baseline=name,
            steps=steps,
            rollouts_per_step=rollouts_per_step,
            **backend,
        )
        return _run_train_jobs(spec, tmp_path / "runs", ALLOCATOR_JOB_TIMEOUT_S)[name]

    return run


@pytest.fixture
def trace():
    """``trace(job_dir)``: the rows of ``<job>/verl/trace.jsonl``."""
    return _trace


@pytest.fixture
def check_consistency():
    """``check_consistency(job_dir, eval_steps=, initial_eval=)``: assert the row contract and
    that asks, groups and trained rows agree; returns the rows of the steps."""
    return _check_consistency


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny Hugging Face chat model saved in a folder (the eval job's checkpoints)."""
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from rollcli.testing.hf_model import build_tiny_hf_model

    return build_tiny_hf_model(tmp_path_factory.mktemp("tiny-model"))


# The weight sync's check (rollcli.backends.verl.agreement): the engine's token probabilities
# against the actor's. With a working sync the correlation is ~0.9988 (numerics; docs/LOG.md
# 2026-12-02, vLLM on CPU); one skipped sync at the tests' lr must fall below the bound. The
# largest difference is reported, not bounded: it grows with how peaked the policy is.
MIN_PROBS_CORR = 0.99


def _check_rollout_agreement(rows: list[dict]) -> list[float]:
    """Every training step's rows generated with the last synced weights agree with the actor
    (Pearson correlation of the token probabilities >= MIN_PROBS_CORR); returns the
    correlations, step by step."""
    steps = [r for r in rows if r["step"] > 0]
    assert steps, "no training step"
    corrs = []
    for row in steps:
        where = f"step {row['step']}"
        assert row.get("train/rollout_agreement_rows", 0) > 0, f"{where}: no rows to compare"
        corr, diff = row["train/rollout_actor_probs_corr"], row["train/rollout_probs_diff_max"]
        assert corr >= MIN_PROBS_CORR, (
            f"{where}: engine vs actor token probabilities correlate {corr} (largest difference "
            f"{diff}): the engine did not sample with the actor's weights"
        )
        corrs.append(corr)
    return corrs


@pytest.fixture
def check_rollout_agreement():
    """``check_rollout_agreement(rows)``: the engine's log-probs match the actor's every step."""
    return _check_rollout_agreement
