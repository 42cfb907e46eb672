"""Deadlines wherever a grader runs in verl's reward workers and driver: a pathological math
answer and a hanging program each score 0 within their deadline, flagged as timeouts (the
trainer counts them as ``reward/timeouts``), and the next answer is graded as usual; code is
graded in the warm sandbox pool (its hostile corpus: tests/eval/test_sandbox_hostile.py)."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rollcli.backends.verl.rewards import (
    FORMAT_KEY,
    PASSED_KEY,
    TIMEOUT_KEY,
    code_grades,
    code_scores,
    compute_score,
    math_scores,
    reward_function_config,
)
from rollcli.eval.graders.sandbox.bwrap import check_bwrap

TOWER = "\\boxed{9^{9^{9^{9^{9^{9}}}}}}"  # math-verify works on it for minutes
DEADLINE = 3.0  # a plain answer takes milliseconds, but the shared 2 cores run at load 10-30
ADD = {"tests": [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}], "time_limit_s": 2}
needs_sandbox = pytest.mark.skipif(
    not (os.geteuid() == 0 and check_bwrap(1_234_567) is None),
    reason="the sandbox needs root (cgroups) and bubblewrap (scripts/test.sh)",
)


@pytest.fixture(autouse=True, scope="module")
def _close_the_grading_pools():
    """The reward module keeps one warm pool per process: close it after these tests, so later
    tests in this process see no sandbox cgroup of ours (tests/eval/test_sandbox.py checks)."""
    from rollcli.backends.verl import rewards

    yield
    rewards._close_pools()


def test_a_pathological_math_answer_scores_zero_within_the_deadline():
    math_scores([("\\boxed{1}", "2")], deadline_s=DEADLINE)  # the worker started: time the grading
    started = time.monotonic()
    # the reward loop calls from several threads at once: they share one killable worker
    with ThreadPoolExecutor(3) as threads:
        calls = [
            threads.submit(compute_score, "math", text, gold, mode="math", deadline_s=DEADLINE)
            for text, gold in ((TOWER, "5"), ("\\boxed{4}", "4"), ("\\boxed{3}", "4"))
        ]
        results = [c.result() for c in calls]
    elapsed = time.monotonic() - started
    assert results == [
        {"score": 0.0, TIMEOUT_KEY: 1.0, FORMAT_KEY: 0.0, PASSED_KEY: 0.0},  # never judged
        {"score": 1.0, TIMEOUT_KEY: 0.0, FORMAT_KEY: 1.0, PASSED_KEY: 0.0},
        {"score": 0.0, TIMEOUT_KEY: 0.0, FORMAT_KEY: 1.0, PASSED_KEY: 0.0},  # wrong but boxed
    ]
    assert elapsed < 3 * DEADLINE + 10, elapsed  # one deadline each at worst, and the respawn
    assert math_scores([("\\boxed{\\frac{1}{2}}", "0.5")], deadline_s=DEADLINE) == [(1.0, False)]


@needs_sandbox
def test_a_hanging_program_scores_zero_at_its_deadline_and_the_next_one_passes():
    hang = "```python\nwhile True:\n    pass\n```"
    sleeper = "```python\nimport time\ntime.sleep(3600)\n```"
    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    started = time.monotonic()
    got = code_scores(
        [(hang, json.dumps(ADD)), (sleeper, ADD), (right, json.dumps(ADD)), ("no code", ADD)],
        deadline_s=4.0,
    )
    elapsed = time.monotonic() - started
    assert got == [(0.0, True), (0.0, True), (1.0, False), (0.0, False)]
    assert elapsed < 2 * (4.0 + 3.0) + 30, elapsed  # two deadlines (one worker), its restarts
    result = compute_score("code", right, json.dumps(ADD), mode="code", deadline_s=4.0)
    assert result == {"score": 1.0, TIMEOUT_KEY: 0.0, FORMAT_KEY: 1.0, PASSED_KEY: 1.0}
    assert compute_score("code", right, "not json", mode="code") == {
        "score": 0.0,
        TIMEOUT_KEY: 0.0,
        FORMAT_KEY: 1.0,
        PASSED_KEY: 0.0,
    }  # a broken row scores wrong; training goes on
    assert compute_score("code", "no code", ADD, mode="code")[FORMAT_KEY] == 0.0


def test_the_deadline_reaches_verl_only_when_it_is_not_the_default():
    key = "+reward.custom_reward_function.reward_kwargs.deadline_s"
    assert key not in reward_function_config("math")  # existing specs: the same overrides
    assert reward_function_config("code", 30)[key] == 30.0
    every = "+reward.custom_reward_function.reward_kwargs.all_tests"
    assert every not in reward_function_config("code")  # partial credit off: stop at a failure
    assert reward_function_config("code", all_tests=True)[every] is True


# four stdin tests of "print the sum"; the half solution is right only when a == 1
SUM4 = {
    "tests": [
        {"input": f"{a} {b}\n", "output": f"{a + b}\n", "testtype": "stdin"}
        for a, b in ((1, 2), (3, 4), (1, 5), (6, 7))
    ],
    "time_limit_s": 2,
}
HALF = "```python\na, b = map(int, input().split())\nprint(a + b if a == 1 else 0)\n```"
SLOW = "```python\nimport time\na, b = map(int, input().split())\nif a != 1:\n    time.sleep(60)\nprint(a + b)\n```"


@needs_sandbox
def test_the_fraction_of_tests_passed_comes_from_the_sandbox_runs():
    """code_partial_credit's input: a solution passing 2 of 4 tests in the real sandbox has a
    fraction of 0.5 when every test runs (all_tests) and 0.25 when the run stops at its first
    failure (test 2 of 4 fails); its score stays 0, a right one scores 1 with a fraction of 1,
    and one whose failing tests hang is a timeout with a fraction of 0."""
    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    got = code_grades([(HALF, SUM4), (right, json.dumps(SUM4))], deadline_s=30.0, all_tests=True)
    assert got == [(0.0, False, 0.5), (1.0, False, 1.0)]
    # stopping at the first failure (the default): test 1 passed, test 2 failed, no more ran
    assert code_grades([(HALF, SUM4)], deadline_s=30.0) == [(0.0, False, 0.25)]
    result = compute_score("code", HALF, json.dumps(SUM4), mode="code", all_tests=True)
    assert result == {"score": 0.0, TIMEOUT_KEY: 0.0, FORMAT_KEY: 1.0, PASSED_KEY: 0.5}
    slow = compute_score("code", SLOW, SUM4, mode="code", deadline_s=30.0, all_tests=True)
    assert slow["score"] == 0.0 and slow[TIMEOUT_KEY] == 1.0 and slow[PASSED_KEY] == 0.0


@needs_sandbox
def test_validation_grades_each_row_by_its_task():
    """verl's validation (evaluation.grade_answers): a code row (LiveCodeBench, HumanEval) runs
    its tests in the sandbox, a math row goes to the math grader, in the suite's order."""
    from rollcli.backends.verl.evaluation import grade_answers

    right = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    texts = ["\\boxed{4}", right, "\\boxed{5}", "```python\nprint(0)\n```"]
    golds = ["4", json.dumps(ADD), "4", json.dumps(ADD)]
    assert grade_answers(texts, golds, DEADLINE) == [
        (1.0, False),
        (1.0, False),  # graded as math it would be wrong: no \boxed{}
        (0.0, False),
        (0.0, False),
    ]
