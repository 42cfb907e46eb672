"""Math grading: known equivalent/non-equivalent pairs, numeric golds, the fallback, deadlines."""

from __future__ import annotations

import time

import pytest

from rollcli.eval.graders.math import (
    exact_match,
    extract_answer,
    grade_fallback,
    normalize_answer,
)
from rollcli.eval.graders.pool import MathGradingPool

EQUIVALENT = [
    ("\\frac{1}{2}", "so the answer is \\boxed{\\dfrac{1}{2}}"),
    ("\\frac{1}{2}", "\\boxed{0.5}"),
    ("27", "We get \\boxed{27.0}"),
    ("27.0", "Thus \\boxed{27}."),  # AMC-style float gold written as a string
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "\\boxed{(3, \\frac{\\pi}{2})}"),
    ("[-2, 5)", "The solution set is \\boxed{[-2,5)}"),
    ("(-\\infty, 1] \\cup [3, \\infty)", "\\boxed{(-\\infty,1]\\cup[3,\\infty)}"),
    ("2\\sqrt{3}", "\\boxed{\\sqrt{12}}"),
    ("x^2 + 2x + 1", "\\boxed{(x+1)^2}"),
    ("70", "first \\boxed{12}, then corrected: \\boxed{70}"),  # the last box counts
]
NOT_EQUIVALENT = [
    ("\\frac{1}{2}", "\\boxed{\\frac{1}{3}}"),
    ("27", "\\boxed{28}"),
    ("[-2, 5)", "\\boxed{[-2, 5]}"),
    ("(0, 1)", "\\boxed{[0, 1]}"),
    ("70", "\\boxed{70} at first but the answer is \\boxed{71}"),
    ("5", "I do not know."),
]
PATHOLOGICAL = [
    "\\boxed{9^{9^{9^{9^{9^{9}}}}}}",
    "\\boxed{10^{10^{10^{10^{10}}}}!}",
    "\\boxed{" + "(" * 3000 + "1" + ")" * 3000 + "}",
]
# inputs that made the old string fallback's regexes backtrack quadratically (85 s for one)
N = 200_000
SLOW_FOR_REGEXES = {
    "box-spaces": "\\boxed{1" + " " * N + "x}",
    "box-tabs-newlines": "\\boxed{1" + " \t\n" * (N // 3) + "x}",
    "answer-spaces": ("answer" + " " * 3990 + "x") * 50,
    "answer-colon-blank": "Answer:" + " " * N,
    "unit-like": "\\boxed{" + "sq " * (N // 3) + "x}",
    "digits-commas": "\\boxed{" + "1," * (N // 2) + "}",
    "fracs": "\\boxed{" + "\\frac{" * (N // 6) + "}",
    "parens-digits": "\\boxed{" + "(1" * (N // 2) + "}",
    "no-box-digits": "1," * N,
}


@pytest.fixture(scope="module")
def pool():
    """For correctness: a deadline no loaded machine reaches (the deadline tests use their own)."""
    with MathGradingPool(num_workers=2, deadline_s=30.0) as grading_pool:
        yield grading_pool


@pytest.fixture(scope="module")
def tight_pool():
    with MathGradingPool(num_workers=2, deadline_s=2.0) as grading_pool:
        yield grading_pool


def test_equivalent_pairs_are_correct(pool):
    results = pool.grade(EQUIVALENT)
    for (gold, response), result in zip(EQUIVALENT, results, strict=True):
        assert result.correct, (gold, response, result)
        assert result.extracted is not None
    assert results[-1].extracted is not None and "70" in results[-1].extracted


def test_wrong_answers_are_wrong(pool):
    for (gold, response), result in zip(NOT_EQUIVALENT, pool.grade(NOT_EQUIVALENT), strict=True):
        assert not result.correct, (gold, response, result)


@pytest.mark.slow
def test_pathological_inputs_return_within_deadline(tight_pool):
    pool = tight_pool
    pool.grade([("1", "\\boxed{1.0}")] * 2)  # workers started and warm: time only the grading
    for response in PATHOLOGICAL:
        _wait_ready(pool)  # a killed worker's replacement imports math-verify first
        started = time.monotonic()
        [result] = pool.grade([("5", response)])
        elapsed = time.monotonic() - started
        assert elapsed < pool.deadline_s + 1.5, (response[:40], elapsed)
        assert not result.correct
    # the pool keeps working after killing workers
    assert pool.grade([("3", "\\boxed{3}")])[0].correct


def test_timeout_falls_back_to_strings():
    tower = "9^{9^{9^{9^{9^{9}}}}}"
    with MathGradingPool(num_workers=1, deadline_s=0.5, exact_first=False) as fast_pool:
        [result] = fast_pool.grade([("5", f"\\boxed{{{tower}}}")])
        assert result.method == "timeout" and fast_pool.num_killed == 1
        assert not result.correct and result.extracted == tower  # graded by the fallback
        assert fast_pool.grade([("2", "\\boxed{2.0}")])[0].correct  # the respawned worker


def test_exact_match_decides_only_literal_answers():
    assert exact_match("\\frac{1}{2}", "so \\boxed{\\dfrac{1}{2} }").method == "exact"
    assert exact_match("5", "\\boxed{5\\text{ cm}}") is None
    assert exact_match("0.5", "\\boxed{\\frac12}") is None  # left to math-verify


def test_fallback_grader_and_extraction():
    assert extract_answer("blah \\boxed{\\frac{3}{4}} end") == "\\frac{3}{4}"
    assert extract_answer("Final answer: 42.") == "42"
    assert extract_answer("we count 3 apples and 5 pears") == "5"
    assert extract_answer("no digits") is None
    assert extract_answer("put it within \\boxed{}. I think 12.") == "12"  # empty box: echo
    assert normalize_answer("\\dfrac{3}{4}") == normalize_answer("\\frac34")
    assert grade_fallback("27.0", "\\boxed{27}").correct
    assert grade_fallback("1,000", "\\boxed{1000}").correct
    assert grade_fallback("90^\\circ", "\\boxed{90}").correct
    assert grade_fallback("\\text{(B)}", "\\boxed{(B)}").correct
    result = grade_fallback("27", "\\boxed{26}")
    assert not result.correct and result.extracted == "26"


def test_shipped_golds_match_their_own_solutions(pool):
    """MATH-500 golds agree with the boxed answers of their reference solutions."""
    from rollcli.eval.benchmarks.math_sets import read_shipped_jsonl

    rows = read_shipped_jsonl("math500.jsonl")[:60]
    results = pool.grade([(r["answer"], r["solution"]) for r in rows])
    assert sum(r.correct for r in results) >= 57


@pytest.mark.parametrize("name", sorted(SLOW_FOR_REGEXES))
def test_fallback_is_linear_on_adversarial_text(name):
    """200k-character inputs built against each regex: well under a second of CPU each."""
    text = SLOW_FOR_REGEXES[name]
    started = time.process_time()
    result = grade_fallback("5", text)
    assert time.process_time() - started < 1.0, name
    assert not result.correct
    assert result.extracted is None or len(result.extracted) <= 2000


def test_every_answer_returns_within_deadline_plus_one_second():
    """Math-verify-stalling and regex-stalling inputs, a 10 MB response, two at once: each call
    returns within the deadline + 1 s, and two stuck workers are killed together."""
    deadline = 1.0
    tower = "\\boxed{9^{9^{9^{9^{9^{9}}}}}}"
    inputs = [tower, "\\boxed{" + "(" * 3000 + "1" + ")" * 3000 + "}", "x" * 10_000_000]
    inputs += list(SLOW_FOR_REGEXES.values())[:3]
    with MathGradingPool(num_workers=2, deadline_s=deadline, exact_first=False) as pool:
        pool.grade([("1", "\\boxed{1.0}")] * 2)  # started and warm
        for response in inputs:
            _wait_ready(pool)
            started = time.monotonic()
            [result] = pool.grade([("5", response)])
            assert time.monotonic() - started < deadline + 1.0, response[:40]
            assert not result.correct
        _wait_ready(pool)
        started = time.monotonic()
        results = pool.grade([("5", tower), ("6", tower)])
        assert time.monotonic() - started < deadline + 1.0  # not 2 x deadline
        assert [r.method for r in results] == ["timeout", "timeout"]
        assert pool.grade([("3", "\\boxed{3}")])[0].correct


def _wait_ready(pool, timeout=60.0):
    """Let replacement workers finish importing math-verify (not part of an answer's time)."""
    from multiprocessing.connection import wait

    limit = time.monotonic() + timeout
    while not all(w.ready for w in pool._workers) and time.monotonic() < limit:
        for index, worker in enumerate(pool._workers):
            if not worker.ready and wait([worker.conn], timeout=0.05):
                pool._receive(index, worker, [], [], None)
