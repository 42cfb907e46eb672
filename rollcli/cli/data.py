"""``rollcli data prepare``: training sets and benchmarks as verl parquet files (our prompt);
``rollcli data prefetch``: a spec's hub models into the shared Hugging Face cache;
``rollcli data build-base-models``: regenerate the tiny base models that ship in the package."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rollcli.cli._options import OverridesArg, SpecArg, console

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

PREFETCH_EPILOG = """[bold]Examples[/bold]

  HF_HOME=/shared/hf rollcli data prefetch experiments/pc-1.5b-h200.yaml

  rollcli data prefetch experiments/pc-1.5b-h200.yaml --cache-dir /shared/hf/hub

Run it on a node with internet (a login node) before submitting: Slurm jobs run offline
(HF_HUB_OFFLINE=1) and read the models from this cache, so keep HF_HOME (or HF_HUB_CACHE) on a
file system every node sees, and exported when you submit.
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
        help="Prepare datasets for the verl backend; rebuild the shipped tiny base models.",
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

    @data_app.command("prefetch", epilog=PREFETCH_EPILOG)
    def prefetch(
        spec: SpecArg,
        overrides: OverridesArg = None,
        cache_dir: Annotated[
            Path | None,
            typer.Option("--cache-dir", help="Hub cache (default: HF_HUB_CACHE or HF_HOME/hub)."),
        ] = None,
    ) -> None:
        """Download SPEC's hub models and tokenizers into the shared Hugging Face cache."""
        from rollcli.cli._options import load_spec_or_sweep_hint
        from rollcli.hf_cache import hub_cache_dir, hub_models, missing_models
        from rollcli.hf_cache import prefetch as fetch

        spec_obj = load_spec_or_sweep_hint(spec, overrides)
        cache = cache_dir or hub_cache_dir()
        repos = hub_models(spec_obj.backend_dict())
        out_console = console()
        if not repos:
            out_console.print(f"{spec}: no hub model to fetch (local folders or the tiny model)")
            return
        for repo, folder in fetch(missing_models(repos, cache), cache):
            out_console.print(f"fetched {repo} -> {folder}")
        still = missing_models(repos, cache)
        if still:
            from rollcli.errors import RollcliError

            raise RollcliError(f"{', '.join(still)}: downloaded but not found in {cache}")
        for repo in repos:
            out_console.print(f"{repo}: in {cache}")

    @data_app.command("build-base-models")
    def build_base_models(
        out: Annotated[
            Path | None,
            typer.Option("--out", help="Folder to write (default: the package's data/tiny_base)."),
        ] = None,
        check: Annotated[
            bool,
            typer.Option(
                "--check",
                help="Rebuild into a temporary folder and compare the checksums with the "
                "shipped manifest; write nothing.",
            ),
        ] = False,
    ) -> None:
        """Rebuild the shipped tiny base models (default recipe x shipped base seeds) and their
        manifest: a maintenance command, ~1 min of one core per model."""
        import tempfile

        from rollcli.backends.tiny.shipped import build_shipped, read_manifest, shipped_dir
        from rollcli.errors import RollcliError

        out_console = console()
        if not check:
            target = out or shipped_dir()
            for entry in build_shipped(target):
                out_console.print(
                    f"wrote {target / entry['file']} ({entry['bytes']} bytes, sha256 "
                    f"{entry['sha256'][:16]}, sampled accuracy {entry['probe']['accuracy']:.3f})"
                )
            return
        shipped = read_manifest()["models"]
        with tempfile.TemporaryDirectory() as tmp:
            entries = build_shipped(Path(tmp))
        bad = []
        for entry in entries:
            want = (shipped.get(entry["recipe_hash"]) or {}).get("sha256")
            same = want == entry["sha256"]
            out_console.print(
                f"{entry['recipe_hash']}: {'identical' if same else 'DIFFERENT'} "
                f"(built {entry['sha256'][:16]}, shipped {(want or 'none')[:16]})"
            )
            if not same:
                bad.append(entry["recipe_hash"])
        if bad:
            raise RollcliError(
                f"{len(bad)} rebuilt base model(s) differ from the shipped ones ({', '.join(bad)}): "
                "this machine or torch version computes differently (docs/tiny.md, Determinism)"
            )
