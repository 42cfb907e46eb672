"""Attacks on the sandbox's own processes (issue 26): pid 1, the result channel, the next job.

Each program here is the attack itself, run through the real sandbox (one per solution, and a
warm pool worker): it takes over the sandbox's pid 1 with ptrace and ``/proc/1/mem`` to forge
an ``ok`` row, forges HumanEval's end marker, or leaves an implant for the next solution.
"""

from __future__ import annotations

import os
import platform
import struct

import pytest

from rollcli.eval.benchmarks import CodeTest, Problem
from rollcli.eval.graders.code import grade_code, grade_code_batch
from rollcli.eval.graders.sandbox import SandboxJob, SandboxLimits, SandboxPool, run_in_sandbox
from rollcli.eval.graders.sandbox.bwrap import check_bwrap

needs_sandbox = pytest.mark.skipif(
    os.geteuid() != 0 or check_bwrap(1_234_567) is not None,
    reason="the full sandbox needs root (cgroups) and bubblewrap: scripts/test.sh installs it",
)
LIMITS = SandboxLimits(timeout_s=3.0, memory_mb=512, file_size_mb=8, num_procs=16, tmpfs_mb=32)
ROW = b'{"j": 0, "i": 0, "status": "ok", "out": "pwned", "error": ""}\n'


def _shellcode(row: bytes) -> bytes:
    """x86-64: ``write(1, row, len(row))`` then spin forever (the implant stays pid 1)."""
    return (
        b"\x48\x8d\x35\x13\x00\x00\x00"  # lea rsi, [rip + 19] (the row after this code)
        + b"\xbf\x01\x00\x00\x00"  # mov edi, 1
        + b"\xba"
        + struct.pack("<I", len(row))  # mov edx, len
        + b"\xb8\x01\x00\x00\x00"  # mov eax, 1 (write)
        + b"\x0f\x05"  # syscall
        + b"\xeb\xfe"  # jmp $
        + row
    )


# ptrace pid 1, write code at its instruction pointer through /proc/1/mem, let it run: pid 1
# holds the sandbox's result pipe, so it prints a forged ok row for a wrong answer
TAKEOVER = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
done = []
if libc.ptrace(16, 1, None, None) == 0:  # PTRACE_ATTACH
    done.append("attach")
    os.waitpid(1, 0x40000000)  # __WALL
    regs = (ctypes.c_ulonglong * 27)()
    libc.ptrace(12, 1, None, ctypes.byref(regs))  # PTRACE_GETREGS
    fd = os.open("/proc/1/mem", os.O_RDWR)
    os.pwrite(fd, {_shellcode(ROW)!r}, regs[16])  # at rip
    regs[15] = (1 << 64) - 1  # orig_rax = -1: the interrupted syscall is not restarted
    libc.ptrace(13, 1, None, ctypes.byref(regs))  # PTRACE_SETREGS
    libc.ptrace(17, 1, None, None)  # PTRACE_DETACH
try:
    os.close(os.open("/proc/1/mem", os.O_RDWR))
    done.append("mem")
except OSError:
    pass
for name, number, args in [
    ("process_vm_readv", 310, (1, 0, 1, 0, 1, 0)),
    ("kcmp", 312, (os.getpid(), 1, 0, 0, 0)),
    ("pidfd_open", 434, (1, 0)),
]:
    if libc.syscall(number, *args) >= 0 or ctypes.get_errno() not in (1, 3, 13, 38):
        done.append(name)
print("wrong answer", *done)
"""

needs_x86 = pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 shellcode")


@needs_sandbox
@needs_x86
def test_pid_1_cannot_be_taken_over_in_its_own_sandbox():
    run = run_in_sandbox(TAKEOVER, ["", ""], limits=LIMITS)
    assert [o.out for o in run.outcomes if o.status == "ok"] != ["pwned"]
    assert not any(o.out == "pwned" for o in run.outcomes), run
    assert run.outcomes and run.outcomes[0].out.strip() == "wrong answer", run.outcomes


@needs_sandbox
@needs_x86
def test_pid_1_cannot_be_taken_over_in_the_pool_and_the_next_job_is_untouched():
    """In the pool an implant would outlive its job: the next solution must run as usual."""
    spy = (
        "import os\nseen = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "print(len(seen))\nprint(input())"
    )
    with SandboxPool(1, LIMITS) as pool:
        first = pool.submit(SandboxJob(TAKEOVER, ("", ""), stop_on_failure=False)).result()
        second = pool.submit(SandboxJob(spy, ("hello\n",), stop_on_failure=False)).result()
        assert pool.num_replaced == 0
    assert not any(o.out == "pwned" for o in first.outcomes), first
    assert first.outcomes[0].out.strip() == "wrong answer", first.outcomes
    assert second.outcomes[0].status == "ok", second
    # the runner (pid 1), its zygote and the test itself: nothing left from the last job
    assert second.outcomes[0].out.split() == ["3", "hello"], second.outcomes


def _humaneval_problem() -> Problem:
    check = "\n\ndef check(candidate):\n    assert candidate(2) == 4\n\ncheck(double)\n"
    return Problem(
        "he/0",
        "double x",
        "code",
        tests=(CodeTest(check, "", "assert"),),
        starter_code='def double(x):\n    """Twice x."""\n',
        func_name="double",
    )


FORGE_MARKER = (
    "```python\ndef double(x):\n    return 0\n"
    "import os\nfor fd in range(3, 64):\n    try:\n"
    "        os.write(fd, b'\\x01rollcli-assert-done')\n    except OSError:\n        pass\n"
    "os._exit(0)\n```"
)


@needs_sandbox
def test_assert_mode_end_marker_cannot_be_forged():
    problem = _humaneval_problem()
    honest = grade_code(problem, "```python\ndef double(x):\n    return 2 * x\n```", LIMITS)
    assert honest.correct, honest
    result = grade_code(problem, FORGE_MARKER, LIMITS)
    assert not result.correct, result
    with SandboxPool(1, LIMITS) as pool:
        batch = grade_code_batch([(problem, FORGE_MARKER)], pool)
    assert not batch[0].correct, batch


def test_a_worker_holding_a_process_of_a_finished_job_is_replaced():
    """The host's check after every job: the runner's count, and the cgroup's when idle."""

    class _Cgroup:
        def __init__(self, pids):
            self._pids = pids

        def pids(self):
            return self._pids

    class _Sandbox:
        isolation = {"bwrap": True}

        def __init__(self, pids):
            self.cgroup = _Cgroup(pids)

    class _Worker:
        def __init__(self, pids, tasks=()):
            self.sandbox, self.tasks = _Sandbox(pids), list(tasks)

    pool = SandboxPool(1, LIMITS)
    try:
        assert pool._survivor(_Worker({10, 11, 12}), {"procs": 2}) is None
        assert "3 in the sandbox" in pool._survivor(_Worker({10, 11, 12}), {"procs": 3})
        assert "in the sandbox" in pool._survivor(_Worker({10, 11, 12}), {})
        assert "4 in its cgroup" in pool._survivor(_Worker({10, 11, 12, 13}), {"procs": 2})
        # a job queued behind may already be running: only the runner's count then
        assert pool._survivor(_Worker({10, 11, 12, 13}, ["next"]), {"procs": 2}) is None
    finally:
        pool.close()
