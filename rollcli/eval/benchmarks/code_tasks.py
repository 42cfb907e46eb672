"""The code task format of training sets: a problem with its tests, as one JSON object.

A record of a code training set (``.jsonl``/``.json``/``.parquet``, read by ``rollcli data
prepare`` and the verl backend's ``train_data``) has ``problem`` (or ``question``) and
``tests``: a list of ``{"input": str, "output": str, "testtype": "stdin" | "functional" |
"assert"}`` (one kind per problem, as LiveCodeBench and HumanEval), plus optionally
``func_name`` (the ``Solution`` method functional tests call; the function an ``assert`` test
checks), ``starter_code`` and ``time_limit_s`` (per test; default the sandbox's 6 s). The verl
parquet carries :func:`task_json` of it as ``reward_model.ground_truth``; the code reward turns
it back into a :class:`Problem` with :func:`task_problem` and grades the response in the sandbox.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from rollcli.eval.benchmarks.base import CodeTest, Problem

__all__ = ["TEST_TYPES", "is_code_task", "problem_task_json", "task_json", "task_problem"]

TEST_TYPES = ("stdin", "functional", "assert")


def is_code_task(record: Mapping[str, Any]) -> bool:
    """Whether a training record is a code task (it has ``tests``)."""
    return record.get("tests") is not None


def _spec(record: Mapping[str, Any]) -> dict[str, Any]:
    """The checked task fields of a record (ValueError naming the field otherwise)."""
    tests = record.get("tests")
    if isinstance(tests, str):
        tests = json.loads(tests)
    if hasattr(tests, "tolist"):  # a parquet column read back as a numpy array
        tests = tests.tolist()
    if not isinstance(tests, list) or not tests:
        raise ValueError("tests: must be a non-empty list of {input, output, testtype}")
    out = []
    for i, test in enumerate(tests):
        if not isinstance(test, Mapping) or not isinstance(test.get("input"), str):
            raise ValueError(f"tests[{i}]: needs an 'input' string")
        kind = test.get("testtype", "stdin")
        if kind not in TEST_TYPES:
            raise ValueError(f"tests[{i}].testtype: must be one of {', '.join(TEST_TYPES)}")
        out.append(
            {"input": test["input"], "output": str(test.get("output", "")), "testtype": kind}
        )
    kinds = {t["testtype"] for t in out}
    if len(kinds) > 1:
        raise ValueError(f"tests: one testtype per problem, got {sorted(kinds)}")
    spec: dict[str, Any] = {"tests": out}
    func_name = record.get("func_name")
    if kinds == {"functional"} and not func_name:
        raise ValueError("func_name: functional tests call Solution().<func_name>")
    if func_name:
        spec["func_name"] = str(func_name)
    if record.get("starter_code"):
        spec["starter_code"] = str(record["starter_code"])
    limit = record.get("time_limit_s")
    if limit is not None:
        if not (isinstance(limit, (int, float)) and math.isfinite(limit) and limit > 0):
            raise ValueError(f"time_limit_s: must be a number > 0, got {limit!r}")
        spec["time_limit_s"] = float(limit)
    return spec


def task_json(record: Mapping[str, Any]) -> str:
    """The record's task fields as canonical JSON (the parquet's ground truth)."""
    return json.dumps(_spec(record), sort_keys=True, separators=(",", ":"))


def task_problem(
    ground_truth: str | Mapping[str, Any], *, id: str = "code", question: str = ""
) -> Problem:  # noqa: A002
    """A :class:`Problem` from a task's JSON (or mapping), for the sandbox grader."""
    record = json.loads(ground_truth) if isinstance(ground_truth, str) else ground_truth
    if not isinstance(record, Mapping):
        raise ValueError("a code task is a JSON object with tests")
    spec = _spec(record)
    return Problem(
        id=id,
        question=question,
        kind="code",
        tests=tuple(CodeTest(t["input"], t["output"], t["testtype"]) for t in spec["tests"]),
        starter_code=spec.get("starter_code", ""),
        func_name=spec.get("func_name"),
        time_limit_s=spec.get("time_limit_s"),
    )


def problem_task_json(problem: Problem) -> str:
    """A code benchmark's :class:`Problem` (LiveCodeBench, HumanEval) as a task's canonical JSON,
    the inverse of :func:`task_problem` (so a benchmark can be a verl validation set)."""
    record: dict[str, Any] = {
        "tests": [
            {"input": t.input, "output": t.output, "testtype": t.testtype} for t in problem.tests
        ],
        "func_name": problem.func_name,
        "starter_code": problem.starter_code,
        "time_limit_s": problem.time_limit_s,
    }
    return task_json(record)
