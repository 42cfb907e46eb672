"""``rollcli eval``: evaluate a model on a benchmark suite (avg@k, pass@k), resumable.

Thin: parses options, creates the engine, calls :func:`rollcli.eval.runner.evaluate`, prints a
table. Everything heavy (torch, transformers, vllm, math-verify) is imported inside the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["register"]


# engines a person can point at a model folder; the tiny sampler adapter (rollcli.eval.engines
# .tiny) is for programs that hold a sampler, the tiny backend ships no standalone checkpoint
CLI_ENGINES = ("hf", "vllm")
# vLLM's dtypes ("auto": the model's; vLLM's CPU build turns fp32 into bf16 unless told)
VLLM_DTYPES = ("auto", "float32", "bfloat16", "float16")


def eval_command(
    model: Annotated[
        str, typer.Option("--model", help="Model folder (HF format) or a Hugging Face model id.")
    ],
    engine: Annotated[str, typer.Option("--engine", help="hf | vllm")] = "hf",
    suite: Annotated[
        str,
        typer.Option(
            "--suite",
            help="Comma-separated: aime24,aime25,amc23,math500,"
            "minerva_math,olympiadbench,gsm8k,livecodebench,humaneval",
        ),
    ] = "math500",
    k: Annotated[int, typer.Option("-k", "--k", help="Samples per problem (avg@k, pass@k).")] = 1,
    temperature: Annotated[float, typer.Option("--temperature")] = 0.6,
    top_p: Annotated[float, typer.Option("--top-p")] = 0.95,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Max generated tokens.")] = 4096,
    limit: Annotated[int | None, typer.Option("--limit", help="First N problems per set.")] = None,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    out: Annotated[
        Path | None, typer.Option("--out", help="Output folder (resumes there).")
    ] = None,
    lcb_path: Annotated[
        str | None, typer.Option("--lcb-path", help="LiveCodeBench release jsonl file or folder.")
    ] = None,
    lcb_version: Annotated[str, typer.Option("--lcb-version")] = "v6",
    gguf_file: Annotated[
        str | None, typer.Option("--gguf-file", help="hf: GGUF file in --model.")
    ] = None,
    batch_size: Annotated[
        int, typer.Option("--batch-size", help="hf: rows per generate call.")
    ] = 16,
    workers: Annotated[int | None, typer.Option("--workers", help="Grading processes.")] = None,
    math_deadline: Annotated[
        float, typer.Option("--math-deadline", help="Seconds per answer.")
    ] = 10.0,
    tensor_parallel: Annotated[int, typer.Option("--tp", help="vllm: tensor parallel size.")] = 1,
    enforce_eager: Annotated[
        bool,
        typer.Option(
            "--enforce-eager",
            help="vllm: no torch.compile or graph capture (starts in seconds; CPU, small runs).",
        ),
    ] = False,
    dtype: Annotated[
        str, typer.Option("--dtype", help="vllm: auto | float32 | bfloat16 | float16.")
    ] = "auto",
) -> None:
    """Evaluate a model: generate k samples per problem, grade them, report avg@k and pass@k."""
    from rich.console import Console
    from rich.table import Table

    from rollcli.errors import RollcliError
    from rollcli.eval.benchmarks import BenchmarkError, parse_suite
    from rollcli.eval.engines import create_engine
    from rollcli.eval.runner import EvalSettings, evaluate, load_suite

    if engine not in CLI_ENGINES:
        raise RollcliError(
            f"--engine {engine!r}: give hf or vllm"
            + (
                ". The tiny backend's model is no checkpoint to run benchmarks on: its held-out "
                "accuracy is eval/accuracy in every train job's metrics (rollcli report RUN)"
                if engine == "tiny"
                else ""
            )
        )
    try:
        names = parse_suite(suite)
        settings = EvalSettings(
            suite=tuple(names),
            k=k,
            temperature=temperature,
            top_p=top_p,
            max_tokens=max_tokens,
            seed=seed,
            limit=limit,
            model=model,
            engine=engine,
            pass_ks=(1, k),
            lcb_path=lcb_path,
            lcb_version=lcb_version,
        )
    except (BenchmarkError, ValueError) as error:
        raise RollcliError(str(error)) from error
    if dtype not in VLLM_DTYPES:
        raise RollcliError(f"--dtype {dtype!r}: give one of {', '.join(VLLM_DTYPES)}")
    options: dict = {}
    if engine == "hf":
        options = {"gguf_file": gguf_file, "batch_size": batch_size}
    elif engine == "vllm":
        options = {
            "seed": seed,
            "tensor_parallel_size": tensor_parallel,
            "enforce_eager": enforce_eager,
            "dtype": dtype,
        }
    out_dir = out or Path("runs") / "eval" / f"{Path(model).name or 'model'}-{engine}"
    console = Console()
    console.print(
        f"evaluating [bold]{model}[/] with {engine} on {', '.join(names)} "
        f"(k={k}, T={temperature}, top_p={top_p}, max_tokens={max_tokens}) -> {out_dir}"
    )
    problems = load_suite(settings)  # fail on a bad benchmark before loading the model
    engines = []

    def make_engine():  # called by evaluate only when samples are missing
        engines.append(create_engine(engine, model, **options))
        return engines[-1]

    try:
        summary = evaluate(
            make_engine,
            settings,
            out_dir,
            num_grading_workers=workers,
            math_deadline_s=math_deadline,
            problems=problems,
        )
    finally:
        for engine_obj in engines:
            engine_obj.close()
    table = Table(title=f"{Path(model).name}: k={k}, T={temperature}, top_p={top_p}")
    for column in ("benchmark", "problems", f"avg@{k}", "pass@1", f"pass@{k}", "mean tokens"):
        table.add_column(column, justify="right" if column != "benchmark" else "left")
    for name, scores in summary["benchmarks"].items():
        table.add_row(
            name,
            str(scores["num_problems"]),
            f"{100 * scores['accuracy']:.1f}",
            f"{100 * scores['pass@1']:.1f}",
            f"{100 * scores.get(f'pass@{k}', float('nan')):.1f}",
            f"{scores['mean_tokens']:.0f}",
        )
    console.print(table)
    if "macro_accuracy" in summary:
        console.print(f"macro-average accuracy: {100 * summary['macro_accuracy']:.1f}")
    console.print(f"per-sample results: {out_dir / 'samples.jsonl'}")


EPILOG = """[bold]Examples[/bold]

  rollcli eval --model Qwen/Qwen2.5-Math-1.5B --suite math500 --limit 50

  rollcli eval --model models/qwen-1.5b-step300 --suite aime24,amc23 -k 16 --out runs/eval/s300

  rollcli eval --model models/ckpt --engine vllm --suite aime24,aime25 -k 16 --tp 2

Rerunning with the same --out resumes: only missing samples are generated (docs/eval.md).
"""


def register(app: typer.Typer) -> None:
    """Add ``rollcli eval`` to the root app."""
    app.command("eval", epilog=EPILOG)(eval_command)
