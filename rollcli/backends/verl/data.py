"""Convert training sets and benchmarks into verl's RL parquet format, with rollcli's prompt.

One row per problem, the columns verl's ``RLHFDataset`` and reward functions read::

    data_source   "math_train" | "aime24" | ...          (selects verl's reward fn when reward: verl)
    prompt        [{"role": "user", "content": "<question>\\n<instruction>"}]
    ability       "math"
    reward_model  {"style": "rule", "ground_truth": "<gold>"}
    extra_info    {"index": i, "prompt_id": i, "k": <samples for avg@k>, "split": ...}

``prompt_id`` is the row's position in the file: the allocator's prompt ids are exactly these,
so the trainer can map an ask to rows. Sources: the shipped MATH train set (``math_train``), the
shipped benchmarks by name, or any ``.json``/``.jsonl``/``.parquet`` file with problem/answer
fields (``problem``|``question``|``prompt`` and ``answer``|``final_answer``|``solution``), or a
code training set: records with ``problem`` and ``tests`` (:mod:`rollcli.eval.benchmarks.code_tasks`),
whose ground truth is the task's JSON and whose prompt is LiveCodeBench's format (``ability:
code``; train them with ``reward: code``). The code benchmarks of an eval suite (LiveCodeBench
from its local release, ``eval.livecodebench``; HumanEval) become code rows the same way, so
verl's validation grades them in the sandbox. pandas and pyarrow are imported lazily.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rollcli.errors import RollcliError
from rollcli.eval.benchmarks.code_tasks import (
    is_code_task,
    problem_task_json,
    task_json,
    task_problem,
)

__all__ = [
    "DataError",
    "INSTRUCTION",
    "is_code_gold",
    "prepare_dataset",
    "prepare_eval_suite",
    "load_records",
    "write_parquet",
]

try:  # the eval package owns the template; keep one wording everywhere
    from rollcli.eval.benchmarks.prompts import MATH_INSTRUCTION as INSTRUCTION
except ImportError:  # pragma: no cover - eval package not installed yet
    INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."

TRAIN_SETS = {
    "math_train": "math_train_deepscaler.json",
    "gsm8k_train": "gsm8k_train.jsonl",
    "toy_code": "toy_code.jsonl",  # 48 A+B stdin tasks written for the CPU code-reward run
}


class DataError(RollcliError):
    """A data source that cannot be converted (missing, no problem/answer fields, empty)."""


def _shipped_train_file(name: str) -> Path:
    from importlib import resources

    filename = TRAIN_SETS[name]
    ref = resources.files("rollcli.data.train").joinpath(filename)
    if ref.is_file():
        return Path(str(ref))
    raise DataError(
        f"training set {name!r} ({filename}) is not shipped with this rollcli "
        "(rollcli/data/PROVENANCE.md names its public source); download it and give its path "
        "as backend.train_data"
    )


def _read_file(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise DataError(f"data file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pandas as pd

        return pd.read_parquet(path).to_dict(orient="records")
    text = path.read_text("utf-8")
    if suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if suffix == ".json":
        data = json.loads(text)
        if isinstance(data, Mapping):
            data = data.get("data", data.get("rows", []))
        return list(data)
    raise DataError(f"{path}: expected .json, .jsonl or .parquet, got {suffix!r}")


def _question_answer(row: Mapping[str, Any], where: str) -> tuple[str, str]:
    question = next((row[k] for k in ("problem", "question", "prompt") if row.get(k)), None)
    if isinstance(question, list):  # already chat messages (a verl parquet)
        question = question[-1]["content"]
    if is_code_task(row):  # a code task: the gold is its tests (rollcli.eval.benchmarks.code_tasks)
        if question is None:
            raise DataError(f"{where}: a code task needs a problem/question field")
        try:
            return str(question), task_json(row)
        except (ValueError, TypeError) as error:
            raise DataError(f"{where}: {error}") from error
    answer = next(
        (row[k] for k in ("answer", "final_answer", "ground_truth") if row.get(k) is not None),
        None,
    )
    if answer is None and isinstance(row.get("reward_model"), Mapping):
        answer = row["reward_model"].get("ground_truth")
    if answer is None and row.get("solution"):
        from rollcli.eval.benchmarks.math_sets import last_boxed

        answer = last_boxed(str(row["solution"]))
    if isinstance(answer, list):
        answer = answer[0] if answer else None
    if question is None or answer is None:
        raise DataError(f"{where}: needs problem/question and answer fields, has {sorted(row)}")
    if isinstance(answer, float) and answer.is_integer():
        answer = int(answer)
    return str(question), str(answer).strip().strip("$").strip()


def _usable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop records without a gold answer (4 of the 7,474 MATH train problems have none)."""
    return [
        r
        for r in rows
        if is_code_task(r) or any(r.get(k) not in (None, "") for k in ("answer", "final_answer"))
    ]


