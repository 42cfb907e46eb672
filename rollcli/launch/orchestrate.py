"""``rollcli run`` without the terminal: lock the run folder, write it, and drive an executor.

:func:`run_experiment` takes the lock (a second orchestrator of the same run is refused),
prepares the run folder (manifest, spec, job folders), resets failed and cancelled jobs to
pending (they resume from their checkpoints), skips finished ones, submits the rest and waits.
SIGINT/SIGTERM only set a flag here; the wait loop turns the first into a clean stop (jobs get
SIGTERM, checkpoint, and are marked cancelled) and the second into SIGKILL. No lock or state
file is touched from inside a signal handler.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcli.errors import RollcliError, SpecError
from rollcli.launch.api import Job, create_executor
from rollcli.store.layout import job_dir, prepare_run
from rollcli.store.lock import RunLock
from rollcli.store.state import read_state, set_status

__all__ = ["RunResult", "plan_jobs", "run_experiment"]


@dataclass
class RunResult:
    run_dir: Path
    statuses: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # already done before this run
    interrupted: bool = False
    detached: bool = False

    @property
    def failed(self) -> list[str]:
        return [jid for jid, status in self.statuses.items() if status == "failed"]

    @property
    def ok(self) -> bool:
        return not self.interrupted and all(s == "done" for s in self.statuses.values())


def plan_jobs(plan: Any, run_dir: Path) -> list[Job]:
    """The executor's view of a plan's jobs in ``run_dir``."""
    return [
        Job(pj.id, pj.type, job_dir(run_dir, pj.id), tuple(pj.depends_on), pj.resources)
        for pj in plan
    ]


class _Signals:
    """Counts SIGINT/SIGTERM while installed (main thread only)."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.count += 1

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def run_experiment(
    spec: Any,
    plan: Any,
    run_dir: str | Path,
    *,
    max_parallel: int | None = None,
    detach: bool = False,
    on_tick: Callable[[dict[str, str]], None] | None = None,
    on_start: Callable[[list[Job], list[str]], None] | None = None,
    command: Sequence[str] | str | None = None,
    interval: float = 0.5,
    spec_file: str | None = None,
) -> RunResult:
    """Run (or resume) every unfinished job of ``plan`` in ``run_dir`` and wait for them.

    ``spec_file`` names the spec in errors (a Slurm run folder on node-local storage, a hub
    model missing from the cache of offline compute nodes)."""
    run_dir = Path(run_dir)
    result = RunResult(run_dir)
    launch = spec.launch.model_dump()
    if max_parallel is not None:
        launch["max_parallel"] = max_parallel
    executor = create_executor(launch)
    if detach and not executor.supports_detach:
        raise RollcliError(
            f"--detach needs an executor whose jobs outlive this command (launch.executor: "
            f"slurm); the {executor.kind} executor runs jobs as children of `rollcli run`"
        )
    problem = executor.preflight()
    if problem:
        raise SpecError(f"launch.executor: {executor.kind}: {problem}")
    if executor.kind == "slurm":
        from rollcli.launch.cluster_checks import submission_problems

        problems = submission_problems(spec, run_dir, spec_file)
        if problems:
            raise SpecError("\n".join(problems))
    cmd = command if isinstance(command, str) or command is None else " ".join(command)
    with RunLock(run_dir, cmd):
        prepare_run(run_dir, spec.to_dict(), plan, command)
        jobs = plan_jobs(plan, run_dir)
        todo = []
        for job in jobs:
            status = read_state(job.job_dir)["status"]
            if status == "done":
                result.skipped.append(job.id)
                continue
            if status in ("failed", "cancelled"):
                set_status(job.job_dir, "pending")
            todo.append(job)
        if on_start is not None:
            on_start(jobs, result.skipped)
        with _Signals() as signals:
            try:
                executor.submit(todo, run_dir)
                if detach:
                    result.detached = True
                    return result
                handled = 0

                def tick(statuses: dict[str, str]) -> None:
                    nonlocal handled
                    if signals.count > handled:
                        if handled == 0:
                            executor.cancel(run_dir, None)
                        elif hasattr(executor, "kill"):
                            executor.kill()
                        handled = signals.count
                    if on_tick is not None:  # the skipped jobs are done: a resume's counter
                        on_tick({**dict.fromkeys(result.skipped, "done"), **statuses})

                result.statuses = executor.wait(todo, run_dir, on_tick=tick, interval=interval)
                result.interrupted = signals.count > 0
            finally:
                executor.close()
    return result
