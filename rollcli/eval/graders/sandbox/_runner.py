"""The trusted program inside a code sandbox (run as ``python -I -S -B -c``; stdlib only).

It makes itself non-dumpable (so a process of the same uid can neither ptrace it nor open its
``/proc/<pid>/fd``), preloads the modules solutions use, and runs every test in a **fresh child
forked for that test**: stdin from a memfd holding the input, stdout and stderr into memfds that
only this runner reads back, every other descriptor closed, rlimits set (address space, CPU,
file size, no core). The untrusted code therefore never holds the result channel (this
process's stdout): it can only write its own output, which the runner caps, JSON-encodes and
reports as one line per test, ``{"i", "status": ok|error|timeout|killed, "out", "error"}``. The
runner enforces each test's wall deadline itself and SIGKILLs, after each test, every process of
the sandbox's pid namespace but its own two (the weak mode: the test's process group), so
nothing a test starts survives into the next. It never sees the expected outputs.

The tests are forked by a **zygote**: a child of the runner, forked once, that holds the
preloaded modules, LiveCodeBench's import header, the descriptors of a test (the memfds on
0-3) and the limits that do not change, and does nothing but fork on request and report each
test's pid, exit status and CPU. A test's child then only closes the zygote's other
descriptors, sets its CPU limit and runs the code; it forks with the C library's ``fork()``
called directly (the same system call as ``os.fork()`` without Python's at-fork handlers, which
this single-threaded zygote does not need; the untrusted code may still use ``os.fork()`` and
threads as usual). The runner, which parses jobs and writes results, never forks a test, so
its pages are never copied on write. Together this is about half of a test's old cost. A test
that kills its zygote gets a new one (forked again from the runner, whose memory no test can
reach); one that kills the runner ends the sandbox, which its host sees.

Two ways to run it:

* one job (no argument): the job is the whole of stdin, as JSON; one row per test, then exit;
* ``serve``: a warm worker for many solutions. It says ``{"ready": true}`` once preloaded,
  then reads one job per line (``{"id", "code", "inputs", ...}``), answers each test with a row
  carrying ``"j": id``, and ends every job with ``{"j": id, "end": true, "cpu_s": ...}`` after
  wiping what the solution left behind (``/tmp``, ``/dev/shm``, System V IPC objects,
  keyrings; every process is already dead), so one solution never sees another's files.
  The end row also says how many processes the sandbox holds (``procs``: the runner, which is
  the sandbox's pid 1, and its zygote); the host replaces a worker that holds more. A line
  ``{"stop": id}`` ends that job before its next test (the host found a wrong answer). A job
  with ``stop_on_failure`` also ends at its first test that does not exit cleanly.
"""

import contextlib
import ctypes
import gc
import io
import json
import os
import resource
import select
import signal
import stat
import struct
import sys
import time

PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
# the system calls that reach into another process of the same uid, refused to every test with
# EPERM: ptrace, process_vm_readv/writev, kcmp, pidfd_open/getfd, process_madvise
_SECCOMP = {  # machine: (AUDIT_ARCH_*, its numbers, whether the x32 ABI exists)
    "x86_64": (0xC000003E, (101, 310, 311, 312, 434, 438, 440), True),
    "aarch64": (0xC00000B7, (117, 270, 271, 272, 434, 438, 440), False),
}.get(os.uname().machine)
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
ASSERT_DONE = b"\x01rollcli-assert-done"  # + the test's nonce, after an assert program's end
_NONCE_BYTES = 16
_KEYCTL = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)  # keyctl's syscall number
_KEYCTL_CLEAR = 7
_KEYRINGS = (-3, -4, -5)  # session, user, user-session
_ZYGOTE_FDS = (250, 251)  # where the zygote keeps its two pipes (a test closes fds >= 4)
_STATUS = struct.Struct("=iid")  # pid, wait status, the zygote's CPU seconds (tests included)
_ZYGOTE_REPLY_S = 10.0  # a zygote that does not answer in this time is replaced
_LIBC = ctypes.CDLL(None, use_errno=True)