def load_records(source: str) -> tuple[str, list[tuple[str, str]]]:
    """``(data_source, [(question, gold), ...])`` of a shipped set name or a file path.

    Training sets drop records without an answer; any other unusable record is an error.
    """
    if source in TRAIN_SETS:
        rows = _usable(_read_file(_shipped_train_file(source)))
        return source, [_question_answer(r, f"{source}[{i}]") for i, r in enumerate(rows)]
    path = Path(source)
    if not path.suffix:
        from rollcli.eval.benchmarks.math_sets import MATH_FILES, load_math_set

        if source not in MATH_FILES:
            raise DataError(
                f"unknown data source {source!r}: give a file path, a training set "
                f"({', '.join(TRAIN_SETS)}) or a benchmark ({', '.join(MATH_FILES)})"
            )
        return source, [(p.question, str(p.answer)) for p in load_math_set(source)]
    rows = _read_file(path)
    name = str(rows[0].get("data_source", path.stem)) if rows else path.stem
    return name, [_question_answer(r, f"{path}[{i}]") for i, r in enumerate(rows)]


def is_code_gold(gold: str) -> bool:
    """Whether a row's ground truth is a code task's JSON (else a math answer)."""
    return gold.startswith('{"') and '"tests":' in gold


def _prompt(question: str, gold: str) -> list[dict[str, str]]:
    if not is_code_gold(gold):
        return [{"role": "user", "content": f"{question}\n{INSTRUCTION}"}]
    from rollcli.eval.benchmarks.prompts import messages_for

    return messages_for(task_problem(gold, question=question))  # LiveCodeBench's format


def _rows(
    data_source: str, records: Sequence[tuple[str, str]], *, split: str, k: int = 1
) -> list[dict[str, Any]]:
    return [
        {
            "data_source": data_source,
            "prompt": _prompt(question, gold),
            "ability": "code" if is_code_gold(gold) else "math",
            "reward_model": {"style": "rule", "ground_truth": gold},
            "extra_info": {"index": i, "prompt_id": i, "k": int(k), "split": split},
        }
        for i, (question, gold) in enumerate(records)
    ]


def write_parquet(rows: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Write rows as parquet atomically (temp file + rename through rollcli.store.atomic)."""
    import io

    import pandas as pd

    from rollcli.store.atomic import atomic_write_bytes

    if not rows:
        raise DataError(f"refusing to write an empty dataset to {path}")
    buffer = io.BytesIO()
    pd.DataFrame(list(rows)).to_parquet(buffer, index=False)
    atomic_write_bytes(path, buffer.getvalue())
    return Path(path)


def prepare_dataset(
    source: str, out: str | Path, *, split: str = "train", limit: int | None = None, k: int = 1
) -> tuple[Path, int]:
    """Convert one source to a verl parquet at ``out``; returns (path, number of rows)."""
    name, records = load_records(source)
    if limit is not None:
        records = records[:limit]
    if not records:
        raise DataError(f"data source {source!r} has no records")
    return write_parquet(_rows(name, records, split=split, k=k), out), len(records)


def _code_benchmark(
    name: str, limit: int | None, livecodebench: Mapping[str, Any] | None
) -> list[tuple[str, str]]:
    """A code benchmark's problems as (question, task JSON); LiveCodeBench from its local
    release (``eval.livecodebench``), an unreadable one named as that field."""
    from rollcli.eval.benchmarks import load_benchmark
    from rollcli.eval.benchmarks.base import BenchmarkError

    options: dict[str, Any] = {}
    if name == "livecodebench":
        lcb = dict(livecodebench or {})
        if not lcb.get("path"):
            raise DataError(
                "eval.livecodebench.path: livecodebench needs the local copy of its official "
                "release (the code_generation_lite jsonl file or folder)"
            )
        options = {"path": lcb["path"], "version": str(lcb.get("version") or "v6")}
    try:
        problems = load_benchmark(name, limit=limit, **options)
    except (BenchmarkError, OSError) as error:
        field = "eval.livecodebench" if name == "livecodebench" else f"benchmark {name}"
        raise DataError(f"{field}: {error}") from error
    return [(p.question, problem_task_json(p)) for p in problems]


def prepare_eval_suite(
    suite: Sequence[str],
    out: str | Path,
    *,
    samples: Mapping[str, int] | None = None,
    limit: int | None = None,
    livecodebench: Mapping[str, Any] | None = None,
) -> tuple[Path, int]:
    """All benchmarks of an eval suite in one parquet; ``extra_info.k`` is each one's avg@k.

    Code benchmarks (``livecodebench`` from ``livecodebench = {path, version}``, ``humaneval``)
    become code rows (LiveCodeBench's prompt, the task's JSON as ground truth)."""
    from rollcli.eval.benchmarks import BENCHMARKS

    samples = dict(samples or {})
    rows: list[dict[str, Any]] = []
    for bench in suite:
        if bench in BENCHMARKS and BENCHMARKS[bench].kind == "code":
            name, records = bench, _code_benchmark(bench, limit, livecodebench)
        else:
            name, records = load_records(bench)
        if limit is not None:
            records = records[:limit]
        rows.extend(_rows(name, records, split="test", k=int(samples.get(bench, 1))))
    for i, row in enumerate(rows):
        row["extra_info"] = {**row["extra_info"], "index": i}
    return write_parquet(rows, out), len(rows)
