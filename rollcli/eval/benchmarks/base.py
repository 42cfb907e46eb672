"""Value types shared by every benchmark loader: a problem, a code test, a benchmark entry.

A ``Problem`` is what the runner needs and nothing more: an id stable across runs (resume keys
on it), the question text, the normalised gold answer (math) or the tests (code), and the
starter code and function name LiveCodeBench problems carry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from rollcli.errors import RollcliError

__all__ = ["CodeTest", "Problem", "BenchmarkInfo", "BenchmarkError"]


class BenchmarkError(RollcliError, ValueError):
    """A benchmark that cannot be loaded (unknown name, missing file, malformed record).

    A :class:`RollcliError`, so the CLI prints it as one line."""


@dataclass(frozen=True)
class CodeTest:
    """One code test: ``stdin`` (program reads input, prints output), ``functional`` (``input``
    is one JSON value per line, the arguments of ``Solution().<func_name>``; ``output`` the
    JSON of the result) or ``assert`` (HumanEval: ``input`` is test code run after the
    solution, which passes when the program runs to its end; ``output`` is unused)."""

    input: str
    output: str
    testtype: Literal["stdin", "functional", "assert"]


@dataclass(frozen=True)
class Problem:
    """One evaluation item. ``answer`` is the gold string for math; ``tests`` for code.

    ``time_limit_s`` is a code problem's own per-test limit (None: the grader's default).
    """

    id: str
    question: str
    kind: Literal["math", "code"]
    answer: str | None = None
    tests: tuple[CodeTest, ...] = ()
    starter_code: str = ""
    func_name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    time_limit_s: float | None = None


@dataclass(frozen=True)
class BenchmarkInfo:
    """A registry entry: how to load a benchmark and what kind of grader it needs."""

    name: str
    kind: Literal["math", "code"]
    loader: Callable[..., list[Problem]]
    description: str