class Channels:
    """The memfds of a test (stdin, stdout, stderr, result), reused across tests: the runner
    fills stdin and empties the others before each test, and reads them back only after every
    process of the test is dead."""

    def __init__(self):
        self.inp = os.memfd_create("stdin")
        self.out = os.memfd_create("stdout")
        self.err = os.memfd_create("stderr")
        self.result = os.memfd_create("result")

    def reset(self, test_input):
        for fd in (self.out, self.err, self.result):
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
        data = test_input.encode("utf-8", "surrogateescape")
        os.ftruncate(self.inp, 0)
        view, offset = memoryview(data), 0
        while offset < len(data):
            offset += os.pwrite(self.inp, view[offset:], offset)
        os.lseek(self.inp, 0, os.SEEK_SET)

    @staticmethod
    def read(fd, limit, tail=False):
        size = os.fstat(fd).st_size
        start = max(0, size - limit) if tail else 0
        return size, os.pread(fd, min(size, limit), start)


# -- the zygote --------------------------------------------------------------------------------
def _read_exact(fd, size):
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _zygote_cpu():
    own, tests = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + tests.ru_utime + tests.ru_stime


def seccomp_program(audit_arch, numbers, x32):
    """A classic-BPF seccomp filter: the native ABI's ``numbers`` (and every call of another
    ABI: i386 via ``int 0x80``, x32) fail with EPERM, everything else is allowed."""
    load, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, JGE|K, RET|K
    allow, eperm = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    program = [(load, 0, 0, 4), (jeq, 1, 0, audit_arch), (ret, 0, 0, eperm), (load, 0, 0, 0)]
    if x32:
        program += [(jge, 0, 1, 0x40000000), (ret, 0, 0, eperm)]
    for number in numbers:
        program += [(jeq, 0, 1, number), (ret, 0, 0, eperm)]
    program.append((ret, 0, 0, allow))
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in program)


