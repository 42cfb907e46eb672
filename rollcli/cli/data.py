"""``rollcli data prepare``: training sets and benchmarks as verl parquet files (our prompt)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rollcli.cli._options import console

__all__ = ["register"]

EPILOG = """[bold]Examples[/bold]

  rollcli data prepare math_train aime24 math500 --out data/verl

  rollcli data prepare my_problems.jsonl --out data/verl --limit 1000

  rollcli data prepare aime24 amc23 math500 --out data/verl --suite val --samples aime24=32

Sources: a shipped training set (math_train, gsm8k_train), a shipped benchmark (aime24, aime25,
amc23, math500, minerva_math, olympiadbench, gsm8k), or any .json/.jsonl/.parquet file whose
records have problem/question and answer fields. A verl job prepares its own data; this command
is for inspecting the files or feeding them to other verl runs.
"""


def _samples(values: list[str] | None) -> dict[str, int]:
    samples: dict[str, int] = {}
    for value in values or []:
        name, sep, k = value.partition("=")
        if not sep or not k.isdigit() or int(k) < 1:
            raise typer.BadParameter(f"expected BENCHMARK=K with K >= 1, got {value!r}")
        samples[name] = int(k)
    return samples


def register(app: typer.Typer) -> None:
    data_app = typer.Typer(
        name="data",
        help="Prepare datasets for the verl backend.",
        no_args_is_help=True,
        epilog=EPILOG,
    )
    app.add_typer(data_app)

    @data_app.command("prepare", epilog=EPILOG)
    def prepare(
        sources: Annotated[
            list[str], typer.Argument(help="Set names or files to convert.", show_default=False)
        ],
        out: Annotated[Path, typer.Option("--out", help="Folder for the parquet files.")] = Path(
            "data/verl"
        ),
        limit: Annotated[
            int | None, typer.Option("--limit", min=1, help="Keep the first N records of each.")
        ] = None,
        suite: Annotated[
            str | None,
            typer.Option("--suite", help="Write all sources into one file <out>/<SUITE>.parquet."),
        ] = None,
        samples: Annotated[
            list[str] | None,
            typer.Option("--samples", help="avg@k samples per benchmark, BENCHMARK=K (repeat)."),
        ] = None,
    ) -> None:
        """Convert SOURCES to verl's parquet format with rollcli's math prompt."""
        from rollcli.backends.verl.data import prepare_dataset, prepare_eval_suite

        ks = _samples(samples)
        written: list[tuple[Path, int]] = []
        if suite:
            written.append(
                prepare_eval_suite(sources, out / f"{suite}.parquet", samples=ks, limit=limit)
            )
        else:
            for source in sources:
                name = Path(source).stem if Path(source).suffix else source
                split = "train" if name.endswith("_train") else "test"
                written.append(
                    prepare_dataset(
                        source, out / f"{name}.parquet", split=split, limit=limit, k=ks.get(name, 1)
                    )
                )
        out_console = console()
        for path, rows in written:
            out_console.print(f"wrote {path} ({rows} rows)")
