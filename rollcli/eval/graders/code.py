"""Code grading the way LiveCodeBench does it, on top of :mod:`rollcli.eval.graders.sandbox`.

- The program is the last fenced code block of the response.
- ``stdin`` tests: both outputs are stripped and split into lines, stripped again; equal line
  counts are required; a line matches if the strings are equal or if both parse as
  whitespace-separated decimals with equal values (``2.50`` matches ``2.5``).
- ``functional`` tests: ``Solution().<func_name>(*args)`` with one JSON value per input line;
  the result (tuples become lists) must equal ``json.loads(expected)``.
- Tests run in order in one sandboxed process per solution, stopping at the first failure; a
  problem is solved when every test (public and private) passes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from rollcli.eval.benchmarks.base import Problem
from rollcli.eval.graders.sandbox import SandboxLimits, TestOutcome, run_in_sandbox

__all__ = ["CodeResult", "extract_code", "stdout_matches", "functional_matches", "grade_code"]

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class CodeResult:
    correct: bool
    extracted: str | None
    num_passed: int
    num_tests: int
    status: str  # passed | wrong_answer | runtime_error | timeout | no_code
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
        return [Decimal(token) for token in line.split()]
    except InvalidOperation:
        return None


def stdout_matches(expected: str, actual: str) -> bool:
    """LiveCodeBench's stdout comparison (line by line; numeric lines as decimals)."""
    want, got = _lines(expected), _lines(actual)
    if len(want) != len(got):
        return False
    for a, b in zip(want, got, strict=False):
        if a == b:
            continue
        da, db = _decimals(a), _decimals(b)
        if da is None or db is None or da != db:
            return False
    return True


def functional_matches(expected: str, actual: str) -> bool:
    try:
        return json.loads(actual) == json.loads(expected)
    except ValueError:
        return False


def grade_code(
    problem: Problem, response: str, limits: SandboxLimits = SandboxLimits()
) -> CodeResult:
    """Run the response's program on every test of ``problem``; stop at the first failure."""
    code = extract_code(response)
    num_tests = len(problem.tests)
    if code is None:
        return CodeResult(False, None, 0, num_tests, "no_code")
    functional = problem.tests[0].testtype == "functional"
    if functional and not problem.func_name:
        raise ValueError(f"{problem.id}: functional tests but no metadata.func_name")
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
    if last is None or last.status == "missing":
        status = "runtime_error"
        detail = run.killed_reason or run.stderr_tail[-300:] or "no result (killed by a limit)"
    elif last.status == "timeout":
        status, detail = "timeout", last.error
    elif last.status == "error":
        status, detail = "runtime_error", last.error
    else:
        status, detail = "wrong_answer", f"test {last.index}"
    return CodeResult(False, code, passed, num_tests, status, detail)