def install_seccomp():
    """Refuse, in this process and everything it forks, the calls that reach another process
    (see ``_SECCOMP``); False on a machine with no table here (then only the uid, dumpable and
    pid-namespace layers stand)."""
    if _SECCOMP is None:
        return False
    code = seccomp_program(*_SECCOMP)
    buffer = ctypes.create_string_buffer(code, len(code))

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Fprog(len(code) // 8, ctypes.addressof(buffer))
    if _LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if _LIBC.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
    return True


def zygote_main(channels, limits, requests, replies):
    """The zygote's life: wire a test's descriptors once, then fork one child per request.

    Requests: ``j`` + length + JSON ``{code, mode, func_name}`` (a new solution: compile it,
    answer ``c`` + length + the compile error or nothing), ``g`` + the test's nonce (run the
    next test: fork, answer with the pid, wait, answer with the status and CPU). EOF: exit.
    The zygote puts itself under the seccomp filter first: no test can trace, read or write
    another process, the runner (the sandbox's pid 1) included.
    """
    try:
        os.dup2(requests, _ZYGOTE_FDS[0])
        os.dup2(replies, _ZYGOTE_FDS[1])
        requests, replies = _ZYGOTE_FDS
        for target, fd in enumerate((channels.inp, channels.out, channels.err, channels.result)):
            os.dup2(fd, target)
        os.closerange(4, _ZYGOTE_FDS[0])
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # oversize writes fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["fsize"], limits["fsize"]))
        resource.setrlimit(resource.RLIMIT_AS, (limits["address_space"], limits["address_space"]))
        if limits.get("nproc"):
            resource.setrlimit(resource.RLIMIT_NPROC, (limits["nproc"], limits["nproc"]))
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
        base = {"__builtins__": __builtins__}
        exec(HEADER, base)  # trusted: binds stdin/stdout/stderr to the wrappers above
        install_seccomp()
        gc.collect()
        gc.freeze()  # a test's garbage collections never walk (and copy) these objects
        libc = ctypes.PyDLL(None, use_errno=True)  # PyDLL: the GIL stays held across fork()
        fork = libc.fork
        fork.restype = ctypes.c_int
        job, code = None, None
        while True:
            kind = os.read(requests, 1)
            if not kind:
                os._exit(0)
            if kind == b"j":
                (size,) = struct.unpack("=I", _read_exact(requests, 4))
                job = json.loads(_read_exact(requests, size))
                base["__name__"] = "__solution__" if job["mode"] == "functional" else "__main__"
                try:
                    code, problem = compile(job["code"], "<solution>", "exec"), b""
                except BaseException as error:  # noqa: BLE001 - a syntax error (or a compiler bomb)
                    code, problem = None, f"compile: {type(error).__name__}: {error}"[:500].encode()
                _write_all(replies, b"c" + struct.pack("=I", len(problem)) + problem)
                continue
            nonce = _read_exact(requests, _NONCE_BYTES)
            pid = fork()
            if pid == 0:
                run_test_child(job, code, base, nonce)
            _write_all(replies, struct.pack("=i", pid))
            if pid < 0:  # no process left for a test (the pids limit): the runner reports it
                continue
            _, status = os.waitpid(pid, 0)
            _write_all(replies, _STATUS.pack(pid, status, _zygote_cpu()))
    except BaseException:  # noqa: BLE001 - the runner sees the closed pipe and starts another
        os._exit(70)


def _set_oom_score(value):
    """Raise this process's ``oom_score_adj`` (allowed without privileges; lowering is not).

    A non-dumpable process cannot write its own ``/proc/self`` files: the test's child, which
    inherits the flag, is dumpable just for this write and non-dumpable again before any
    untrusted code runs; the runner and the zygote stay non-dumpable throughout."""
    _LIBC.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    try:
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
        try:
            os.write(fd, str(value).encode())
        finally:
            os.close(fd)
    except OSError:
        pass
    finally:
        _LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def run_test_child(job, code, base, nonce):
    """In the forked child: close the zygote's pipes, limit CPU, run the untrusted code.

    Only functional and assert tests keep the result memfd (fd 3); an assert test's end marker
    carries this test's ``nonce``, so a program that writes the marker and exits early does not
    pass (the nonce is in this process's memory: a program that searches its own memory for it
    can still fake its own verdict, see docs/eval.md; it can reach no other)."""
    try:
        os.closerange(3 if job["mode"] == "stdin" else 4, 1 << 16)
        _set_oom_score(1000)  # memfd pages are not a process's RSS: the OOM killer takes the test
        if job.get("pidns") is False:
            os.setpgid(0, 0)  # weak isolation: the runner kills the test's process group
        cpu = int(job["timeout_s"]) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    except BaseException as error:  # noqa: BLE001
        os.write(2, f"sandbox setup: {type(error).__name__}: {error}".encode()[:500])
        os._exit(1)
    mode = job["mode"]
    try:
        if mode == "stdin":
            with contextlib.suppress(SystemExit):
                exec(code, base)
            sys.stdout.flush()
            os._exit(0)
        exec(code, base)
        if mode == "assert":  # the program (tests included) ran to its end
            data = ASSERT_DONE + nonce
        else:
            text = os.pread(0, os.fstat(0).st_size, 0).decode("utf-8", "surrogateescape")
            args = [json.loads(line) for line in text.split("\n") if line.strip()]
            result = getattr(base["Solution"](), job["func_name"])(*args)
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


# -- the runner --------------------------------------------------------------------------------
class ZygoteGone(Exception):
    """The zygote died or stopped answering (a test killed it)."""


class Zygote:
    """The runner's handle on its zygote: start, send a solution, run a test, replace."""

    def __init__(self, channels, limits):
        self.channels, self.limits = channels, limits
        self.pid = None
        self.cpu_s = 0.0  # the running zygote's last report
        self.retired_cpu_s = 0.0
        self.job = None
        self.start()

    def start(self):
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(req_w)
            os.close(rep_r)
            zygote_main(self.channels, self.limits, req_r, rep_w)
        os.close(req_r)
        os.close(rep_w)
        self.pid, self.requests, self.replies, self.cpu_s = pid, req_w, rep_r, 0.0

    def stop(self):
        if self.pid is None:
            return
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        for fd in (self.requests, self.replies):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.retired_cpu_s += self.cpu_s
        self.pid, self.cpu_s = None, 0.0

    def replace(self):
        """A new zygote holding the current solution (raises ZygoteGone if it cannot)."""
        self.stop()
        self.start()
        if self.job is not None and self.send_job(self.job):
            raise ZygoteGone("a new zygote could not take the solution")

    def _read(self, size, timeout):
        data, deadline = b"", time.monotonic() + timeout
        while len(data) < size:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self.replies], [], [], max(0.0, remaining))
            if not ready:
                raise ZygoteGone("no answer")
            chunk = os.read(self.replies, size - len(data))
            if not chunk:
                raise ZygoteGone("closed")
            data += chunk
        return data

    def send_job(self, job):
        """Hand the zygote a new solution; returns its compile error (or an empty string)."""
        self.job = job
        keys = ("code", "mode", "func_name", "timeout_s", "pidns")
        header = json.dumps({k: job.get(k) for k in keys}).encode("utf-8", "surrogateescape")
        try:
            _write_all(self.requests, b"j" + struct.pack("=I", len(header)) + header)
            kind = self._read(1, _ZYGOTE_REPLY_S + 30)  # compiling a huge program takes time
            (size,) = struct.unpack("=I", self._read(4, _ZYGOTE_REPLY_S))
            problem = self._read(size, _ZYGOTE_REPLY_S) if size else b""
        except (ZygoteGone, OSError):
            self.job = None
            self.stop()
            self.start()
            return "the sandbox's test process did not take the solution"
        if kind != b"c":
            return "the sandbox's test process answered garbage"
        return problem.decode("utf-8", "replace")

    def run(self, timeout_s, sweep, nonce):
        """One test: returns ``(exit status or None, timed out)``; ``sweep`` kills every
        process of the test (the zygote's replies come after it reaped the test's child)."""
        try:
            _write_all(self.requests, b"g" + nonce)
            (pid,) = struct.unpack("=i", self._read(4, _ZYGOTE_REPLY_S))
        except (ZygoteGone, OSError) as error:
            raise ZygoteGone(str(error)) from error
        if pid < 0:
            return None, False
        timed_out = False
        ready, _, _ = select.select([self.replies], [], [], timeout_s)
        if not ready:
            timed_out = True
        sweep(pid)
        try:
            _, status, cpu = _STATUS.unpack(self._read(_STATUS.size, _ZYGOTE_REPLY_S))
        except (ZygoteGone, OSError) as error:
            raise ZygoteGone(str(error)) from error
        self.cpu_s = cpu
        return status, timed_out


