"""What each Slurm task runs on its compute node: one rollcli job, checkpointed and requeued.

:class:`SlurmJobRunner` is a ``submitit.helpers.Checkpointable``. It refuses to start a job
whose dependencies are not ``done`` (Slurm's ``afterany`` lets it start anyway) or that was
cancelled, runs the job's entry point (``rollcli.jobs.entry.run_job``) in a thread so the main
thread stays free for submitit's signal handler, and on Slurm's ``USR2`` warning (pre-emption or
time limit) sets the job's stop event, waits for its checkpoint, and hands submitit a fresh
runner to requeue: the next attempt resumes from that checkpoint. A task of a multi-node job
runs through the Ray bootstrap (:func:`rollcli.launch.ray_bootstrap.run_on_slurm`).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from submitit.helpers import Checkpointable, DelayedSubmission

from rollcli.store.folders import JobFolder
from rollcli.store.state import read_state, set_status, update_state

__all__ = ["SlurmJobRunner"]


class SlurmJobRunner(Checkpointable):
    """What each Slurm task runs: one rollcli job, checkpointed and requeued on ``USR2``.

    Picklable by submitit: the thread and stop event of a running task are not pickled.
    """

    checkpoint_wait_s: float = 75.0  # below submitit's 90 s USR2 warning (older pickles)

    def __init__(
        self,
        job_dir: str,
        depends_on: tuple[tuple[str, str], ...] = (),
        *,
        requeue: bool = True,
        gpus_per_node: int = 0,
        checkpoint_wait_s: float = 75.0,
    ) -> None:
        self.job_dir = str(job_dir)
        # the USR2 lead minus the requeue's share (rollcli.launch.preemption)
        self.checkpoint_wait_s = float(checkpoint_wait_s)
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
            self.job_dir,
            self.depends_on,
            requeue=self.requeue,
            gpus_per_node=self.gpus_per_node,
            checkpoint_wait_s=self.checkpoint_wait_s,
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
        from rollcli.hf_cache import offline_environment

        # compute nodes often have no internet: models come from the prefetched cache
        os.environ.update(offline_environment())
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
