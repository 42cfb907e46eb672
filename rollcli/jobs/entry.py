"""The one entry point of every job on every executor: ``python -m rollcli.jobs.entry JOB_DIR``.

``run_job(job_dir)`` marks ``state.json`` running (counting the attempt), turns SIGTERM, SIGINT
and SIGUSR2 (Slurm's pre-emption warning) into a ``threading.Event`` the job polls between
steps, reads the job's config (:func:`rollcli.jobs.config.load_job_config`), runs the job by its
type — ``train``: :mod:`rollcli.jobs.train` (with the W&B tracker as a callback; train and eval jobs
under the memory cap of :mod:`rollcli.jobs.memcap`); ``eval``:
:mod:`rollcli.jobs.eval`; ``report``: :mod:`rollcli.jobs.report` — and marks the state done,
failed (with the last lines of the traceback) or cancelled (stopped by a signal after
checkpointing; a rerun resumes it). Executors start this module as an opaque command.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rollcli.jobs import eval as eval_job
from rollcli.jobs import report as report_job
from rollcli.jobs import train as train_job
from rollcli.jobs.config import JobConfig, load_job_config
from rollcli.jobs.memcap import apply_memory_cap
from rollcli.store.folders import JobFolder
from rollcli.store.state import read_state, set_status

__all__ = ["run_job", "main", "STOP_SIGNALS", "ERROR_TAIL_LINES"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2)
ERROR_TAIL_LINES = 20


def _install_stop_handlers(stop: threading.Event) -> dict[int, Any]:
    previous = {}

    def handler(signum: int, frame: Any) -> None:
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, handler)
    return previous


RUNNERS: dict[str, Callable[[JobFolder, JobConfig, threading.Event], None]] = {
    "train": train_job.run,
    "eval": eval_job.run,
    "report": report_job.run,
}


def run_job(
    job_dir: str | os.PathLike[str],
    *,
    stop: threading.Event | None = None,
    cap_memory: bool = False,
) -> int:
    """Run one job from its folder; returns the process exit code (0 done or stopped, 1 failed).

    ``cap_memory``: put this process under the job's memory cap first (:mod:`.memcap`; what
    the command line does: the cap stays with the process, so in-process callers opt in)."""
    job_dir = Path(job_dir).resolve()
    if read_state(job_dir)["status"] == "done":
        print(f"{job_dir.name}: already done")
        return 0
    stop = stop or threading.Event()
    previous = _install_stop_handlers(stop)
    executor = {"kind": os.environ.get("ROLLCLI_EXECUTOR", "local"), "pid": os.getpid()}
    executor["host"] = socket.gethostname()
    if os.environ.get("SLURM_JOB_ID"):
        executor["job_id"] = os.environ["SLURM_JOB_ID"]
        if os.environ.get("SLURM_ARRAY_JOB_ID"):
            executor["array_job_id"] = os.environ["SLURM_ARRAY_JOB_ID"]
    try:
        return _run_and_record(JobFolder(job_dir), stop, executor, cap_memory)
    finally:
        # only once the final status is recorded: a second SIGTERM (`rollcli cancel` signals the
        # job and the orchestrator, which forwards it) must not kill a job between its last
        # checkpoint and that record, or the executor reports it failed
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run_and_record(
    folder: JobFolder, stop: threading.Event, executor: dict[str, Any], cap_memory: bool
) -> int:
    job_dir = folder.path
    try:
        config = load_job_config(folder)
        set_status(job_dir, "running", executor=executor)
        if cap_memory and config.job.type in ("train", "eval"):
            apply_memory_cap(config.launch, config.backend)
        RUNNERS[config.job.type](folder, config, stop)
    except BaseException as error:  # noqa: BLE001 - every failure is recorded, then re-raised
        tail = "".join(traceback.format_exception(error)).splitlines()[-ERROR_TAIL_LINES:]
        if isinstance(error, KeyboardInterrupt) or (
            stop.is_set() and not isinstance(error, Exception)
        ):
            set_status(job_dir, "cancelled", error_tail="stopped by a signal")
            return 130
        set_status(job_dir, "failed", error_tail="\n".join(tail))
        traceback.print_exc()
        return 1
    if stop.is_set():
        set_status(job_dir, "cancelled", error_tail="stopped by a signal; rerun to resume")
        return 0
    set_status(job_dir, "done")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m rollcli.jobs.entry JOB_DIR", file=sys.stderr)
        return 2
    return run_job(args[0], cap_memory=True)


if __name__ == "__main__":
    sys.exit(main())