class Runner:
    """Runs jobs through the zygote and reports one row per test (see the module docstring)."""

    def __init__(self, limits, results, pidns):
        self.results, self.pidns = results, pidns
        self.channels = Channels()
        self.zygote = Zygote(self.channels, limits)

    def sweep(self, pid):
        """SIGKILL everything a test started: in our pid namespace every process but pid 1,
        this runner and its zygote; without one, the test's process group."""
        if not self.pidns:
            if pid <= 0:  # kill(0) would hit our own process group
                return
            for target in (-pid, pid):
                with contextlib.suppress(OSError):
                    os.kill(target, signal.SIGKILL)
            return
        keep = {1, os.getpid(), self.zygote.pid}
        for _ in range(100):  # a fork bomb refills the table while we kill
            victims = [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) not in keep]
            alive = 0
            for victim in victims:
                with contextlib.suppress(OSError):
                    os.kill(victim, signal.SIGKILL)
                    alive += _alive(victim)
            if not alive:
                break
        self.reap(keep)

    def reap(self, keep):
        """Wait out the zombies re-parented to us: the runner is the sandbox's pid 1, and an
        unreaped zombie still counts in the pids cgroup (the zygote is waited for by its own
        handle, so it is left alone)."""
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in keep:
                with contextlib.suppress(OSError):
                    os.waitpid(int(name), os.WNOHANG)

    def cpu_seconds(self):
        """User + system CPU of this runner, its zygotes and every test they ran."""
        own = resource.getrusage(resource.RUSAGE_SELF)
        reaped = resource.getrusage(resource.RUSAGE_CHILDREN)  # retired zygotes, with tests
        total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
        return round(total + self.zygote.cpu_s, 6)

    def run_job(self, job, should_stop=lambda: False):
        """Compile the solution once (in the zygote) and run its tests in order."""
        job = dict(job, pidns=self.pidns)
        problem = self.zygote.send_job(job)
        if problem:
            self.results.emit({"i": 0, "status": "error", "error": problem[:500]})
            return
        for index, test_input in enumerate(job["inputs"]):
            if index and should_stop():
                return
            row = self.run_test(job, index, test_input)
            self.results.emit(row)
            if job.get("stop_on_failure") and row["status"] != "ok":
                return

    def run_test(self, job, index, test_input):
        """Run one test and collect its row."""
        self.channels.reset(test_input)
        nonce = os.urandom(_NONCE_BYTES)
        try:
            exit_status, timed_out = self.zygote.run(job["timeout_s"], self.sweep, nonce)
        except ZygoteGone:
            self.sweep(0)
            self.zygote.replace()  # raises (and so ends this sandbox) when that fails too
            return {
                "i": index,
                "status": "killed",
                "out": "",
                "error": "the test's sandbox process died (a memory limit, or the test killed it)",
            }
        status, error = (None, "")
        if timed_out:
            status, error = "timeout", "time limit exceeded"
        elif exit_status is None:
            status, error = "error", "the sandbox could not fork the test"
        cap = job["output_cap"]
        result_fd = self.channels.out if job["mode"] == "stdin" else self.channels.result
        size, out = Channels.read(result_fd, cap)
        _, err = Channels.read(self.channels.err, 4096, tail=True)
        if status is None and size > cap:
            status, error = "error", f"output over {cap} bytes"
        tail = err.decode("utf-8", "replace").strip().splitlines()
        if status is None:
            if os.WIFSIGNALED(exit_status):
                number = os.WTERMSIG(exit_status)
                name = signal.Signals(number).name if number in signal.valid_signals() else number
                status, error = (
                    "killed",
                    f"killed by signal {name} (a limit: memory, CPU, processes)",
                )
            elif os.WEXITSTATUS(exit_status) != 0:
                status, error = "error", (tail[-1] if tail else f"exit status {exit_status}")
            elif job["mode"] == "assert" and out != ASSERT_DONE + nonce:
                status, error = "error", "the program exited before its tests finished"
            else:
                status = "ok"
        if job["mode"] == "assert":
            out = b""
        return {
            "i": index,
            "status": status,
            "out": out.decode("utf-8", "replace"),
            "error": error[:500],
        }


