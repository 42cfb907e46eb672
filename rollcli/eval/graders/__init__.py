"""Graders: math (math-verify in a killable process pool, plus a string fallback) and code
(LiveCodeBench-style comparison of programs run in a sandbox)."""

from rollcli.eval.graders.code import CodeResult, extract_code, grade_code, stdout_matches
from rollcli.eval.graders.math import MathResult, extract_answer, grade_fallback, normalize_answer
from rollcli.eval.graders.pool import GradingPoolError, MathGradingPool
from rollcli.eval.graders.sandbox import SandboxLimits, SandboxRun, run_in_sandbox

__all__ = [
    "CodeResult",
    "GradingPoolError",
    "MathGradingPool",
    "MathResult",
    "SandboxLimits",
    "SandboxRun",
    "extract_answer",
    "extract_code",
    "grade_code",
    "grade_fallback",
    "normalize_answer",
    "run_in_sandbox",
    "stdout_matches",
]
