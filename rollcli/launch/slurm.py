"""The Slurm executor: planned jobs become submitit job arrays that outlive ``rollcli run``.

``submit`` groups jobs into arrays by wave and resource shape (:mod:`rollcli.launch.sbatch`),
chunked below the cluster's ``MaxArraySize``, and submits each with submitit. Eval jobs follow
their train jobs through ``--dependency=afterany:<train array>``; the task itself then checks
that every dependency is ``done`` (so a failed train job fails its eval instead of leaving it
pending forever). Each task runs :class:`SlurmJobRunner`, a ``submitit.helpers.Checkpointable``:
the job (``rollcli.jobs.entry.run_job``) runs in a thread; on Slurm's ``USR2`` warning
(pre-emption or time limit) submitit calls ``checkpoint()``, which sets the job's stop event,
waits for the train loop to write its checkpoint and return, and hands submitit a fresh runner
to requeue: the next attempt resumes from that checkpoint. ``state.json`` is the source of truth;
``poll`` adds what only Slurm knows (a task killed for memory or time, cancelled, requeued) from
one ``sacct`` call with a timeout, and falls back to the store when sacct does not answer.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import submitit
from submitit.helpers import Checkpointable, DelayedSubmission

from rollcli.errors import RollcliError
from rollcli.launch.api import TERMINAL, BaseExecutor, Job
from rollcli.launch.sbatch import (
    DEFAULT_MAX_ARRAY_SIZE,
    group_into_arrays,
    submitit_folder,
    submitit_parameters,
)
from rollcli.store.atomic import atomic_write_text
from rollcli.store.folders import JobFolder, RunFolder
from rollcli.store.state import read_state, set_status, update_state

__all__ = [
    "SlurmExecutor",
    "SlurmJobRunner",
    "read_max_array_size",
    "sacct_states",
    "squeue_states",
]

SLURM_PENDING = frozenset(
    {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SUSPENDED"}
)
SLURM_RUNNING = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING"})
SLURM_FAILED = frozenset(
    {"FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}
)
TAIL_LINES = 20


def _run(cmd: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str] | None:
    """Run a Slurm command; None when it is missing, hangs past ``timeout`` or fails."""
    try:
        proc = subprocess.run(
            list(cmd), capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc if proc.returncode == 0 else None


def read_max_array_size(timeout: float = 10.0) -> int:
    """The cluster's ``MaxArraySize`` (from ``scontrol show config``), Slurm's default if unknown."""
    proc = _run(["scontrol", "show", "config"], timeout)
    if proc is not None:
        match = re.search(r"^MaxArraySize\s*=\s*(\d+)", proc.stdout, re.MULTILINE)
        if match:
            return int(match.group(1))
    return DEFAULT_MAX_ARRAY_SIZE


def sacct_states(slurm_ids: Sequence[str], timeout: float = 10.0) -> dict[str, str] | None:
    """``{"<array>_<task>" or "<job>": STATE}`` for the given job/array ids from one sacct call,
    or None when sacct is unavailable (not installed, no slurmdbd, hanging)."""
    from submitit.slurm.slurm import SlurmInfoWatcher

    bases = sorted({str(i).split("_")[0] for i in slurm_ids})
    if not bases:
        return {}
    cmd = ["sacct", "-X", "--parsable2", "-o", "JobID,State,ExitCode"]
    for base in bases:
        cmd += ["-j", base]
    proc = _run(cmd, timeout)
    if proc is None:
        return None
    info = SlurmInfoWatcher().read_info(proc.stdout)
    return {job_id: (row.get("State") or "UNKNOWN").split()[0] for job_id, row in info.items()}


def squeue_states(slurm_ids: Sequence[str], timeout: float = 10.0) -> dict[str, str] | None:
    """Queued and running tasks among the given ids, from slurmctld (no accounting lag); tasks
    that left the queue are absent. None when squeue does not answer."""
    from submitit.slurm.slurm import read_job_id

    bases = sorted({str(i).split("_")[0] for i in slurm_ids})
    if not bases:
        return {}
    proc = _run(["squeue", "-h", "-j", ",".join(bases), "-o", "%i|%T"], timeout)
    if proc is None:
        return None
    states: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        if "|" not in line:
            continue
        job_id, state = line.strip().split("|", 1)
        try:
            parts = read_job_id(job_id)
        except Exception:  # noqa: BLE001 - an id format we do not know: skip the line
            continue
        for part in parts:
            states["_".join(part[:2])] = state
            if len(part) >= 3:
                for index in range(int(part[1]), int(part[2]) + 1):
                    states[f"{part[0]}_{index}"] = state
    return states


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


class SlurmJobRunner(Checkpointable):
    """What each Slurm task runs: one rollcli job, checkpointed and requeued on ``USR2``.

    Picklable by submitit: the thread and stop event of a running task are not pickled.
    """

    checkpoint_wait_s: ClassVar[float] = 75.0  # below submitit's 90 s USR2 warning

    def __init__(
        self,
        job_dir: str,
        depends_on: tuple[tuple[str, str], ...] = (),
        *,
        requeue: bool = True,
        gpus_per_node: int = 0,
    ) -> None:
        self.job_dir = str(job_dir)
        self.depends_on = tuple(depends_on)  # (job id, job dir) pairs
        self.requeue = requeue
        self.gpus_per_node = gpus_per_node
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._result: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_stop", "_thread", "_result")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._stop, self._thread, self._result = None, None, {}

    def fresh(self) -> SlurmJobRunner:
        return SlurmJobRunner(
            self.job_dir, self.depends_on, requeue=self.requeue, gpus_per_node=self.gpus_per_node
        )

    def _blocked_by(self) -> str | None:
        for dep_id, dep_dir in self.depends_on:
            status = read_state(dep_dir)["status"]
            if status != "done":
                return f"not run: dependency {dep_id} is {status}"
        return None

    def __call__(self) -> str:
        job_dir = Path(self.job_dir)
        status = read_state(job_dir)["status"]
        if status == "done":
            return "done"  # a requeue that raced with the end of the job
        if JobFolder(job_dir).cancel_request.exists():
            set_status(job_dir, "cancelled", only_from={"pending", "failed", "running"})
            return "cancelled"
        reason = self._blocked_by()
        if reason:
            set_status(
                job_dir, "failed", only_from={"pending", "failed", "cancelled"}, error_tail=reason
            )
            raise RuntimeError(f"{job_dir.name}: {reason}")
        self._stop = threading.Event()
        nodes = int(os.environ.get("SLURM_JOB_NUM_NODES", "1") or 1)
        if nodes > 1:
            from rollcli.launch.ray_bootstrap import RayClusterError, run_on_slurm

            try:
                return run_on_slurm(job_dir, self._run_in_thread, gpus_per_node=self.gpus_per_node)
            except RayClusterError as error:  # the head's message names the missing node
                if error.rank == 0:
                    set_status(
                        job_dir,
                        "failed",
                        only_from={"pending", "running", "cancelled"},
                        error_tail=str(error),
                    )
                raise
        return self._run_in_thread()

    def _run_in_thread(self) -> str:
        """Run the job in a thread so the main thread stays free for submitit's signal handler."""
        assert self._stop is not None
        stop = self._stop

        def target() -> None:
            from rollcli.jobs.entry import run_job

            try:
                self._result["code"] = run_job(self.job_dir, stop=stop)
            except BaseException as error:  # noqa: BLE001 - re-raised in the main thread
                self._result["error"] = error

        self._thread = threading.Thread(target=target, name="rollcli-job", daemon=True)
        self._thread.start()
        while self._thread.is_alive():
            self._thread.join(0.2)
        if "error" in self._result:
            raise self._result["error"]
        if self._result.get("code", 1) != 0:
            tail = read_state(self.job_dir).get("error_tail") or "see the job's stderr"
            raise RuntimeError(f"job {Path(self.job_dir).name} failed:\n{tail}")
        return read_state(self.job_dir)["status"]

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """Called by submitit on USR2: stop the job at a checkpoint, then requeue a fresh runner
        (or nothing, when the job was cancelled, finished, or must not be requeued)."""
        job_dir = Path(self.job_dir)
        if self._stop is not None:
            self._stop.set()
        if self._thread is not None:
            self._thread.join(self.checkpoint_wait_s)
        status = read_state(job_dir)["status"]
        cancelled = JobFolder(job_dir).cancel_request.exists()
        if status in ("done", "failed") or cancelled or not self.requeue:
            if status not in ("done", "failed"):
                set_status(job_dir, "cancelled", only_from={"pending", "running", "cancelled"})
            return None
        update_state(
            job_dir,
            status="pending",
            error_tail="requeued by Slurm (pre-emption or time limit); resumes from its checkpoint",
        )
        return DelayedSubmission(self.fresh())


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
                folder=submitit_folder(run_dir), python=shlex.quote(self.python or sys.executable)
            )
            executor.update_parameters(
                **submitit_parameters(
                    group, run_dir=run_dir, experiment=experiment, dependency=dependency
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
            _run(["scancel", "--state=PENDING", *handles], self.sacct_timeout_s)
            _run(["scancel", "--signal=USR2", *handles], self.sacct_timeout_s)
            _run(["scancel", *handles], self.sacct_timeout_s)
        for name in signalled:
            set_status(
                run.job(name).path,
                "cancelled",
                only_from={"pending", "running"},
                error_tail="cancelled",
            )
        return signalled