def _alive(pid):
    """Whether ``pid`` is still running (not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


class Results:
    """The one channel to the host: this process's original stdout."""

    def __init__(self):
        self.fd = os.dup(1)
        self.job_id = None

    def emit(self, row):
        if self.job_id is not None:
            row = {"j": self.job_id, **row}
        _write_all(self.fd, (json.dumps(row) + "\n").encode())


# -- between solutions (serve mode) ------------------------------------------------------------
def _wipe(folder):
    """Remove everything under ``folder`` (made writable first: a solution may chmod 000)."""
    with contextlib.suppress(OSError):
        for entry in list(os.scandir(folder)):
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False):
                    os.chmod(entry.path, stat.S_IRWXU)
                    _wipe(entry.path)
                    os.rmdir(entry.path)
                else:
                    os.unlink(entry.path)


def _remove_sysv_ipc():
    """Delete the System V shared memory, semaphores and queues of our IPC namespace."""
    libc = _LIBC
    for name, remove in (("shm", libc.shmctl), ("sem", libc.semctl), ("msg", libc.msgctl)):
        with contextlib.suppress(OSError, ValueError):
            with open(f"/proc/sysvipc/{name}") as table:
                rows = table.read().splitlines()[1:]
            for row in rows:
                fields = row.split()
                if len(fields) > 1:
                    args = (
                        (int(fields[1]), 0, 0, None) if name == "sem" else (int(fields[1]), 0, None)
                    )
                    remove(*args)  # IPC_RMID


