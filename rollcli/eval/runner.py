"""Evaluate a model on a benchmark suite: generate, grade, store per sample, summarise.

``evaluate(engine, suite, out_dir=...)`` renders each problem's prompt through the engine's
chat template, asks for the samples still missing, grades them (math in a
:class:`MathGradingPool`, code in the sandbox) and appends one row per sample to
``out_dir/samples.jsonl`` as each batch finishes: ``{benchmark, problem_id, sample_index,
response, extracted, correct, tokens, seconds, method}``. Re-running with the same settings
skips every stored sample, so an interrupted evaluation resumes where it stopped; different
settings in the same folder are refused. ``out_dir/summary.json`` gets avg@k, pass@k per
benchmark and their macro-average.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from rollcli.errors import RollcliError
from rollcli.eval.benchmarks import BENCHMARKS, Problem, load_benchmark, parse_suite, render_prompt
from rollcli.eval.engines.base import BaseEngine
from rollcli.eval.graders.code import grade_code_batch
from rollcli.eval.graders.pool import MathGradingPool
from rollcli.eval.graders.sandbox import SandboxLimits, SandboxPool
from rollcli.eval.metrics import benchmark_scores, macro_average
from rollcli.store.atomic import append_jsonl, atomic_write_json, read_json, read_jsonl

__all__ = [
    "EvalSettings",
    "evaluate",
    "load_suite",
    "SAMPLES_FILE",
    "SUMMARY_FILE",
    "SETTINGS_FILE",
]

SAMPLES_FILE, SUMMARY_FILE, SETTINGS_FILE = "samples.jsonl", "summary.json", "settings.json"


@dataclass(frozen=True)
class EvalSettings:
    """What an evaluation's numbers depend on (recorded, and checked on resume)."""

    suite: tuple[str, ...]
    k: int = 1
    temperature: float = 0.6
    top_p: float = 0.95
    max_tokens: int = 4096
    seed: int = 0
    limit: int | None = None
    model: str = ""
    engine: str = ""
    pass_ks: tuple[int, ...] = field(default=(1,))
    lcb_path: str | None = None
    lcb_version: str = "v6"

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")


class _RateColumn(ProgressColumn):
    def render(self, task) -> Text:  # noqa: ANN001 - rich's Task
        new = task.completed - task.fields.get("resumed", 0)
        speed = new / task.elapsed if task.elapsed else 0.0
        return Text(f"{speed:.2f} samples/s", style="progress.data.speed")


def _check_settings(out_dir: Path, settings: EvalSettings) -> dict[str, Any]:
    """Refuse a folder holding other settings; return the settings to store (not written yet:
    a model that fails to load must not leave a folder that refuses the corrected command)."""
    path = out_dir / SETTINGS_FILE
    current = asdict(settings)
    current = {k: list(v) if isinstance(v, tuple) else v for k, v in current.items()}
    if path.exists():
        stored = read_json(path)
        differs = {
            k
            for k in current
            if k not in ("suite", "pass_ks", "limit") and stored.get(k) != current[k]
        }
        if differs:
            raise RollcliError(
                f"{out_dir} holds an evaluation with different settings ({', '.join(sorted(differs))}); "
                "use another --out folder or the same settings to resume"
            )
        current["suite"] = sorted(set(stored.get("suite", [])) | set(current["suite"]))
    return current


class _LazyPool:
    """Starts the math workers, or the code sandboxes, on first use (a resumed, finished
    evaluation starts none)."""

    def __init__(
        self, num_workers: int | None, deadline_s: float, limits: SandboxLimits, num_code: int
    ) -> None:
        self.num_workers, self.deadline_s = num_workers, deadline_s
        self.limits, self.num_code = limits, num_code
        self.pool: MathGradingPool | None = None
        self.sandboxes: SandboxPool | None = None

    def grade(self, pairs):  # noqa: ANN001, ANN201 - same as MathGradingPool.grade
        if self.pool is None:
            self.pool = MathGradingPool(self.num_workers, deadline_s=self.deadline_s)
        return self.pool.grade(pairs)

    def grade_code(self, items: list[tuple[Problem, str]]):  # noqa: ANN201
        if self.sandboxes is None:
            self.sandboxes = SandboxPool(self.num_code, self.limits)
        return grade_code_batch(items, self.sandboxes)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        if self.sandboxes is not None:
            self.sandboxes.close()


