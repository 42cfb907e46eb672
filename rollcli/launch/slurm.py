"""The Slurm executor: planned jobs become submitit job arrays that outlive ``rollcli run``.

``submit`` groups jobs into arrays by wave and resource shape (:mod:`rollcli.launch.sbatch`),
chunked below the cluster's ``MaxArraySize``, and submits each with submitit. Eval jobs follow
their train jobs through ``--dependency=afterany:<train array>``; the task itself then checks
that every dependency is ``done`` (so a failed train job fails its eval instead of leaving it
pending forever). Each task runs :class:`~rollcli.launch.slurm_runner.SlurmJobRunner` (the
compute-node side: checkpoint and requeue on ``USR2``). ``state.json`` is the source of truth;
``poll`` adds what only Slurm knows (a task killed for memory or time, cancelled, requeued) from
one ``sacct`` call with a timeout (:mod:`rollcli.launch.slurm_queries`), and falls back to the
store when sacct does not answer.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import submitit

from rollcli.errors import RollcliError
from rollcli.launch.api import TERMINAL, BaseExecutor, Job
from rollcli.launch.preemption import checkpoint_wait_s, measured_step_seconds, signal_lead_s
from rollcli.launch.sbatch import (
    group_into_arrays,
    submitit_folder,
    submitit_parameters,
)
from rollcli.launch.slurm_queries import (
    SLURM_PENDING,
    SLURM_RUNNING,
    read_max_array_size,
    run_slurm,
    sacct_states,
    squeue_states,
)

# re-exported: submitit pickles each task's runner, and tasks queued by an earlier version name
# rollcli.launch.slurm.SlurmJobRunner
from rollcli.launch.slurm_runner import SlurmJobRunner
from rollcli.store.atomic import atomic_write_text
from rollcli.store.folders import JobFolder, RunFolder
from rollcli.store.state import read_state, set_status, update_state

__all__ = ["SlurmExecutor", "SlurmJobRunner"]

TAIL_LINES = 20


def _tail(path: str | None, lines: int = TAIL_LINES) -> str:
    if not path:
        return ""
    try:
        text = Path(path).read_text("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _link(target: Path, link: Path) -> None:
    """Point ``link`` at ``target`` (relative), replacing any old link atomically."""
    link.parent.mkdir(parents=True, exist_ok=True)
    tmp = link.with_name(f".{link.name}.tmp")
    tmp.unlink(missing_ok=True)
    os.symlink(os.path.relpath(target, link.parent), tmp)
    os.replace(tmp, link)


def _reset_for_submission(job_dir: Path) -> None:
    """A failed or cancelled job goes back to pending (it resumes from its checkpoint)."""
    JobFolder(job_dir).cancel_request.unlink(missing_ok=True)
    if read_state(job_dir)["status"] in ("failed", "cancelled"):
        update_state(job_dir, status="pending", error_tail=None)


class SlurmExecutor(BaseExecutor):
    """Jobs as submitit arrays on Slurm; see the module docstring."""

    kind = "slurm"
    supports_detach = True

    def __init__(
        self,
        launch: Mapping[str, Any] | None = None,
        *,
        sacct_timeout_s: float = 10.0,
        sacct_interval_s: float = 2.0,
        python: str | None = None,
    ) -> None:
        super().__init__(launch)
        self.sacct_timeout_s = sacct_timeout_s
        self.sacct_interval_s = sacct_interval_s
        self.python = python
        self._sacct_cache: tuple[float, dict[str, str] | None] | None = None

    def preflight(self) -> str | None:
        """Slurm's client commands must be on PATH (submitit calls sbatch, squeue, sacct)."""
        import shutil

        missing = [c for c in ("sbatch", "squeue", "sacct", "scancel") if shutil.which(c) is None]
        if missing:
            return (
                f"Slurm is not available here ({', '.join(missing)} not on PATH); run on a Slurm "
                "login node, or use launch.executor: local"
            )
        return None

    # ---- submit -------------------------------------------------------------------------
    def submit(self, jobs: Sequence[Job], run_dir: Path) -> None:
        run_dir = Path(run_dir).absolute()
        todo = self._not_already_queued(jobs)
        if not todo:
            return
        experiment = run_dir.name
        lead = self.signal_lead(run_dir)
        groups = group_into_arrays(
            todo,
            max_array_size=read_max_array_size(self.sacct_timeout_s),
            array_parallelism=self.launch.get("array_parallelism"),
        )
        by_id = {job.id: job for job in jobs}
        queued = {job.id for job in todo}
        group_ids: dict[str, str] = {}
        for group in groups:
            dep_ids = [group_ids[name] for name in group.depends_on_groups]
            dep_ids += self._external_dependencies(group.jobs, queued, run_dir)
            dependency = "afterany:" + ":".join(sorted(set(dep_ids))) if dep_ids else None
            executor = submitit.SlurmExecutor(
                folder=submitit_folder(run_dir),
                python=shlex.quote(self.python or sys.executable),
                max_num_timeout=int(self.launch.get("max_requeues", 3)),
            )
            executor.update_parameters(
                **submitit_parameters(
                    group,
                    run_dir=run_dir,
                    experiment=experiment,
                    dependency=dependency,
                    signal_delay_s=lead,
                )
            )
            runners = []
            for job in group.jobs:
                _reset_for_submission(Path(job.job_dir))
                deps = tuple(
                    (d, str(by_id[d].job_dir if d in by_id else RunFolder(run_dir).job(d).path))
                    for d in job.depends_on
                )
                runners.append(
                    SlurmJobRunner(
                        str(Path(job.job_dir).absolute()),
                        deps,
                        requeue=job.resources.requeue,
                        gpus_per_node=job.resources.gpus_per_node,
                        checkpoint_wait_s=checkpoint_wait_s(lead),
                    )
                )
            try:
                with executor.batch():
                    handles = [executor.submit(r) for r in runners]
            except Exception as error:
                raise RollcliError(f"sbatch refused array {group.name}: {error}") from error
            base = str(handles[0].job_id).split("_")[0]
            group_ids[group.name] = base
            for job, handle in zip(group.jobs, handles, strict=True):
                self._record(job, handle, base)

    def signal_lead(self, run_dir: Path) -> int:
        """Seconds of USR2 warning before the time limit, sized from the step time measured in
        the run folder (:mod:`rollcli.launch.preemption`)."""
        from rollcli.launch.sbatch import parse_time_minutes

        step_s, _ = measured_step_seconds(run_dir)
        return signal_lead_s(self.launch, step_s, parse_time_minutes(self.launch.get("time")) * 60)

    def _not_already_queued(self, jobs: Sequence[Job]) -> list[Job]:
        """Skip jobs a previous (detached) submission still has queued or running on Slurm."""
        handles = {j.id: (read_state(j.job_dir).get("slurm") or {}).get("job_id") for j in jobs}
        known = [h for h in handles.values() if h]
        queued = (squeue_states(known, self.sacct_timeout_s) or {}) if known else {}
        return [j for j in jobs if not (handles[j.id] and handles[j.id] in queued)]

    def _external_dependencies(
        self, group_jobs: Sequence[Job], queued: set[str], run_dir: Path
    ) -> list[str]:
        """Slurm ids of dependencies submitted earlier and not finished yet."""
        ids = []
        for job in group_jobs:
            for dep in job.depends_on:
                if dep in queued:
                    continue
                state = read_state(RunFolder(run_dir).job(dep).path)
                handle = (state.get("slurm") or {}).get("array_job_id")
                if state["status"] not in TERMINAL and handle:
                    ids.append(str(handle))
        return ids

    @staticmethod
    def _record(job: Job, handle: Any, base: str) -> None:
        job_dir = Path(job.job_dir)
        info = {
            "kind": "slurm",
            "job_id": str(handle.job_id),
            "array_job_id": base,
            "array_task_id": str(handle.job_id).split("_")[1]
            if "_" in str(handle.job_id)
            else None,
            "stdout": str(handle.paths.stdout),
            "stderr": str(handle.paths.stderr),
            "submission": str(handle.paths.submission_file),
        }
        # run_job replaces "executor" when the task starts; "slurm" keeps the submission handle
        update_state(job_dir, executor=info, slurm=info)
        for stream in ("stdout", "stderr"):
            _link(Path(info[stream]), JobFolder(job_dir).log(stream))

    # ---- poll ---------------------------------------------------------------------------
    def _sacct(self, ids: Sequence[str]) -> dict[str, str] | None:
        import time

        now = time.monotonic()
        if self._sacct_cache and now - self._sacct_cache[0] < self.sacct_interval_s:
            return self._sacct_cache[1]
        states = sacct_states(ids, self.sacct_timeout_s)
        self._sacct_cache = (now, states)
        return states

    def poll(self, jobs: Sequence[Job], run_dir: Path) -> dict[str, str]:
        states = {job.id: read_state(job.job_dir) for job in jobs}
        handles = {
            job_id: (s.get("slurm") or {}).get("job_id")
            for job_id, s in states.items()
            if s["status"] not in TERMINAL
        }
        wanted = [h for h in handles.values() if h]
        slurm = self._sacct(wanted) if wanted else {}
        out: dict[str, str] = {}
        for job in jobs:
            state = states[job.id]
            status = state["status"]
            handle = handles.get(job.id)
            if status in TERMINAL or not handle or slurm is None or handle not in slurm:
                out[job.id] = status  # the store is the truth; sacct adds what it cannot know
                continue
            out[job.id] = self._reconcile(job, state, slurm[handle], self.sacct_timeout_s)
        return out

    @staticmethod
    def _reconcile(job: Job, state: Mapping[str, Any], slurm_state: str, timeout: float) -> str:
        status = state["status"]
        if slurm_state in SLURM_PENDING:
            return "pending"
        if slurm_state in SLURM_RUNNING:
            return "running"
        # sacct says the task ended. Accounting lags and keeps the record of a requeued attempt,
        # so ask slurmctld first: a task still in the queue is not over.
        info = state.get("slurm") or {}
        queued = squeue_states([info.get("job_id", "")], timeout)
        if queued is None:
            return status  # cannot confirm: report what the store says, decide on a later poll
        live = queued.get(str(info.get("job_id")))
        if live is not None:
            return "running" if live in SLURM_RUNNING else "pending"
        fresh = read_state(job.job_dir)  # the task writes its state before it exits
        if fresh["status"] in TERMINAL:
            return fresh["status"]
        if slurm_state == "CANCELLED":
            set_status(
                job.job_dir, "cancelled", only_from={"pending", "running"}, error_tail="scancel"
            )
            return "cancelled"
        tail = _tail(info.get("stderr"))
        reason = f"Slurm task {info.get('job_id')} ended {slurm_state} without recording a result"
        set_status(
            job.job_dir,
            "failed",
            only_from={"pending", "running"},
            error_tail=f"{reason}\n{tail}".strip(),
        )
        return read_state(job.job_dir)["status"]

    # ---- cancel -------------------------------------------------------------------------
    def cancel(self, run_dir: Path, job_ids: Sequence[str] | None = None) -> list[str]:
        run = RunFolder(run_dir)
        folders = [run.job(j) for j in job_ids] if job_ids is not None else run.job_folders()
        dirs = [f.path for f in folders]
        signalled: list[str] = []
        handles: list[str] = []
        for job_dir in dirs:
            if not JobFolder(job_dir).config.exists():
                raise RollcliError(f"no job '{job_dir.name}' in {run_dir}")
            state = read_state(job_dir)
            handle = (state.get("slurm") or {}).get("job_id")
            if state["status"] in TERMINAL or not handle:
                continue
            atomic_write_text(JobFolder(job_dir).cancel_request, "cancel requested\n")
            handles.append(str(handle))
            signalled.append(job_dir.name)
        if handles:
            # Pending tasks go first (so none starts in their place); then USR2: running tasks
            # checkpoint and stop (the runner sees the cancel file and does not requeue); the
            # plain scancel ends whatever is left (SIGTERM, then SIGKILL after KillWait).
            run_slurm(["scancel", "--state=PENDING", *handles], self.sacct_timeout_s)
            run_slurm(["scancel", "--signal=USR2", *handles], self.sacct_timeout_s)
            run_slurm(["scancel", *handles], self.sacct_timeout_s)
        for name in signalled:
            set_status(
                run.job(name).path,
                "cancelled",
                only_from={"pending", "running"},
                error_tail="cancelled",
            )
        return signalled
