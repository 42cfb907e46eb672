"""Run untrusted code against test inputs in an isolated, resource-limited process.

One process per solution (:func:`run_in_sandbox`), started with a minimal environment (no
inherited variables, so no secrets), in a fresh temporary directory that is removed afterwards,
its own session (so the whole group can be killed) and ``_sandbox_runner.py`` as its program.
That runner, before it runs the untrusted code:

- enters new network and mount namespaces (``unshare(CLONE_NEWNET|CLONE_NEWNS)`` as root; an
  unprivileged user namespace otherwise). No network device but a down loopback exists inside,
  and /tmp, /var/tmp, /dev/shm are private tmpfs mounts that vanish with the process. Where the
  kernel refuses (containers without user namespaces), :attr:`SandboxRun.isolation` says so, and
  only the Python-level guard blocks sockets -- a solution using ctypes could still reach the
  network there.
- sets RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE, RLIMIT_NPROC and RLIMIT_CORE=0;
- when started as root, drops to a random unused uid (RLIMIT_NPROC does not bind root, and a
  uid of its own makes the process count per sandbox and every leftover process findable: after
  the run every process of that uid is SIGKILLed, even one that left the session);
- installs a Python guard (no sockets, no subprocesses, no signals, no chmod/rmtree).

The runner reports each test's raw output on a pipe; comparison happens here, in the parent,
so the untrusted code never sees the expected outputs. The parent enforces wall deadlines per
test (the runner's own alarm can be ignored by hostile code) and caps what it reads.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["SandboxLimits", "TestOutcome", "SandboxRun", "run_in_sandbox", "RUNNER_SOURCE"]

RUNNER_SOURCE = (Path(__file__).with_name("_sandbox_runner.py")).read_text("utf-8")
_STARTUP_GRACE_S = 15.0  # interpreter start + namespace setup + preloads, on a loaded machine
_DEADLINE_GRACE_S = 1.0
_UID_RANGE = (1_000_000, 2_000_000_000)


@dataclass(frozen=True)
class SandboxLimits:
    """Per-solution limits. ``timeout_s`` is per test (LiveCodeBench uses 6 s)."""

    timeout_s: float = 6.0
    memory_mb: int = 4096
    file_size_mb: int = 32
    num_procs: int = 16
    output_cap_bytes: int = 16 << 20
    tmpfs_mb: int = 64


@dataclass(frozen=True)
class TestOutcome:
    index: int
    status: Literal["ok", "error", "timeout", "killed", "missing"]
    out: str = ""
    error: str = ""


@dataclass
class SandboxRun:
    """What happened: per-test outcomes (in order, possibly fewer than the tests), isolation."""

    outcomes: list[TestOutcome] = field(default_factory=list)
    isolation: dict[str, Any] = field(default_factory=dict)
    stopped_early: bool = False
    killed_reason: str | None = None
    seconds: float = 0.0
    stderr_tail: str = ""  # the last 2 kB of the process's stderr when no test reported


def _minimal_env(workdir: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": workdir,
        "TMPDIR": "/tmp",
        "PYTHONHASHSEED": "0",
        "PYTHONIOENCODING": "utf-8",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def _processes_of(uid: int) -> list[int]:
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


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` (repeat: a fork bomb refills as we kill)."""
    for _ in range(50):
        pids = _processes_of(uid)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def _count_own_processes() -> int:
    return len(_processes_of(os.getuid()))


