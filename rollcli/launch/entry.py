"""The one entry point of every job on every executor: ``python -m rollcli.launch.entry JOB_DIR``.

``run_job(job_dir)`` marks ``state.json`` running (counting the attempt), turns SIGTERM, SIGINT
and SIGUSR2 (Slurm's pre-emption warning) into a ``threading.Event`` the job polls between
steps, runs the job by its type — ``train``: :func:`rollcli.train.run_train_job` with the W&B
tracker as a callback; ``eval``: :func:`rollcli.eval.run_eval_job`; ``report``:
:func:`rollcli.analysis.write_report` — and marks the state done, failed (with the last lines of
the traceback) or cancelled (stopped by a signal after checkpointing; a rerun resumes it).
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

from rollcli.store.layout import load_job_config
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


def _tracker(config: dict[str, Any], job_dir: Path) -> Any:
    try:
        from rollcli.analysis.tracking import create_tracker
    except ImportError:
        return None
    return create_tracker(config, job_dir)


def _run_train(job_dir: Path, config: dict[str, Any], stop: threading.Event) -> None:
    from rollcli.train import run_train_job

    tracker = _tracker(config, job_dir)
    callbacks: list[Callable[[dict[str, Any]], None]] = [tracker] if tracker is not None else []
    try:
        run_train_job(job_dir, stop=stop, callbacks=callbacks)
    finally:
        if tracker is not None:
            tracker.finish()


def _run_eval(job_dir: Path, config: dict[str, Any], stop: threading.Event) -> None:
    try:
        from rollcli.eval import run_eval_job  # type: ignore[attr-defined]
    except ImportError as error:
        raise RuntimeError(
            "eval jobs need rollcli.eval.run_eval_job, which this installation lacks"
        ) from error
    run_eval_job(job_dir, stop=stop)


def _run_report(job_dir: Path, config: dict[str, Any], stop: threading.Event) -> None:
    from rollcli.analysis import write_report

    run_dir = job_dir.parent.parent
    result = write_report(run_dir)
    for path in getattr(result, "files", []):
        print(f"wrote {path}")


RUNNERS: dict[str, Callable[[Path, dict[str, Any], threading.Event], None]] = {
    "train": _run_train,
    "eval": _run_eval,
    "report": _run_report,
}


def run_job(job_dir: str | os.PathLike[str], *, stop: threading.Event | None = None) -> int:
    """Run one job from its folder; returns the process exit code (0 done or stopped, 1 failed)."""
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
        config = load_job_config(job_dir)
        kind = str(config.get("job", {}).get("type", "train"))
        if kind not in RUNNERS:
            raise ValueError(f"unknown job type '{kind}' (valid: {', '.join(RUNNERS)})")
        set_status(job_dir, "running", executor=executor)
        RUNNERS[kind](job_dir, config, stop)
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
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stop.is_set():
        set_status(job_dir, "cancelled", error_tail="stopped by a signal; rerun to resume")
        return 0
    set_status(job_dir, "done")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m rollcli.launch.entry JOB_DIR", file=sys.stderr)
        return 2
    return run_job(args[0])


if __name__ == "__main__":
    sys.exit(main())
