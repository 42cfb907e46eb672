"""Run folder commands: ``rollcli status``, ``rollcli logs`` and ``rollcli cancel``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from rollcli.cli._options import JsonOpt, RunDirArg, console

__all__ = ["register"]

STATUS_EPILOG = """[bold]Examples[/bold]

  rollcli status runs/quickstart

  rollcli status runs/quickstart --json

Works while `rollcli run` is running and after it has exited.
"""

LOGS_EPILOG = """[bold]Examples[/bold]

  rollcli logs runs/quickstart 3f2a          # id prefix

  rollcli logs runs/quickstart pc/0 -f       # allocator/seed, follow

  rollcli logs runs/quickstart report --stream stderr
"""

CANCEL_EPILOG = """[bold]Examples[/bold]

  rollcli cancel runs/quickstart             # stop the whole run (jobs checkpoint first)

  rollcli cancel runs/quickstart pc/1        # stop one job

A cancelled job resumes from its last checkpoint when the spec is run again.
"""

JobArg = Annotated[
    str,
    typer.Argument(
        help="Job id (or a unique prefix), allocator/seed, or 'report'.", show_default=False
    ),
]


def _print_file(path: Path, offset: int = 0) -> int:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return offset
    if data:
        typer.echo(data.decode("utf-8", "replace"), nl=False)
    return offset + len(data)


def _executor_statuses(manifest: dict, run_dir: Path) -> dict[str, str] | None:
    """Slurm runs: what sacct/squeue know beyond the store (the executor records it there)."""
    launch = manifest.get("spec", {}).get("launch") or {}
    if launch.get("executor") != "slurm":
        return None
    from rollcli.launch.api import Job, create_executor
    from rollcli.store.layout import job_dir

    jobs = [Job(j["id"], j["type"], job_dir(run_dir, j["id"])) for j in manifest["plan"]["jobs"]]
    return create_executor(launch).poll(jobs, run_dir)


def register(app: typer.Typer) -> None:
    @app.command("status", epilog=STATUS_EPILOG)
    def status(run_dir: RunDirArg, as_json: JsonOpt = False) -> None:
        """Show each job of RUN_DIR: status, attempts, step, rollouts, accuracy, last error."""
        from rollcli.cli._jobs import JobRows
        from rollcli.store.layout import load_manifest
        from rollcli.store.lock import lock_holder

        manifest = load_manifest(run_dir)
        statuses = _executor_statuses(manifest, run_dir)
        rows = JobRows(manifest, run_dir).rows(statuses)
        holder = lock_holder(run_dir)
        if as_json:
            typer.echo(
                json.dumps({"experiment": manifest["experiment"], "holder": holder, "jobs": rows})
            )
            return
        out = console()
        counts: dict[str, int] = {}
        for row in rows:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        attached = (
            f"run in progress: pid {holder.get('pid')} on {holder.get('host')}"
            if holder
            else "no `rollcli run` attached"
        )
        out.print(f"[bold]{manifest['experiment']}[/bold] ({run_dir}): {summary}; {attached}")
        out.print(JobRows(manifest, run_dir).table(statuses))
        from rollcli.store.variants import list_variants

        for folder, differs in list_variants(run_dir):
            out.print(f"variant: {folder} ({'; '.join(differs)}): rollcli status {folder}")

    @app.command("logs", epilog=LOGS_EPILOG)
    def logs(
        run_dir: RunDirArg,
        job: JobArg,
        follow: Annotated[
            bool, typer.Option("--follow", "-f", help="Keep printing new output.")
        ] = False,
        stream: Annotated[str, typer.Option("--stream", help="stdout, stderr or both.")] = "both",
    ) -> None:
        """Print a job's logs (stdout then stderr); -f follows them until the job ends."""
        from rollcli.errors import RollcliError
        from rollcli.store.folders import JobFolder
        from rollcli.store.layout import find_job, job_dir, load_manifest
        from rollcli.store.lock import lock_holder
        from rollcli.store.state import read_state

        if stream not in ("stdout", "stderr", "both"):
            raise RollcliError(f"--stream must be stdout, stderr or both, not '{stream}'")
        manifest = load_manifest(run_dir)
        folder = job_dir(run_dir, find_job(manifest, job))
        names = ["stdout", "stderr"] if stream == "both" else [stream]
        paths = [JobFolder(folder).log(name) for name in names]
        offsets = [_print_file(p) for p in paths]
        local = (manifest.get("spec", {}).get("launch") or {}).get("executor", "local") == "local"
        while follow:
            status = read_state(folder)["status"]
            terminal = status in ("done", "failed", "cancelled")
            if status == "pending" and local and lock_holder(run_dir) is None:
                # nothing will ever start it: following would wait forever
                typer.secho(
                    f"{job} is pending and no `rollcli run` is attached to {run_dir}; "
                    "rerun the spec to start it",
                    fg=typer.colors.YELLOW,
                    err=True,
                )
                break
            time.sleep(0.5)
            offsets = [_print_file(p, o) for p, o in zip(paths, offsets, strict=True)]
            if terminal:
                break

    @app.command("cancel", epilog=CANCEL_EPILOG)
    def cancel(
        run_dir: RunDirArg,
        job: Annotated[str | None, typer.Argument(help="One job (default: the whole run).")] = None,
    ) -> None:
        """Stop a run (or one job): jobs get SIGTERM, checkpoint and are marked cancelled."""
        import os
        import signal

        from rollcli.launch.api import create_executor
        from rollcli.store.layout import find_job, job_dir, load_manifest
        from rollcli.store.lock import holder_process, lock_holder
        from rollcli.store.state import read_state

        manifest = load_manifest(run_dir)
        executor = create_executor(manifest["spec"].get("launch", {}))
        out = console()
        ids = (
            [j["id"] for j in manifest["plan"]["jobs"]]
            if job is None
            else [find_job(manifest, job)]
        )
        pending = [i for i in ids if read_state(job_dir(run_dir, i))["status"] == "pending"]
        if job is None:
            # only a verified rollcli holding this run's lock: the .lock file itself is data
            # anyone who can write the run folder could craft to name another process
            pid = holder_process(run_dir)
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGTERM)
                    out.print(f"stopping the orchestrating rollcli run (pid {pid})")
                except ProcessLookupError:
                    pass
            elif (holder := lock_holder(run_dir)) and holder.get("pid"):
                out.print(
                    f"not signalling pid {holder['pid']} named by {run_dir}/.lock: it is not "
                    "the rollcli process holding this run's lock"
                )
            signalled = executor.cancel(run_dir, None)
        else:
            signalled = executor.cancel(run_dir, ids)
        dropped = [i for i in pending if read_state(job_dir(run_dir, i))["status"] == "cancelled"]
        if signalled:
            out.print(
                f"signalled {len(signalled)} job(s) to checkpoint and stop: {', '.join(signalled)}"
            )
        if dropped:
            out.print(f"cancelled {len(dropped)} job(s) that had not started")
        if not signalled and not dropped:
            out.print("nothing to cancel: no job of this run is running or pending")
