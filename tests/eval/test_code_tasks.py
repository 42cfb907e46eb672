"""The code task format of training sets: checked fields with the field named, a canonical JSON
ground truth that round-trips to a Problem, and ``rollcli data prepare``'s verl parquet."""

from __future__ import annotations

import json

import pytest

from rollcli.backends.verl.data import DataError, prepare_dataset
from rollcli.eval.benchmarks.code_tasks import task_json, task_problem

ADD = {"problem": "Add two numbers.", "tests": [{"input": "1 2\n", "output": "3\n"}]}


def test_task_round_trip_and_errors_name_the_field():
    gold = task_json({**ADD, "time_limit_s": 2})
    problem = task_problem(gold, question="q")
    assert problem.kind == "code" and problem.time_limit_s == 2.0
    assert problem.tests[0].testtype == "stdin" and problem.tests[0].output == "3\n"
    functional = {"tests": [{"input": "[1]", "output": "2", "testtype": "functional"}]}
    for record, field in [
        ({"tests": []}, "tests"),
        ({"tests": [{"output": "3"}]}, r"tests\[0\]"),
        ({"tests": [{"input": "", "testtype": "shell"}]}, r"tests\[0\].testtype"),
        (functional, "func_name"),
        ({**ADD, "time_limit_s": -1}, "time_limit_s"),
    ]:
        with pytest.raises(ValueError, match=field):
            task_json(record)
    assert task_problem(task_json({**functional, "func_name": "f"})).func_name == "f"


def test_prepare_writes_code_rows_with_lcb_prompts(tmp_path):
    pd = pytest.importorskip("pandas")
    source = tmp_path / "code.jsonl"
    source.write_text(json.dumps(ADD) + "\n" + json.dumps({**ADD, "problem": "Again."}) + "\n")
    path, count = prepare_dataset(str(source), tmp_path / "train.parquet")
    rows = pd.read_parquet(path).to_dict(orient="records")
    assert count == 2 and [r["ability"] for r in rows] == ["code", "code"]
    assert task_problem(rows[0]["reward_model"]["ground_truth"]).tests[0].input == "1 2\n"
    assert rows[0]["prompt"][0]["role"] == "system" and "stdin" in rows[0]["prompt"][1]["content"]
    source.write_text(json.dumps(ADD) + "\n" + json.dumps({"problem": "x", "tests": "[]"}) + "\n")
    with pytest.raises(DataError, match=r"code.jsonl\[1\]: tests"):
        prepare_dataset(str(source), tmp_path / "bad.parquet")


def test_a_code_benchmark_problem_becomes_a_task_and_back():
    """LiveCodeBench and HumanEval problems as verl validation rows: the task JSON keeps the
    tests, the function name, the starter code and the time limit."""
    from rollcli.eval.benchmarks import load_benchmark
    from rollcli.eval.benchmarks.code_tasks import problem_task_json

    for problem in load_benchmark("humaneval", limit=2):
        back = task_problem(problem_task_json(problem), question=problem.question)
        assert back.tests == problem.tests and back.func_name == problem.func_name
        assert back.starter_code == problem.starter_code
        assert back.time_limit_s == problem.time_limit_s
