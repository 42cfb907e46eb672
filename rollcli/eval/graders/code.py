"""Code grading the way LiveCodeBench does it, on top of :mod:`rollcli.eval.graders.sandbox`.

- The program is the last fenced code block of the response.
- ``stdin`` tests: both outputs are stripped and split into lines, stripped again; equal line
  counts are required; a line matches if the strings are equal or if both parse as
  whitespace-separated decimals with equal values (``2.50`` matches ``2.5``).
- ``functional`` tests: ``Solution().<func_name>(*args)`` with one JSON value per input line;
  the result (tuples become lists) must equal ``json.loads(expected)``.
- Tests run in order in one sandbox per solution, stopping at the first failure; a problem is
  solved when every test (public and private) passes.
- Every grading error is a failed verdict with a reason, never an exception: a sandbox that
  cannot be built (``status: sandbox_unavailable``), odd output (signalling NaNs, numbers past
  any exponent, nesting past the recursion limit), a problem with no ``func_name``, or a bug
  here (``status: grader_error``).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from decimal import Decimal

from rollcli.eval.benchmarks.base import Problem
from rollcli.eval.graders.sandbox import (
    SandboxLimits,
    SandboxUnavailable,
    TestOutcome,
    run_in_sandbox,
)

log = logging.getLogger(__name__)

__all__ = ["CodeResult", "extract_code", "stdout_matches", "functional_matches", "grade_code"]

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class CodeResult:
    correct: bool
    extracted: str | None
    num_passed: int
    num_tests: int
    status: str  # passed | wrong_answer | runtime_error | timeout | no_code
    #              | sandbox_unavailable | grader_error
    detail: str = ""


def extract_code(response: str) -> str | None:
    """The last fenced block (preferring python-tagged ones); None when there is none."""
    blocks = _FENCE.findall(response)
    if not blocks:
        return None
    python = [body for lang, body in blocks if lang.lower() in ("python", "python3", "py")]
    body = (python or [body for _, body in blocks])[-1]
    return body if body.strip() else None


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line: str) -> list[Decimal] | None:
    try:
        values = [Decimal(token) for token in line.split()]
    except ArithmeticError:  # decimal.InvalidOperation and friends
        return None
    return None if any(v.is_nan() for v in values) else values  # sNaN == x raises


def _numbers_equal(a: str, b: str) -> bool:
    da, db = _decimals(a), _decimals(b)
    if da is None or db is None or len(da) != len(db):
        return False
    try:
        return all(x == y for x, y in zip(da, db, strict=True))
    except ArithmeticError:
        return False


def stdout_matches(expected: str, actual: str) -> bool:
    """LiveCodeBench's stdout comparison (line by line; numeric lines as decimals)."""
    want, got = _lines(expected), _lines(actual)
    if len(want) != len(got):
        return False
    return all(a == b or _numbers_equal(a, b) for a, b in zip(want, got, strict=True))


def functional_matches(expected: str, actual: str) -> bool:
    """``json.loads(actual) == json.loads(expected)``; anything unparsable is a mismatch."""
    try:
        return bool(json.loads(actual) == json.loads(expected))
    except (ValueError, RecursionError, ArithmeticError, TypeError):
        return False


def grade_code(
    problem: Problem, response: str, limits: SandboxLimits = SandboxLimits()
) -> CodeResult:
    """Run the response's program on every test of ``problem``; stop at the first failure.

    Never raises: every failure to grade is a failed verdict whose ``detail`` says why.
    """
    code = extract_code(response)
    num_tests = len(problem.tests)
    if code is None:
        return CodeResult(False, None, 0, num_tests, "no_code")
    try:
        return _grade(problem, code, limits)
    except SandboxUnavailable as error:
        return CodeResult(False, code, 0, num_tests, "sandbox_unavailable", str(error))
    except Exception as error:  # noqa: BLE001 - one bad sample must not end an evaluation
        log.exception("grading %s failed", problem.id)
        detail = f"{type(error).__name__}: {error}"[:500]
        return CodeResult(False, code, 0, num_tests, "grader_error", detail)


def _grade(problem: Problem, code: str, limits: SandboxLimits) -> CodeResult:
    num_tests = len(problem.tests)
    if not num_tests:
        return CodeResult(False, code, 0, 0, "grader_error", f"{problem.id} has no tests")
    functional = problem.tests[0].testtype == "functional"
    if functional and not problem.func_name:
        detail = f"{problem.id}: functional tests but no metadata.func_name"
        return CodeResult(False, code, 0, num_tests, "grader_error", detail)
    compare = functional_matches if functional else stdout_matches
    verdicts: list[bool] = []

    def check(outcome: TestOutcome) -> bool:
        ok = outcome.status == "ok" and compare(problem.tests[outcome.index].output, outcome.out)
        verdicts.append(ok)
        return ok

    run = run_in_sandbox(
        code,
        [t.input for t in problem.tests],
        mode="functional" if functional else "stdin",
        func_name=problem.func_name,
        limits=limits,
        on_outcome=check,
    )
    passed = sum(verdicts)
    if passed == num_tests:
        return CodeResult(True, code, passed, num_tests, "passed")
    last = run.outcomes[-1] if run.outcomes else None
    if last is None or last.status == "missing" or verdicts[-1:] == [True]:
        # no row for the failing test: the sandbox died (a limit) or its stream was refused
        status = "runtime_error"
        detail = run.killed_reason or run.stderr_tail[-300:] or "no result (killed by a limit)"
    elif last.status == "timeout":
        status, detail = "timeout", last.error
    elif last.status in ("error", "killed"):
        status, detail = "runtime_error", last.error
    else:
        status, detail = "wrong_answer", f"test {last.index}"
    return CodeResult(False, code, passed, num_tests, status, detail)
