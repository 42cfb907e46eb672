"""The trusted program inside a code sandbox (run as ``python -I -S -B -c``; stdlib only).

It reads its job as JSON from stdin, makes itself non-dumpable (so a process of the same uid can
neither ptrace it nor open its ``/proc/<pid>/fd``), preloads the modules solutions use, then runs
every test in a **fresh child forked for that test**: stdin from a memfd holding the input, stdout
and stderr into pipes that only this runner reads, every other descriptor closed, rlimits set
(address space, CPU, file size, no core). The untrusted code therefore never holds the result
channel (this process's stdout): it can only write its own output, which the runner caps,
JSON-encodes and reports as one line per test, ``{"i", "status": ok|error|timeout|killed,
"out", "error"}``. The runner enforces each test's wall deadline itself and, inside the sandbox's
pid namespace, SIGKILLs every other process after each test (``kill(-1)``), so nothing a test
starts survives into the next. It never sees the expected outputs.
"""

import contextlib
import ctypes
import io
import json
import os
import resource
import select
import signal
import sys
import time

PR_SET_DUMPABLE = 4
PRELOAD = [
    "string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random",
    "statistics", "itertools", "functools", "operator", "typing", "fractions", "decimal", "array",
    "json", "io", "sys", "time", "dataclasses", "enum", "queue", "threading", "numbers", "cmath",
    "hashlib", "struct", "textwrap", "unicodedata", "calendar", "pprint", "collections.abc",
]  # fmt: skip
HEADER = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\n"
    "from random import *\nfrom statistics import *\nfrom itertools import *\n"
    "from functools import *\nfrom operator import *\nfrom io import *\nfrom sys import *\n"
    "from json import *\nfrom builtins import *\nfrom typing import *\nimport string, re, "
    "datetime, collections, heapq, bisect, copy, math, random, statistics, itertools, functools, "
    "operator, io, sys, json\nsys.setrecursionlimit(50000)\n"
)  # LiveCodeBench's import header


def header_namespace():
    """LiveCodeBench's header run once here (trusted code); each test starts from a copy."""
    namespace = {"__builtins__": __builtins__}
    exec(HEADER, namespace)
    return namespace


def child(job, code, base, test_input, out_w, err_w):
    """In the forked child: wire the descriptors, set limits, run the untrusted code; never returns."""
    try:
        stdin_fd = os.memfd_create("stdin")
        os.write(stdin_fd, test_input.encode("utf-8", "surrogateescape"))
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        os.dup2(stdin_fd, 0)
        functional = job["mode"] == "functional"
        if functional:
            os.dup2(out_w, 3)
            null = os.open("/dev/null", os.O_WRONLY)
            os.dup2(null, 1)
        else:
            os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.closerange(4 if functional else 3, 1 << 16)
        if job.get("pidns"):
            os.setpgid(0, 0)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # oversize writes fail with EFBIG
        cpu = int(job["timeout_s"]) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (job["fsize"], job["fsize"]))
        resource.setrlimit(resource.RLIMIT_AS, (job["address_space"], job["address_space"]))
        if job.get("nproc"):
            resource.setrlimit(resource.RLIMIT_NPROC, (job["nproc"], job["nproc"]))
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
    except BaseException as error:  # noqa: BLE001
        os.write(err_w, f"sandbox setup: {type(error).__name__}: {error}".encode()[:500])
        os._exit(1)
    namespace = dict(base, stdin=sys.stdin, stdout=sys.stdout, stderr=sys.stderr)
    namespace["__name__"] = "__solution__" if functional else "__main__"
    try:
        if not functional:
            with contextlib.suppress(SystemExit):
                exec(code, namespace)
            sys.stdout.flush()
            os._exit(0)
        exec(code, namespace)
        args = [json.loads(line) for line in test_input.split("\n") if line.strip()]
        result = getattr(namespace["Solution"](), job["func_name"])(*args)
        if isinstance(result, tuple):
            result = list(result)
        data = json.dumps(result).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(3, view) :]
        os._exit(0)
    except BaseException as error:  # noqa: BLE001 - the untrusted code's failure, reported
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
        message = f"{type(error).__name__}: {error}"[:500]
        with contextlib.suppress(BaseException):
            os.write(2, ("\n" + message).encode("utf-8", "replace"))
        os._exit(1)


