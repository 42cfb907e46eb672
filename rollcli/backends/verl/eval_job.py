"""Eval jobs of a plan: evaluate every checkpoint a verl train job wrote, resumably.

A spec with ``eval: {jobs: true}`` (verl backend) gets one eval job per train job; the plan makes
it depend on its train job and puts the train job's id in ``job.train_job``. It lives with the
verl backend because what it reads is verl's checkpoint format; it evaluates with
:mod:`rollcli.eval` (``rollcli.jobs.eval`` starts it). :func:`run_eval_job` then, for each ``<run>/jobs/<train>/checkpoints/global_step_<N>/actor``, in
step order:

1. finds a Hugging Face folder for it: ``actor/huggingface`` when verl saved the full model there
   (``checkpoint.save_contents`` with ``hf_model``), else merges the FSDP shards with
   :func:`rollcli.backends.verl.export.export_hf` into ``<eval job>/models/step_<N>`` (written
   beside and renamed into place; an existing complete export is reused; removed once the step's
   results are stored);
2. evaluates it on the spec's suite with :func:`rollcli.eval.runner.evaluate`, one benchmark at a
   time into ``<eval job>/eval/<N>/<benchmark>/`` with that benchmark's k (``eval.samples``),
   ``eval.temperature``, ``eval.top_p``, ``eval.max_tokens`` (default: the backend's
   ``max_response_len``), the job's seed and ``eval.limit`` (LiveCodeBench from the local
   release of ``eval.livecodebench``); engine ``vllm`` when the backend's
   device is cuda and vllm imports, else ``hf`` (transformers);
3. writes ``<eval job>/eval/<N>/summary.json`` (the step is done) and the step's row of
   ``<eval job>/metrics.jsonl``: ``step``, ``cum_rollouts`` and ``cum_tokens`` (from the train
   job's row of that step), ``eval/accuracy`` (macro-average of avg@k over the suite) and
   ``eval/<benchmark>`` (avg@k), ``eval/<benchmark>/pass@<k>``.

Re-running resumes: steps with a summary are skipped, a step interrupted mid-way keeps its stored
samples. ``stop`` is checked between checkpoints and between benchmarks; a stopped job returns
without marking the step done.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcli.errors import RollcliError
from rollcli.store.atomic import atomic_write_json, read_json, read_jsonl, rewrite_jsonl
from rollcli.store.folders import JobFolder

__all__ = [
    "EvalJobError",
    "EvalJobSettings",
    "checkpoint_models",
    "choose_engine",
    "run_eval_job",
]

STEP_SUMMARY = "summary.json"
_WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "model*.safetensors.index.json")


class EvalJobError(RollcliError):
    """An eval job's config or its train job's folder is not usable."""


@dataclass(frozen=True)
class EvalJobSettings:
    """What an eval job evaluates with (from its config.yaml)."""

    train_job: str
    suite: tuple[str, ...]
    samples: Mapping[str, int]
    temperature: float
    top_p: float
    max_tokens: int
    seed: int
    limit: int | None
    device: str
    tensor_parallel: int
    lcb_path: str | None = None
    lcb_version: str = "v6"

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> EvalJobSettings:
        job = config.get("job") or {}
        evals = config.get("eval") or {}
        backend = config.get("backend") or {}
        train_job = job.get("train_job")
        if not train_job:
            raise EvalJobError("eval job config has no job.train_job (the train job it evaluates)")
        suite = tuple(evals.get("suite") or ())
        if not suite:
            raise EvalJobError("eval job config has an empty eval.suite; nothing to evaluate")
        raw = evals.get("samples", 1)
        samples = (
            {name: int(raw.get(name, 1)) for name in suite}
            if isinstance(raw, Mapping)
            else dict.fromkeys(suite, int(raw))
        )
        max_tokens = evals.get("max_tokens") or backend.get("max_response_len") or 4096
        limit = evals.get("limit")
        lcb = evals.get("livecodebench") or {}
        if "livecodebench" in suite and not lcb.get("path"):
            raise EvalJobError(
                "eval job config: livecodebench needs eval.livecodebench.path (the local copy "
                "of its official release)"
            )
        return cls(
            train_job=str(train_job),
            suite=suite,
            samples=samples,
            temperature=float(evals.get("temperature", 1.0)),
            top_p=float(evals.get("top_p", 1.0)),
            max_tokens=int(max_tokens),
            seed=int(job.get("seed") or 0),
            limit=int(limit) if limit is not None else None,
            device=str(backend.get("device") or "cuda"),
            tensor_parallel=int(backend.get("tensor_parallel") or 1),
            lcb_path=str(lcb["path"]) if lcb.get("path") else None,
            lcb_version=str(lcb.get("version") or "v6"),
        )


def _has_weights(folder: Path) -> bool:
    return (folder / "config.json").is_file() and any(
        next(folder.glob(pattern), None) is not None for pattern in _WEIGHT_PATTERNS
    )


def checkpoint_models(train_dir: str | Path) -> dict[int, Path | None]:
    """Each checkpointed step -> its ready Hugging Face folder (``actor/huggingface`` with the
    weights), or None when the FSDP shards must be merged first."""
    from rollcli.backends.verl.export import actor_dir, checkpoint_steps

    train_dir = Path(train_dir)
    models: dict[int, Path | None] = {}
    for step in checkpoint_steps(train_dir):
        hf = actor_dir(train_dir, step) / "huggingface"
        models[step] = hf if _has_weights(hf) else None
    return models


def choose_engine(device: str) -> str:
    """``vllm`` on cuda when vllm imports, else ``hf`` (transformers)."""
    if device == "cuda":
        try:
            import vllm  # noqa: F401
        except ImportError:
            return "hf"
        return "vllm"
    return "hf"


def _engine_factory(kind: str, model: Path, settings: EvalJobSettings) -> Callable[[], Any]:
    from rollcli.eval.engines import create_engine

    if kind == "vllm":
        options: dict[str, Any] = {
            "seed": settings.seed,
            "tensor_parallel_size": settings.tensor_parallel,
        }
    else:
        options = {"device": "cuda" if settings.device == "cuda" else "cpu"}
    return lambda: create_engine(kind, str(model), **options)


class _LazyEngine:
    """One engine per checkpoint, created when the first benchmark needs to generate."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory, self.engine = factory, None

    def __call__(self) -> Any:
        if self.engine is None:
            self.engine = self.factory()
        return self.engine

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None


