"""The program that runs inside a code sandbox (trusted; executed with ``python -c``).

It starts as the parent's user, reads its job as JSON from stdin, then, before touching the
untrusted code: enters new network and mount namespaces where the kernel allows it (private
tmpfs over /tmp, /var/tmp, /dev/shm), preloads the standard modules solutions use, sets
resource limits, drops to the sandbox uid when started as root, and installs a Python-level
guard (no sockets, no subprocesses, no signals to others). Then it runs each test and writes one
JSON line per test to the result pipe: ``{"i", "status": ok|error|timeout, "out", "error"}``.
It never sees the expected outputs: the parent compares, so the code cannot forge a pass.
This file imports only the standard library: it runs in a bare interpreter.
"""

import contextlib
import ctypes
import errno
import io
import json
import os
import resource
import signal
import sys
import time

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_REC, MS_PRIVATE = 16384, 1 << 18
PRELOAD = [
    "string",
    "re",
    "datetime",
    "collections",
    "heapq",
    "bisect",
    "copy",
    "math",
    "random",
    "statistics",
    "itertools",
    "functools",
    "operator",
    "typing",
    "fractions",
    "decimal",
    "array",
    "json",
    "io",
    "sys",
    "time",
    "dataclasses",
    "enum",
    "queue",
    "threading",
    "numbers",
    "cmath",
    "hashlib",
    "struct",
    "textwrap",
    "unicodedata",
    "calendar",
    "pprint",
    "collections.abc",
    "socket",
    "_socket",
    "subprocess",
    "shutil",
    "builtins",
]
HEADER = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\n"
    "from random import *\nfrom statistics import *\nfrom itertools import *\n"
    "from functools import *\nfrom operator import *\nfrom io import *\nfrom sys import *\n"
    "from json import *\nfrom builtins import *\nfrom typing import *\nimport string, re, "
    "datetime, collections, heapq, bisect, copy, math, random, statistics, itertools, functools, "
    "operator, io, sys, json\nsys.setrecursionlimit(50000)\n"
)


class TestTimeout(BaseException):
    """Raised by the per-test alarm (a BaseException so ``except Exception`` cannot eat it)."""


def isolate(job):
    """Namespaces where possible; returns a dict saying what was applied (for the parent)."""
    libc = ctypes.CDLL(None, use_errno=True)
    report = {"netns": False, "mountns": False, "uid": os.getuid()}
    if os.geteuid() == 0:
        if libc.unshare(CLONE_NEWNET | CLONE_NEWNS) == 0:
            report["netns"] = report["mountns"] = True
        elif libc.unshare(CLONE_NEWNET) == 0:
            report["netns"] = True
    else:
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) == 0:
            report["netns"] = report["mountns"] = True
            for name, text in (
                ("setgroups", "deny"),
                ("uid_map", f"{uid} {uid} 1"),
                ("gid_map", f"{gid} {gid} 1"),
            ):
                try:
                    with open(f"/proc/self/{name}", "w") as f:
                        f.write(text)
                except OSError:
                    pass
    if report["mountns"]:
        ok = libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0
        for target in (b"/tmp", b"/var/tmp", b"/dev/shm"):
            if os.path.isdir(target):
                options = f"size={job['tmpfs_mb']}m,mode=1777".encode()
                ok = ok and libc.mount(b"tmpfs", target, b"tmpfs", 0, options) == 0
        report["private_tmp"] = bool(ok)
    if job.get("uid") is not None and os.geteuid() == 0:
        report["uid"] = job["uid"]
    return report