def _grade(
    benchmark_kind: str, items: list[tuple[Problem, str]], pool: _LazyPool
) -> list[tuple[bool, str | None, str]]:
    if benchmark_kind == "math":
        results = pool.grade([(problem.answer or "", text) for problem, text in items])
        return [(r.correct, r.extracted, r.method) for r in results]
    return [(r.correct, r.extracted, r.status) for r in pool.grade_code(items)]


def load_suite(settings: EvalSettings) -> dict[str, list[Problem]]:
    """The problems of every benchmark in the suite (``limit`` applied)."""
    problems = {}
    for name in parse_suite(list(settings.suite)):
        options: dict[str, Any] = {}
        if name == "livecodebench":  # the one benchmark read from outside the package
            options = {"path": settings.lcb_path, "version": settings.lcb_version}
        problems[name] = load_benchmark(name, limit=settings.limit, **options)
    return problems


def evaluate(
    engine: BaseEngine | Callable[[], BaseEngine],
    settings: EvalSettings,
    out_dir: str | Path,
    *,
    num_grading_workers: int | None = None,
    math_deadline_s: float = 10.0,
    sandbox_limits: SandboxLimits = SandboxLimits(),
    console: Console | None = None,
    show_progress: bool = True,
    problems: dict[str, list[Problem]] | None = None,
) -> dict[str, Any]:
    """Evaluate ``engine`` on ``settings.suite``; returns (and writes) the summary.

    ``engine`` may be a zero-argument factory: it is then called only if some sample is still
    missing, so resuming a finished evaluation does not load the model.

    ``problems`` (from :func:`load_suite`) lets a caller load and validate the benchmarks
    before spending time on loading a model.
    """
    out_dir = Path(out_dir)
    suite = parse_suite(list(settings.suite))
    stored_settings = _check_settings(out_dir, settings)
    samples_path = out_dir / SAMPLES_FILE
    done: dict[tuple[str, str], dict[int, dict[str, Any]]] = defaultdict(dict)
    for row in read_jsonl(samples_path):
        done[(row["benchmark"], row["problem_id"])][row["sample_index"]] = row
    problems = problems or load_suite(settings)
    console = console or Console(stderr=True)
    pool = _LazyPool(num_grading_workers, math_deadline_s, sandbox_limits, num_grading_workers or 2)
    missing = sum(
        1
        for name in suite
        for p in problems[name]
        for i in range(settings.k)
        if i not in done[(name, p.id)]
    )
    code = [name for name in suite if BENCHMARKS[name].kind == "code"]
    if missing and code and not sandbox_limits.allow_weak:
        # before the model loads: without a sandbox every program would be graded 0
        from rollcli.eval.graders.sandbox.preflight import require_sandbox

        require_sandbox(f"eval suite: {', '.join(code)}")
    math = [name for name in suite if BENCHMARKS[name].kind == "math"]
    if missing and math:
        # before the model loads: without math-verify every math worker would fail
        from rollcli.extras import require_extra

        require_extra("eval", f"grading the math benchmarks ({', '.join(math)})")
    if missing and not isinstance(engine, BaseEngine):
        engine = engine()
    atomic_write_json(out_dir / SETTINGS_FILE, stored_settings)
    started = time.monotonic()
    num_new = 0
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _RateColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not show_progress,
    )
    try:
        with progress:
            for name in suite:
                num_new += _run_benchmark(
                    name, problems[name], engine, settings, done, samples_path, pool, progress
                )
    finally:
        pool.close()
    summary = _summarise(suite, problems, done, settings)
    summary["run"] = {"new_samples": num_new, "seconds": round(time.monotonic() - started, 3)}
    atomic_write_json(out_dir / SUMMARY_FILE, summary)
    return summary


