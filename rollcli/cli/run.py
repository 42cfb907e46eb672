"""``rollcli run``: compile a spec, run its jobs (live view), and print the rollouts-to-target table."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from rollcli.cli._options import OverridesArg, RunsDirOpt, SpecArg, console, load_spec_or_sweep_hint

__all__ = ["register", "print_run_summary"]

EPILOG = """[bold]Examples[/bold]

  rollcli run experiments/quickstart.yaml

  rollcli run experiments/quickstart.yaml budget.steps=20 allocators.pc.p_upper=0.8

  rollcli run experiments/quickstart.yaml ~allocators.vigor seeds=[0] --max-parallel 2

Rerunning the same spec skips finished jobs and resumes the others from their checkpoints.
Ctrl-C stops cleanly (jobs checkpoint first); press it twice to kill them.
"""


def print_run_summary(run_dir: Path, out: Any) -> None:
    """The rollouts-to-target table (``rollcli.analysis``), or final accuracies as a fallback."""
    try:
        from rollcli.analysis import print_summary
    except ImportError:
        print_summary = None
    if print_summary is not None:
        try:
            print_summary(run_dir, console=out)
            return
        except Exception as error:  # the run itself succeeded: say what to do, keep exit code
            out.print(
                f"[yellow]could not compute the summary ({type(error).__name__}: {error}); "
                f"try: rollcli report {run_dir}[/yellow]"
            )
    _fallback_summary(run_dir, out)


def _fallback_summary(run_dir: Path, out: Any) -> None:
    from rollcli.cli._render import minimal_summary_table
    from rollcli.store.atomic import read_jsonl
    from rollcli.store.folders import RunFolder
    from rollcli.store.layout import load_manifest

    manifest = load_manifest(run_dir)
    finals: dict[str, list[dict[str, Any]]] = {}
    for job in manifest["plan"]["jobs"]:
        if job["type"] != "train":
            continue
        rows = read_jsonl(RunFolder(run_dir).job(job["id"]).metrics)
        evaluated = [r for r in rows if r.get("eval/accuracy") is not None]
        if evaluated:
            finals.setdefault(job["allocator"], []).append(
                {**evaluated[-1], "cum_rollouts": rows[-1].get("cum_rollouts", 0)}
            )
    baseline = manifest["spec"].get("target", {}).get("baseline") or ""
    out.print(minimal_summary_table(finals, baseline))


def register(app: typer.Typer) -> None:
    @app.command("run", epilog=EPILOG)
    def run(
        spec: SpecArg,
        overrides: OverridesArg = None,
        runs_dir: RunsDirOpt = Path("runs"),
        max_parallel: Annotated[
            int | None,
            typer.Option(
                "--max-parallel", "-j", min=1, help="Jobs at once (local; default: CPU cores)."
            ),
        ] = None,
        detach: Annotated[
            bool,
            typer.Option("--detach", help="Submit and return (Slurm only); follow with status."),
        ] = False,
        summary: Annotated[
            bool, typer.Option("--summary/--no-summary", help="Print the table at the end.")
        ] = True,
    ) -> None:
        """Run an experiment: every allocator x seed of SPEC, then the rollouts-to-target table."""
        from rollcli.cli._jobs import LiveView
        from rollcli.launch.orchestrate import run_experiment
        from rollcli.plan import build_plan
        from rollcli.store.layout import load_manifest

        spec_obj = load_spec_or_sweep_hint(spec, overrides, runs_dir)
        from rollcli.store.variants import choose_run_dir

        plan = build_plan(spec_obj)
        out = console()
        # a spec whose results differ from what runs/<name> holds gets its own folder
        variant = choose_run_dir(runs_dir, spec_obj.to_dict(), plan)
        run_dir = variant.run_dir
        if variant.describe():
            out.print(f"[yellow]{variant.describe()}[/yellow]", markup=True, highlight=False)
        live: list[LiveView] = []

        def on_start(jobs: list[Any], skipped: list[str]) -> None:
            done = f", {len(skipped)} already done" if skipped else ""
            out.print(f"[bold]{spec_obj.name}[/bold]: {len(jobs)} jobs{done} -> {run_dir}")
            if not detach:
                live.append(LiveView(load_manifest(run_dir), run_dir, out).__enter__())

        command = "rollcli " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        try:
            result = run_experiment(
                spec_obj,
                plan,
                run_dir,
                max_parallel=max_parallel,
                detach=detach,
                on_tick=lambda statuses: live[0].update(statuses) if live else None,
                on_start=on_start,
                command=command,
                spec_file=str(spec),
            )
        finally:
            if live:
                live[0].__exit__(None, None, None)
                out.print()
        where = [] if runs_dir == Path("runs") else ["--runs-dir", str(runs_dir)]
        resume = "rollcli run " + " ".join(
            shlex.quote(a) for a in [str(spec), *(overrides or []), *where]
        )
        if result.detached:
            out.print(f"submitted; follow with: rollcli status {run_dir}")
            return
        if result.interrupted:
            out.print(f"[yellow]stopped; jobs checkpointed. Resume with: {resume}[/yellow]")
            raise typer.Exit(130)
        if result.failed:
            manifest = load_manifest(run_dir)
            labels = {
                j["id"]: f"{j['allocator']}/{j['seed']}" if j["allocator"] else j["type"]
                for j in manifest["plan"]["jobs"]
            }
            failed = ", ".join(f"{jid} ({labels.get(jid, '?')})" for jid in result.failed)
            typer.secho(
                f"error: {len(result.failed)} job(s) failed: {failed}. See: rollcli logs "
                f"{run_dir} {result.failed[0]}; fix and rerun: {resume}",
                fg=typer.colors.RED,
                err=True,
            )
            if summary:
                print_run_summary(run_dir, out)
            raise typer.Exit(1)
        if summary:
            print_run_summary(run_dir, out)