def clean_between_jobs(pidns, workdir):
    """What one solution left for the next, gone: files, IPC objects, keys (processes are)."""
    if pidns:
        for folder in ("/tmp", "/dev/shm"):
            _wipe(folder)
        _remove_sysv_ipc()
        if _KEYCTL is not None:
            for keyring in _KEYRINGS:
                _LIBC.syscall(_KEYCTL, _KEYCTL_CLEAR, keyring)
        os.chdir("/tmp")
    elif workdir:
        _wipe(workdir)
        os.chdir(workdir)


class JobReader:
    """Job and stop lines from the host, read without blocking between tests."""

    def __init__(self, fd):
        self.fd = fd
        self.buffer = bytearray()
        self.jobs = []
        self.stopped = set()
        self.closed = False

    def poll(self, timeout):
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            self.closed = True
            return
        self.buffer += chunk
        while (newline := self.buffer.find(b"\n")) >= 0:
            message = json.loads(bytes(self.buffer[:newline]).decode("utf-8", "surrogateescape"))
            del self.buffer[: newline + 1]
            if "stop" in message:
                self.stopped.add(message["stop"])
            else:
                self.jobs.append(message)

    def next_job(self):
        while not self.jobs and not self.closed:
            self.poll(None)
        return self.jobs.pop(0) if self.jobs else None


def serve(runner, reader, workdir):
    runner.results.emit({"ready": True})
    while (job := reader.next_job()) is not None:
        runner.results.job_id = job["id"]

        def should_stop(job_id=job["id"]):
            reader.poll(0)
            return job_id in reader.stopped or reader.closed

        started = time.monotonic()
        runner.run_job(job, should_stop)
        runner.sweep(0)
        clean_between_jobs(runner.pidns, workdir)
        reader.stopped.discard(job["id"])
        seconds = round(time.monotonic() - started, 4)
        end = {"end": True, "seconds": seconds, "cpu_s": runner.cpu_seconds()}
        if runner.pidns:  # the host restarts the worker unless only we two are left
            end["procs"] = sum(1 for n in os.listdir("/proc") if n.isdigit() and _alive(int(n)))
        runner.results.emit(end)
        runner.results.job_id = None


def main():
    serving = sys.argv[1:2] == ["serve"]
    job_fd = os.dup(0)
    reader = JobReader(job_fd)
    if serving:  # the first line holds the limits every job shares
        while not reader.jobs and not reader.closed:
            reader.poll(None)
        if not reader.jobs:
            return
        limits = job = reader.jobs.pop(0)
    else:
        limits = job = json.loads(sys.stdin.buffer.read().decode("utf-8", "surrogateescape"))
    pidns = bool(limits.get("pidns"))
    _LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # before the zygote forks: it inherits the flag
    workdir = None
    if not pidns:  # weak isolation: no private /tmp, so use a fresh folder of our own
        import tempfile

        workdir = tempfile.mkdtemp(prefix="rollcli-sandbox-")
        os.chdir(workdir)
    for name in PRELOAD:
        __import__(name)
    results = Results()
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    runner = Runner(limits, results, pidns)
    try:
        if serving:
            serve(runner, reader, workdir)
        else:
            runner.run_job(job)
    except BrokenPipeError:
        return
    finally:
        runner.zygote.stop()


main()