def set_limits(job):
    cpu = int(job["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (job["fsize"], job["fsize"]))
    resource.setrlimit(resource.RLIMIT_NPROC, (job["nproc"], job["nproc"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (job["address_space"], job["address_space"]))


def drop_privileges(job):
    if os.geteuid() == 0 and job.get("uid") is not None:
        os.setgroups([])
        os.setgid(job["uid"])
        os.setuid(job["uid"])


def install_guard():
    """Second layer behind the namespaces: Python-level bans (what LiveCodeBench's guard does)."""
    import builtins
    import shutil
    import socket
    import subprocess

    def banned(*args, **kwargs):
        raise PermissionError("disabled in the rollcli sandbox")

    class NoSocket(socket.socket):
        def __init__(self, *args, **kwargs):
            raise PermissionError("network access is disabled in the rollcli sandbox")

    socket.socket = NoSocket
    for name in ("create_connection", "socketpair", "fromfd", "create_server", "getaddrinfo"):
        setattr(socket, name, banned)
    for name in (
        "system",
        "popen",
        "fork",
        "forkpty",
        "kill",
        "killpg",
        "putenv",
        "setuid",
        "execv",
        "execve",
        "execvp",
        "execvpe",
        "execl",
        "execle",
        "execlp",
        "execlpe",
        "spawnv",
        "spawnve",
        "spawnl",
        "spawnle",
        "posix_spawn",
        "posix_spawnp",
        "chroot",
        "chmod",
        "chown",
    ):
        if hasattr(os, name):
            setattr(os, name, banned)
    subprocess.Popen = banned
    subprocess.run = banned
    shutil.rmtree = banned
    builtins.help = None
    import _socket

    _socket.socket = NoSocket


def fresh_stdin(text):
    with open("stdin.txt", "w") as f:
        f.write(text)
    fd = os.open("stdin.txt", os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))


def fresh_stdout():
    fd = os.open("stdout.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.close(fd)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)


def read_stdout(cap):
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with open("stdout.txt", "rb") as f:
        return f.read(cap).decode("utf-8", "replace")


def on_alarm(signum, frame):
    raise TestTimeout()


def run_test(job, code, index, test_input, functional_target):
    signal.setitimer(signal.ITIMER_REAL, job["timeout_s"])
    try:
        if job["mode"] == "stdin":
            fresh_stdin(test_input)
            fresh_stdout()
            with contextlib.suppress(SystemExit):
                exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
            signal.setitimer(signal.ITIMER_REAL, 0)
            return {"i": index, "status": "ok", "out": read_stdout(job["output_cap"])}
        args = [json.loads(line) for line in test_input.split("\n") if line.strip()]
        result = functional_target()(*args)
        signal.setitimer(signal.ITIMER_REAL, 0)
        if isinstance(result, tuple):
            result = list(result)
        return {"i": index, "status": "ok", "out": json.dumps(result)}
    except TestTimeout:
        return {"i": index, "status": "timeout", "error": "time limit exceeded"}
    except BaseException as error:  # noqa: BLE001 - the untrusted code's failure, reported
        signal.setitimer(signal.ITIMER_REAL, 0)
        return {"i": index, "status": "error", "error": f"{type(error).__name__}: {error}"[:500]}


def main():
    job = json.loads(sys.stdin.read())
    result_fd = job["result_fd"]

    def emit(row):
        os.write(result_fd, (json.dumps(row) + "\n").encode())

    report = isolate(job)
    for name in PRELOAD:
        __import__(name)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # oversize writes fail with EFBIG instead
    set_limits(job)
    drop_privileges(job)
    emit({"isolation": report})
    install_guard()
    signal.signal(signal.SIGALRM, on_alarm)
    started = time.monotonic()
    try:
        code = compile(HEADER + job["code"], "<solution>", "exec")
    except BaseException as error:  # noqa: BLE001
        emit({"i": 0, "status": "error", "error": f"compile: {type(error).__name__}: {error}"})
        return
    functional_target = None
    if job["mode"] == "functional":
        namespace = {"__name__": "__solution__", "__builtins__": __builtins__}
        signal.setitimer(signal.ITIMER_REAL, job["timeout_s"])
        try:
            exec(code, namespace)
            signal.setitimer(signal.ITIMER_REAL, 0)
            solution_cls = namespace["Solution"]

            def functional_target():
                return getattr(solution_cls(), job["func_name"])
        except BaseException as error:  # noqa: BLE001
            emit({"i": 0, "status": "error", "error": f"{type(error).__name__}: {error}"[:500]})
            return
    for index, test_input in enumerate(job["inputs"]):
        row = run_test(job, code, index, test_input, functional_target)
        row["elapsed"] = round(time.monotonic() - started, 4)
        try:
            emit(row)
        except OSError as error:
            if error.errno != errno.EPIPE:
                raise
            return


main()
