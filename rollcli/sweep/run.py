"""Run a planned sweep: its deduplicated jobs through the spec's executor, then the ablation.

A sweep run folder is an ordinary run folder (manifest, jobs/, lock), so ``rollcli status``,
``logs`` and ``cancel`` work on it as a whole; ``sweep.json`` beside the manifest records the
points and which jobs answer each. Running the same sweep again skips finished jobs and resumes
unfinished ones, exactly like ``rollcli run``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rollcli.store.atomic import atomic_write_json
from rollcli.store.folders import RunFolder
from rollcli.sweep.plan import SweepPlan

__all__ = ["run_sweep"]


def run_sweep(
    sweep_plan: SweepPlan,
    run_dir: str | Path,
    *,
    max_parallel: int | None = None,
    detach: bool = False,
    on_tick: Callable[[dict[str, str]], None] | None = None,
    on_start: Callable[[list[Any], list[str]], None] | None = None,
    command: Sequence[str] | str | None = None,
    spec_file: str | None = None,
) -> Any:
    """Run (or resume) every unfinished job of the sweep; returns the orchestrator's RunResult
    (``spec_file``, the sweep file, is named in submission errors)."""
    from rollcli.launch.orchestrate import run_experiment

    run_dir = Path(run_dir)

    def started(jobs: list[Any], skipped: list[str]) -> None:
        # inside the run lock, after the manifest and job folders are written
        atomic_write_json(RunFolder(run_dir).sweep, sweep_plan.to_manifest())
        if on_start is not None:
            on_start(jobs, skipped)

    return run_experiment(
        sweep_plan.spec,
        sweep_plan.plan,
        run_dir,
        max_parallel=max_parallel,
        detach=detach,
        on_tick=on_tick,
        on_start=started,
        command=command,
        spec_file=spec_file,
    )