def _run_benchmark(name, problems, engine, settings, done, samples_path, pool, progress) -> int:
    kind = BENCHMARKS[name].kind
    total = len(problems) * settings.k
    already = sum(1 for p in problems for i in done[(name, p.id)] if i < settings.k)
    task = progress.add_task(name, total=total, completed=already, resumed=already)
    # group problems by how many samples they still need (usually all k, or 0 when resuming)
    missing = [(p, [i for i in range(settings.k) if i not in done[(name, p.id)]]) for p in problems]
    missing = [(p, idx) for p, idx in missing if idx]
    if not missing:
        return 0
    step = max(1, engine.preferred_batch_prompts)
    num_new = 0
    for start in range(0, len(missing), step):
        chunk = missing[start : start + step]
        by_count: dict[int, list[tuple[Problem, list[int]]]] = defaultdict(list)
        for problem, indices in chunk:
            by_count[len(indices)].append((problem, indices))
        for count, group in by_count.items():
            prompts = [render_prompt(p, engine.tokenizer) for p, _ in group]
            t0 = time.monotonic()
            outputs = engine.generate(
                prompts,
                n=count,
                temperature=settings.temperature,
                top_p=settings.top_p,
                max_tokens=settings.max_tokens,
                seed=settings.seed + start * settings.k,
            )
            gen_share = (time.monotonic() - t0) / max(1, count * len(group))
            items = [
                (p, s.text)
                for (p, _), samples in zip(group, outputs, strict=False)
                for s in samples
            ]
            t1 = time.monotonic()
            verdicts = _grade(kind, items, pool)
            grade_share = (time.monotonic() - t1) / max(1, len(items))
            rows, position = [], 0
            for (problem, indices), samples in zip(group, outputs, strict=False):
                for sample_index, sample in zip(indices, samples, strict=False):
                    correct, extracted, method = verdicts[position]
                    position += 1
                    rows.append(
                        {
                            "benchmark": name,
                            "problem_id": problem.id,
                            "sample_index": sample_index,
                            "response": sample.text,
                            "extracted": extracted,
                            "correct": bool(correct),
                            "tokens": sample.num_tokens,
                            "method": method,
                            "seconds": round(gen_share + grade_share, 4),
                        }
                    )
            append_jsonl(samples_path, rows)
            for row in rows:
                done[(name, row["problem_id"])][row["sample_index"]] = row
            num_new += len(rows)
            progress.advance(task, len(rows))
    return num_new


def _summarise(suite: Sequence[str], problems, done, settings: EvalSettings) -> dict[str, Any]:
    per_benchmark: dict[str, dict[str, Any]] = {}
    ks = sorted({1, settings.k, *settings.pass_ks})
    for name in suite:
        verdicts = {}
        tokens = []
        for p in problems[name]:
            rows = [done[(name, p.id)][i] for i in range(settings.k) if i in done[(name, p.id)]]
            if rows:
                verdicts[p.id] = [r["correct"] for r in rows]
                tokens.extend(r["tokens"] for r in rows)
        if not verdicts:
            continue
        scores = benchmark_scores(verdicts, ks)
        scores.update(
            num_problems=len(verdicts),
            num_samples=sum(len(v) for v in verdicts.values()),
            mean_tokens=sum(tokens) / len(tokens) if tokens else 0.0,
        )
        per_benchmark[name] = scores
    summary: dict[str, Any] = {
        "settings": {
            k: list(v) if isinstance(v, tuple) else v for k, v in asdict(settings).items()
        },
        "benchmarks": per_benchmark,
    }
    if per_benchmark:
        summary["macro_accuracy"] = macro_average(per_benchmark, "accuracy")
    return summary
