"""Loaders for the math benchmarks shipped in ``rollcli/data/benchmarks`` (see PROVENANCE.md).

Each set stores its gold answer differently; every loader returns it as one string so the
graders see a single format:

- aime24: ``answer`` is a string; aime25: an int; amc23: a float (``27.0``: integral floats
  become ``"27"``, math-verify compares numerically either way);
- math500: ``answer`` (LaTeX string);
- minerva_math: no answer field, the gold is the last ``\\boxed{}`` of ``solution`` (as the Qwen
  harness extracts it);
- olympiadbench: ``final_answer`` is a list; the gold is its first item stripped of ``$``;
- gsm8k: the text after ``####`` in ``answer`` (thousands separators removed).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from rollcli.eval.benchmarks.base import BenchmarkError, Problem

__all__ = ["load_math_set", "last_boxed", "read_shipped_jsonl", "MATH_FILES"]

MATH_FILES = {
    "aime24": "aime24.jsonl",
    "aime25": "aime25.jsonl",
    "amc23": "amc23.jsonl",
    "math500": "math500.jsonl",
    "minerva_math": "minerva_math.jsonl",
    "olympiadbench": "olympiadbench.jsonl",
    "gsm8k": "gsm8k_test.jsonl",
}


def read_shipped_jsonl(filename: str) -> list[dict[str, Any]]:
    """Rows of a JSONL file in ``rollcli.data.benchmarks`` (read through importlib.resources)."""
    ref = resources.files("rollcli.data.benchmarks").joinpath(filename)
    if not ref.is_file():
        raise BenchmarkError(f"benchmark file {filename} is missing from the rollcli package")
    text = ref.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in ``text``, braces balanced.

    ``\\boxed 5`` (no braces, legal LaTeX) gives the token after the space.
    """
    boxed, fbox = text.rfind("\\boxed"), text.rfind("\\fbox")
    start = max(boxed, fbox)
    if start < 0:
        return None
    i = start + (len("\\boxed") if start == boxed else len("\\fbox"))
    if text[i : i + 1] == " ":
        rest = text[i:].split()
        return rest[0].rstrip("$.") if rest else None
    if text[i : i + 1] != "{":
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return None


def _number_to_str(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _gold(name: str, row: dict[str, Any]) -> str:
    if name in ("aime24", "aime25", "amc23", "math500"):
        return _number_to_str(row["answer"])
    if name == "minerva_math":
        box = last_boxed(row["solution"])
        if box is None:
            raise BenchmarkError(f"minerva_math record {row.get('idx')} has no \\boxed in solution")
        return box.strip()
    if name == "olympiadbench":
        answers = row["final_answer"]
        if not answers:
            raise BenchmarkError(f"olympiadbench record {row.get('id')} has an empty final_answer")
        return answers[0].strip("$").strip()
    if name == "gsm8k":
        if "####" not in row["answer"]:
            raise BenchmarkError("gsm8k record without '####' in its answer")
        return row["answer"].split("####")[-1].strip().replace(",", "")
    raise BenchmarkError(f"no gold-answer rule for {name}")


def _question(name: str, row: dict[str, Any]) -> str:
    if name in ("olympiadbench", "gsm8k"):
        return row["question"]
    return row["problem"]


def _id(name: str, index: int, row: dict[str, Any]) -> str:
    raw = row.get("unique_id", row.get("id", row.get("idx")))
    return f"{name}/{raw if raw is not None else index}"


def load_math_set(name: str) -> list[Problem]:
    """All problems of a shipped math benchmark, gold answers normalised to strings."""
    if name not in MATH_FILES:
        raise BenchmarkError(f"unknown math benchmark {name!r}; valid: {', '.join(MATH_FILES)}")
    rows = read_shipped_jsonl(MATH_FILES[name])
    problems = []
    for index, row in enumerate(rows):
        meta = {
            k: row[k]
            for k in ("subject", "level", "type", "subfield", "is_multiple_answer", "unit")
            if k in row
        }
        if name == "olympiadbench":
            meta["final_answers"] = [a.strip("$").strip() for a in row["final_answer"]]
        problems.append(
            Problem(
                id=_id(name, index, row),
                question=_question(name, row),
                kind="math",
                answer=_gold(name, row),
                metadata=meta,
            )
        )
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        # ids must be unique: resume keys on them
        problems = [
            Problem(p.id + f"#{i}", p.question, p.kind, p.answer, metadata=p.metadata)
            for i, p in enumerate(problems)
        ]
    return problems