def run_in_sandbox(
    code: str,
    inputs: Sequence[str],
    *,
    mode: Literal["stdin", "functional"] = "stdin",
    func_name: str | None = None,
    limits: SandboxLimits = SandboxLimits(),
    on_outcome: Callable[[TestOutcome], bool] | None = None,
) -> SandboxRun:
    """Run ``code`` on each input; ``on_outcome`` returning False stops (and kills) the run."""
    if mode == "functional" and not func_name:
        raise ValueError("functional tests need func_name (the Solution method to call)")
    started = time.monotonic()
    as_root = os.geteuid() == 0
    uid = secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0]) + _UID_RANGE[0] if as_root else None
    workdir = tempfile.mkdtemp(prefix="rollcli-sandbox-")
    run = SandboxRun()
    proc = None
    read_fd = write_fd = -1
    try:
        if uid is not None:
            os.chown(workdir, uid, uid)
        os.chmod(workdir, 0o700)
        # without a uid of its own, the process limit counts all our processes: leave headroom
        num_procs = limits.num_procs if as_root else _count_own_processes() + limits.num_procs
        job = {
            "code": code,
            "inputs": list(inputs),
            "mode": mode,
            "func_name": func_name,
            "timeout_s": limits.timeout_s,
            "cpu_s": int(limits.timeout_s * max(1, len(inputs))) + 2,
            "address_space": limits.memory_mb << 20,
            "fsize": limits.file_size_mb << 20,
            "nproc": num_procs,
            "output_cap": limits.output_cap_bytes,
            "tmpfs_mb": limits.tmpfs_mb,
            "uid": uid,
        }
        read_fd, write_fd = os.pipe()
        job["result_fd"] = write_fd
        stderr_file = open(os.path.join(workdir, "stderr.txt"), "wb")  # noqa: SIM115
        with stderr_file:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-B", "-c", RUNNER_SOURCE],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=stderr_file,
                pass_fds=(write_fd,),
                cwd=workdir,
                env=_minimal_env(workdir),
                start_new_session=True,
            )
        os.close(write_fd)
        write_fd = -1
        try:
            proc.stdin.write(json.dumps(job).encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        _collect(proc, read_fd, len(inputs), limits, run, on_outcome)
    finally:
        if proc is not None:
            _stop(proc, uid)
        if not run.outcomes:
            run.stderr_tail = _tail(os.path.join(workdir, "stderr.txt"))
        for fd in (read_fd, write_fd):
            if fd >= 0:
                os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)
    run.seconds = time.monotonic() - started
    return run


def _collect(proc, read_fd, num_tests, limits, run, on_outcome) -> None:
    selector = selectors.DefaultSelector()
    selector.register(read_fd, selectors.EVENT_READ)
    buffer = b""
    # one result line holds one test's output, JSON-escaped (at most ~2x): cap each line, so
    # a hostile stream cannot grow our memory while many honest tests still fit
    line_cap = limits.output_cap_bytes * 2 + 65536
    deadline = time.monotonic() + _STARTUP_GRACE_S
    try:
        while len(run.outcomes) < num_tests:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                run.killed_reason = "wall-clock deadline"
                run.outcomes.append(TestOutcome(len(run.outcomes), "timeout", error="deadline"))
                return
            if not selector.select(timeout=remaining):
                continue
            chunk = os.read(read_fd, 1 << 20)
            if not chunk:
                return  # the runner exited (crash, limit, or the code closed the pipe)
            buffer += chunk
            if len(buffer) > line_cap and b"\n" not in buffer:
                run.killed_reason = "result line over its cap"
                return
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                try:
                    row = json.loads(line)
                except ValueError:
                    run.killed_reason = "garbled result stream"
                    return
                if "isolation" in row:
                    run.isolation = row["isolation"]
                    deadline = time.monotonic() + limits.timeout_s + _DEADLINE_GRACE_S
                    continue
                index = len(run.outcomes)
                if row.get("i") != index:
                    run.killed_reason = "out-of-order result"
                    return
                outcome = TestOutcome(
                    index, row.get("status", "error"), row.get("out", ""), row.get("error", "")
                )
                run.outcomes.append(outcome)
                deadline = time.monotonic() + limits.timeout_s + _DEADLINE_GRACE_S
                if on_outcome is not None and not on_outcome(outcome):
                    run.stopped_early = True
                    return
    finally:
        selector.close()


def _tail(path: str, size: int = 2048) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - size))
            return f.read(size).decode("utf-8", "replace")
    except OSError:
        return ""


def _stop(proc: subprocess.Popen, uid: int | None) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    if uid is not None:
        _kill_uid(uid)