def _train_rows(train_dir: Path) -> dict[int, dict[str, Any]]:
    rows: dict[int, dict[str, Any]] = {}
    for row in read_jsonl(JobFolder(train_dir).metrics):
        if "step" in row:
            rows[int(row["step"])] = row  # a resumed train job may repeat a step: the last wins
    return rows


def _metrics_row(step: int, summary: Mapping[str, Any], train_row: Mapping[str, Any] | None):
    row: dict[str, Any] = {"step": step}
    for key in ("cum_rollouts", "cum_tokens"):
        if train_row is not None and train_row.get(key) is not None:
            row[key] = train_row[key]
    row["eval/accuracy"] = summary["macro_accuracy"]
    for name, scores in summary["benchmarks"].items():
        row[f"eval/{name}"] = scores["accuracy"]
        for key, value in scores.items():
            if key.startswith("pass@"):
                row[f"eval/{name}/{key}"] = value
    return row


def _store_row(job_dir: Path, row: dict[str, Any]) -> None:
    path = JobFolder(job_dir).metrics
    rows = {int(r["step"]): r for r in read_jsonl(path) if "step" in r}
    if rows.get(row["step"]) == row:
        return
    rows[row["step"]] = row
    rewrite_jsonl(path, [rows[s] for s in sorted(rows)])


