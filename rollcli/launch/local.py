"""The local executor: jobs as subprocesses of ``rollcli run``, at most ``max_parallel`` at once.

Each job runs ``python -m rollcli.jobs.entry JOB_DIR`` in its own session (so a terminal
Ctrl-C reaches only the orchestrator, which forwards SIGTERM and lets jobs checkpoint), with
stdout/stderr appended to ``logs/``. On Linux the child also gets SIGTERM if the orchestrator
dies (``PR_SET_PDEATHSIG``), so a killed ``rollcli run`` never leaves jobs training on their own;
the next run waits for such survivors to checkpoint and exit before starting them again.
Scheduling happens in :meth:`LocalExecutor.poll`: reap finished processes, then start the
pending jobs whose dependencies are done, in plan order.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rollcli.launch.api import ENTRY_MODULE, TERMINAL, BaseExecutor, Job, entry_command
from rollcli.store.folders import JobFolder
from rollcli.store.layout import job_dir as job_dir_of
from rollcli.store.layout import load_manifest
from rollcli.store.lock import pid_alive
from rollcli.store.state import read_state, set_status

__all__ = ["LocalExecutor", "job_process_alive", "stderr_tail"]

SURVIVOR_GRACE_S = 60.0
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def job_process_alive(state: dict[str, Any], job_dir: Path) -> int | None:
    """The pid of the job's entry process if it still runs on this host, else None."""
    executor = state.get("executor") or {}
    pid = executor.get("pid")
    if not pid or executor.get("kind", "local") != "local":
        return None
    if executor.get("host") not in (None, socket.gethostname()) or not pid_alive(int(pid)):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return int(pid) if sys.platform != "linux" else None
    if ENTRY_MODULE in cmdline and job_dir.name in cmdline:
        return int(pid)
    return None  # the pid was reused by another process


def stderr_tail(job_dir: Path, lines: int = 20) -> str:
    path = JobFolder(job_dir).stderr_log
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class LocalExecutor(BaseExecutor):
    """Subprocesses on this machine, with a concurrency cap (default: the number of cores)."""

    kind = "local"

    def __init__(self, launch: dict[str, Any] | None = None) -> None:
        super().__init__(launch)
        self.max_parallel = int(self.launch.get("max_parallel") or os.cpu_count() or 1)
        self._jobs: dict[str, Job] = {}
        self._order: list[str] = []
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._launching = True

    # -- the four hooks -----------------------------------------------------------------------

    def submit(self, jobs: Sequence[Job], run_dir: Path) -> None:
        for job in jobs:
            self._jobs[job.id] = job
            self._order.append(job.id)
            self._reap_survivor(job)
        self._launching = True
        self._schedule()

    def poll(self, jobs: Sequence[Job], run_dir: Path) -> dict[str, str]:
        self._reap()
        if self._launching:
            self._schedule()
        return {job.id: self._status(job) for job in jobs}

    def cancel(self, run_dir: Path, job_ids: Sequence[str] | None = None) -> list[str]:
        if job_ids is None:
            self._launching = False
            ids = self._order or [j["id"] for j in load_manifest(run_dir)["plan"]["jobs"]]
        else:
            ids = list(job_ids)
        signalled = []
        for jid in ids:
            folder = self._jobs[jid].job_dir if jid in self._jobs else job_dir_of(run_dir, jid)
            state = read_state(folder)
            if state["status"] == "pending" and jid not in self._procs:
                set_status(
                    folder, "cancelled", only_from={"pending"}, error_tail="cancelled before start"
                )
                continue
            proc = self._procs.get(jid)
            pid = proc.pid if proc is not None and proc.poll() is None else None
            pid = pid or job_process_alive(state, folder)
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                signalled.append(jid)
        return signalled

    def kill(self) -> None:
        """SIGKILL every job process this executor started (a second Ctrl-C)."""
        self._launching = False
        for proc in self._procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()

    def close(self) -> None:
        self.kill()
        for proc in self._procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)

    # -- internals ----------------------------------------------------------------------------

    def _status(self, job: Job) -> str:
        status = str(read_state(job.job_dir)["status"])
        if status == "pending" and not self._launching and job.id not in self._procs:
            return "cancelled"
        return status

    def _reap_survivor(self, job: Job) -> None:
        """A job still running from a killed orchestrator: let it checkpoint and exit first."""
        state = read_state(job.job_dir)
        if state["status"] != "running":
            return
        pid = job_process_alive(state, job.job_dir)
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + SURVIVOR_GRACE_S
            while job_process_alive(state, job.job_dir) and time.monotonic() < deadline:
                time.sleep(0.05)
            if job_process_alive(state, job.job_dir):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                while job_process_alive(state, job.job_dir):
                    time.sleep(0.05)
        set_status(
            job.job_dir,
            "failed",
            only_from={"running"},
            error_tail="the job's process ended without recording a result",
        )
        if read_state(job.job_dir)["status"] in ("failed", "cancelled"):
            set_status(job.job_dir, "pending")

    def _reap(self) -> None:
        for jid, proc in list(self._procs.items()):
            code = proc.poll()
            if code is None:
                continue
            del self._procs[jid]
            folder = self._jobs[jid].job_dir
            tail = stderr_tail(folder) or f"exit code {code}"
            if code < 0:
                tail = f"killed by signal {-code}\n{tail}"
            set_status(folder, "failed", only_from={"pending", "running"}, error_tail=tail)

    def _schedule(self) -> None:
        for jid in self._order:
            if len(self._procs) >= self.max_parallel or not self._launching:
                return
            if jid in self._procs:
                continue
            job = self._jobs[jid]
            if read_state(job.job_dir)["status"] != "pending":
                continue
            deps = {dep: self._dep_status(job, dep) for dep in job.depends_on}
            blocked = {d: s for d, s in deps.items() if s in TERMINAL and s != "done"}
            if blocked:
                dep, status = next(iter(blocked.items()))
                set_status(
                    job.job_dir,
                    "cancelled",
                    only_from={"pending"},
                    error_tail=f"not started: dependency {dep} is {status}",
                )
                continue
            if all(s == "done" for s in deps.values()):
                self._start(job)

    def _dep_status(self, job: Job, dep: str) -> str:
        folder = self._jobs[dep].job_dir if dep in self._jobs else job.job_dir.parent / dep
        return str(read_state(folder)["status"])

    def _start(self, job: Job) -> None:
        folder = JobFolder(job.job_dir)
        folder.logs.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "ROLLCLI_EXECUTOR": "local", "PYTHONUNBUFFERED": "1"}
        with open(folder.stdout_log, "ab") as out, open(folder.stderr_log, "ab") as err:
            self._procs[job.id] = subprocess.Popen(
                entry_command(job.job_dir),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
            )