def reap_all(pid, in_pidns):
    """Kill the test's process and, in our own pid namespace, every process but us and pid 1."""
    for target in [-1] if in_pidns else [-pid, pid]:
        with contextlib.suppress(OSError):
            os.kill(target, signal.SIGKILL)
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return None
    while True:  # orphans re-parented to us when we are not pid 1's child
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    return status


def run_test(job, code, base, index, test_input):
    """Fork, feed, time and collect one test; returns its result row."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.close(err_r)
        child(job, code, base, test_input, out_w, err_w)
    os.close(out_w)
    os.close(err_w)
    cap = job["output_cap"]
    out, err = bytearray(), bytearray()
    deadline = time.monotonic() + job["timeout_s"]
    status, error = None, ""
    open_fds = {out_r: out, err_r: err}
    pidfd = os.pidfd_open(pid)  # readable once the test's process exits (its children may not)
    exited = False
    while open_fds and status is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            status, error = "timeout", "time limit exceeded"
            break
        watched = [*open_fds, *([] if exited else [pidfd])]
        ready, _, _ = select.select(watched, [], [], 0 if exited else remaining)
        if pidfd in ready:  # drain what is already written, then stop: a leftover child
            exited = True  # holding the pipe open must not stretch the test to its deadline
            for fd in open_fds:
                os.set_blocking(fd, False)
        for fd in ready:
            if fd == pidfd:
                continue
            try:
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError:
                chunk = b""
            if not chunk:
                del open_fds[fd]
                continue
            buffer = open_fds[fd]
            if fd == err_r:
                buffer += chunk
                del buffer[:-4096]  # keep the tail: the exception is the last line
            elif len(buffer) + len(chunk) > cap:
                status, error = "error", f"output over {cap} bytes"
                break
            else:
                buffer += chunk
        if exited and not ready:
            break
    os.close(pidfd)
    exit_status = reap_all(pid, job.get("pidns"))
    os.close(out_r)
    os.close(err_r)
    tail = err.decode("utf-8", "replace").strip().splitlines()
    if status is None:
        if exit_status is not None and os.WIFSIGNALED(exit_status):
            number = os.WTERMSIG(exit_status)
            name = signal.Signals(number).name if number in signal.valid_signals() else number
            status, error = "killed", f"killed by signal {name} (a limit: memory, CPU, processes)"
        elif exit_status is not None and os.WEXITSTATUS(exit_status) != 0:
            status, error = "error", (tail[-1] if tail else f"exit status {exit_status}")
        else:
            status = "ok"
    return {
        "i": index,
        "status": status,
        "out": out.decode("utf-8", "replace"),
        "error": error[:500],
    }


def main():
    job = json.loads(sys.stdin.buffer.read().decode("utf-8", "surrogateescape"))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    if not job.get("pidns"):  # weak isolation: no private /tmp, so use a fresh folder of our own
        import tempfile

        os.chdir(tempfile.mkdtemp(prefix="rollcli-sandbox-"))
    for name in PRELOAD:
        __import__(name)
    base = header_namespace()
    result_fd = os.dup(1)
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)

    def emit(row):
        data = (json.dumps(row) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(result_fd, view) :]

    try:
        code = compile(job["code"], "<solution>", "exec")
    except BaseException as error:  # noqa: BLE001 - a syntax error (or a compiler bomb)
        emit(
            {"i": 0, "status": "error", "error": f"compile: {type(error).__name__}: {error}"[:500]}
        )
        return
    for index, test_input in enumerate(job["inputs"]):
        try:
            emit(run_test(job, code, base, index, test_input))
        except BrokenPipeError:
            return


main()
