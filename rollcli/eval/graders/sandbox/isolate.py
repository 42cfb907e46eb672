"""Start one isolated, resource-limited Python process: the reusable core of the code sandbox.

:func:`start_isolated` is what both the one-process-per-solution grader (:mod:`.run`) and a
long-lived worker (many solutions through one warm process) build on. It

1. creates the process's cgroups (:mod:`.cgroup`: memory incl. tmpfs/shm/memfd and kernel
   memory, swap, and a process limit), or refuses with :class:`SandboxUnavailable`;
2. starts the trusted launcher (:mod:`._launch`) in a new session: it joins the cgroups, sets
   ``no_new_privs``, drops to a random unused uid when we are root, and execs
3. bubblewrap (:mod:`.bwrap`: new namespaces, an empty root with ``/usr`` read-only, private
   size-capped tmpfs ``/tmp`` and ``/dev/shm``, no network) running ``python -I -S -B <args>``.

Where bubblewrap or the cgroup limits are missing, nothing starts unless the caller opted in
with ``allow_weak=True`` (or ``ROLLCLI_SANDBOX_ALLOW_WEAK=1``): then the same program runs with
whatever is left (cgroups if they work, the uid drop when root, the runner's rlimits), a warning
is logged once, and :attr:`IsolatedProcess.isolation` says what is missing. The parent never
opens a file the sandbox can reach: everything comes back through pipes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rollcli.eval.graders.sandbox.bwrap import bwrap_argv, check_bwrap, find_bwrap, sandbox_python
from rollcli.eval.graders.sandbox.cgroup import Cgroup, CgroupUnavailable, create_cgroup

__all__ = ["IsolatedProcess", "SandboxUnavailable", "start_isolated", "weak_allowed"]

log = logging.getLogger(__name__)

LAUNCH_SOURCE = Path(__file__).with_name("_launch.py").read_text("utf-8")
_UID_RANGE = (1_000_000, 2_000_000_000)
_PID_OVERHEAD = 4  # bwrap, the runner (the sandbox's pid 1), its zygote, and one spare
_warned: set[str] = set()


class SandboxUnavailable(RuntimeError):
    """The machine cannot give the sandbox its guarantees and weak isolation was not allowed."""


def weak_allowed(allow_weak: bool) -> bool:
    """The caller's opt-in, or ``ROLLCLI_SANDBOX_ALLOW_WEAK=1`` in the environment."""
    return allow_weak or os.environ.get("ROLLCLI_SANDBOX_ALLOW_WEAK", "") in ("1", "true", "yes")


def _sandbox_env() -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


@dataclass
class IsolatedProcess:
    """A running sandboxed process. Always call :meth:`stop` (it is idempotent)."""

    process: subprocess.Popen
    cgroup: Cgroup | None
    uid: int | None
    isolation: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    _stopped: bool = False

    def stop(self) -> dict[str, int]:
        """Kill the sandbox and everything in it, delete its cgroups; returns the usage seen."""
        if self._stopped:
            return self.usage
        self._stopped = True
        if self.cgroup is not None:  # inside first, so bwrap reaps its own (see Cgroup.kill)
            self.cgroup.kill(spare=self.process.pid)
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        if self.cgroup is not None:
            self.usage = self.cgroup.usage()
            self.cgroup.remove()
        if self.uid is not None:  # also waits out processes still on their way out
            kill_uid(self.uid)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        return self.usage


def processes_of(uid: int) -> list[int]:
    """Live (non-zombie) processes owned by ``uid``."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            pids.append(int(name))
    return pids


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` (repeat: a fork bomb refills as we kill)."""
    for _ in range(50):
        pids = processes_of(uid)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning("code sandbox running WEAKLY isolated: %s", message)


def start_isolated(
    python_args: Sequence[str],
    *,
    memory_bytes: int,
    max_procs: int,
    tmpfs_bytes: int,
    allow_weak: bool = False,
    stdin: Any = subprocess.PIPE,
    stdout: Any = subprocess.PIPE,
    stderr: Any = subprocess.PIPE,
) -> IsolatedProcess:
    """Run ``python -I -S -B *python_args`` in a fresh sandbox; raises SandboxUnavailable.

    ``max_procs`` counts the untrusted program's processes and threads (the sandbox's own few
    are added). The program sees ``/tmp`` (``tmpfs_bytes``, also its cwd and home) and
    ``/dev/shm`` (the same size) as its only writable places; all of it, with every process and
    page cache, is charged to ``memory_bytes``.
    """
    as_root = os.geteuid() == 0
    uid = secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0]) + _UID_RANGE[0] if as_root else None
    weak_ok = weak_allowed(allow_weak)
    problems = []
    bwrap_problem = check_bwrap(uid)
    if bwrap_problem:
        problems.append(bwrap_problem)
    cgroup = None
    try:
        cgroup = create_cgroup(memory_bytes, max_procs + _PID_OVERHEAD)
    except CgroupUnavailable as error:
        problems.append(f"no cgroup memory/process limit: {error}")
    if problems and not weak_ok:
        if cgroup is not None:
            cgroup.remove()
        raise SandboxUnavailable(
            "; ".join(problems) + " (set allow_weak / ROLLCLI_SANDBOX_ALLOW_WEAK=1 to run with "
            "rlimits only, for trusted code)"
        )
    for problem in problems:
        _warn_once(problem)
    python = sandbox_python(for_other_uid=uid is not None)
    command = [python, "-I", "-S", "-B", *python_args]
    env = _sandbox_env()
    if bwrap_problem is None:
        bwrap = find_bwrap()
        assert bwrap is not None
        argv = bwrap_argv(
            bwrap, command, python=python, tmpfs_bytes=tmpfs_bytes, shm_bytes=tmpfs_bytes, env=env
        )
    else:
        argv = command
    config = {
        "procs_files": cgroup.procs_files if cgroup else [],
        "uid": uid,
        "argv": argv,
    }
    isolation = {
        "bwrap": bwrap_problem is None,
        "cgroup": {c: v for c, v in cgroup.versions.items()} if cgroup else None,
        "uid": uid if uid is not None else os.getuid(),
        "weak": bool(problems),
        "problems": problems,
    }
    try:
        process = subprocess.Popen(  # noqa: S603 - our own launcher, argv not shell-parsed
            [sys.executable, "-I", "-S", "-c", LAUNCH_SOURCE, json.dumps(config)],
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd="/",
            env=env if bwrap_problem else {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            start_new_session=True,
        )
    except BaseException:
        if cgroup is not None:
            cgroup.remove()
        raise
    return IsolatedProcess(process, cgroup, uid, isolation)