def _model_folder(train_dir: Path, job_dir: Path, step: int, ready: Path | None) -> Path:
    if ready is not None:
        return ready
    out = job_dir / "models" / f"step_{step}"
    if _has_weights(out):
        return out  # a complete export from an earlier attempt (exports are renamed into place)
    from rollcli.backends.verl.export import export_hf

    return export_hf(train_dir, out, step=step)


def _evaluate_step(
    job_dir: Path,
    model: Path,
    step: int,
    settings: EvalJobSettings,
    problems: Mapping[str, list[Any]],
    stop: threading.Event,
    engine_kind: str,
) -> dict[str, Any] | None:
    from rollcli.eval.metrics import macro_average
    from rollcli.eval.runner import EvalSettings, evaluate

    step_dir = JobFolder(job_dir).eval / str(step)
    engine = _LazyEngine(_engine_factory(engine_kind, model, settings))
    results: dict[str, dict[str, Any]] = {}
    try:
        for name in settings.suite:
            if stop.is_set():
                return None
            eval_settings = EvalSettings(
                suite=(name,),
                k=settings.samples[name],
                temperature=settings.temperature,
                top_p=settings.top_p,
                max_tokens=settings.max_tokens,
                seed=settings.seed,
                limit=settings.limit,
                model=f"{settings.train_job}/global_step_{step}",
                engine=engine_kind,
                pass_ks=(settings.samples[name],),
                lcb_path=settings.lcb_path,
                lcb_version=settings.lcb_version,
            )
            summary = evaluate(
                engine,
                eval_settings,
                step_dir / name,
                show_progress=False,
                problems={name: problems[name]},
            )
            results[name] = summary["benchmarks"][name]
    finally:
        engine.close()
    summary = {
        "step": step,
        "model": f"{settings.train_job}/global_step_{step}",
        "engine": engine_kind,
        "benchmarks": results,
        "macro_accuracy": macro_average(results, "accuracy"),
    }
    atomic_write_json(step_dir / STEP_SUMMARY, summary)
    return summary


def run_eval_job(
    job_dir: str | Path,
    *,
    config: Mapping[str, Any] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Evaluate every checkpoint of the eval job's train job (see the module docstring);
    ``config`` is the job's config (read from its folder when not given)."""
    from rollcli.eval.graders.sandbox.preflight import needs_sandbox, require_sandbox
    from rollcli.eval.runner import EvalSettings, load_suite

    folder = JobFolder(job_dir)
    job_dir = folder.path
    stop = stop or threading.Event()
    config = config if config is not None else folder.read_config()
    need = needs_sandbox(config)
    if need is not None:  # fail now, not after every program was graded 0
        require_sandbox(need)
    settings = EvalJobSettings.from_config(config)
    train_dir = folder.sibling(settings.train_job).path
    if not train_dir.is_dir():
        raise EvalJobError(f"train job folder {train_dir} does not exist")
    models = checkpoint_models(train_dir)
    if not models:
        raise EvalJobError(
            f"{train_dir} has no verl checkpoint (checkpoints/global_step_*/actor) to evaluate"
        )
    problems = load_suite(
        EvalSettings(
            suite=settings.suite,
            limit=settings.limit,
            lcb_path=settings.lcb_path,
            lcb_version=settings.lcb_version,
        )
    )
    train_rows = _train_rows(train_dir)
    engine_kind = choose_engine(settings.device)
    for step, ready in sorted(models.items()):
        if stop.is_set():
            return
        summary_path = folder.eval / str(step) / STEP_SUMMARY
        if summary_path.is_file():
            summary = read_json(summary_path)
        else:
            model = _model_folder(train_dir, job_dir, step, ready)
            summary = _evaluate_step(job_dir, model, step, settings, problems, stop, engine_kind)
            if summary is None:  # stopped between benchmarks
                return
            if ready is None:  # the merged export is only needed until the results are stored
                shutil.rmtree(model, ignore_errors=True)
        _store_row(job_dir, _metrics_row(step, summary, train_rows.get(step)))
