"""The warm sandbox pool: the same verdicts as one sandbox per solution, both deadlines, early
stops, replaced workers, nothing left from one solution for the next, refusal without a
sandbox (the hostile corpus runs through it too: test_sandbox_hostile.py)."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from rollcli.eval.benchmarks import CodeTest, Problem, load_benchmark
from rollcli.eval.graders.code import grade_code, grade_code_batch
from rollcli.eval.graders.sandbox import SandboxJob, SandboxLimits, SandboxPool
from rollcli.eval.graders.sandbox.bwrap import check_bwrap
from rollcli.eval.graders.sandbox.isolate import SandboxUnavailable, processes_of

FULL_SANDBOX = os.geteuid() == 0 and check_bwrap(1_234_567) is None
pytestmark = pytest.mark.skipif(
    not FULL_SANDBOX, reason="the sandbox needs root (cgroups) and bubblewrap (scripts/test.sh)"
)
FAST = SandboxLimits(timeout_s=2.0, memory_mb=512, file_size_mb=8, num_procs=16, tmpfs_mb=32)
ADD = "a, b = map(int, input().split())\nprint(a + b)"


def _stdin_problem(num_tests: int = 5, pid: str = "add/1") -> Problem:
    tests = tuple(CodeTest(f"{i} {i}\n", f"{2 * i}\n", "stdin") for i in range(num_tests))
    return Problem(pid, "add two numbers", "code", tests=tests)


def _fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def test_batch_verdicts_equal_one_sandbox_each(lcb_dir):
    solutions = json.loads((lcb_dir / "solutions.json").read_text())
    items = [
        (p, _fenced(solutions[p.id.split("/", 1)[1]][kind]))
        for p in load_benchmark("livecodebench", path=lcb_dir)
        for kind in ("correct", "wrong")
    ]
    with SandboxPool(2, FAST) as pool:
        batch = grade_code_batch(items, pool)
    single = [grade_code(p, r, FAST) for p, r in items]
    assert [(b.correct, b.status, b.num_passed) for b in batch] == [
        (s.correct, s.status, s.num_passed) for s in single
    ]
    assert [b.correct for b in batch] == [True, False] * (len(items) // 2)


def test_modes_fraction_and_no_code():
    functional = Problem(
        "f/1",
        "double it",
        "code",
        tests=tuple(CodeTest(f"{i}", f"{2 * i}", "functional") for i in range(4)),
        func_name="double",
    )
    half = "class Solution:\n    def double(self, x):\n        return 2 * x if x < 2 else x"
    check = (
        "\n\ndef check(candidate):\n    assert candidate(2) == 4\n    assert candidate(-1) == -2\n"
        "\ncheck(double)\n"
    )
    humaneval = Problem(
        "h/1",
        "complete",
        "code",
        tests=(CodeTest(check, "", "assert"),),
        starter_code='def double(x):\n    """Twice x."""\n',
        func_name="double",
    )
    items = [
        (functional, _fenced(half)),
        (humaneval, "    return 2 * x\n"),  # a continuation of the prompt
        (humaneval, _fenced("def double(x):\n    return x + x")),  # a whole function
        (humaneval, _fenced("def double(x):\n    return x")),
        (humaneval, _fenced("import sys\nsys.exit(0)")),  # exits before its tests: a failure
        (_stdin_problem(), "no code here"),
    ]
    with SandboxPool(2, FAST) as pool:
        results = grade_code_batch(items, pool, stop_at_first_failure=False)
    assert results[0].fraction_passed == 0.5 and results[0].status == "wrong_answer"
    assert [r.correct for r in results[1:5]] == [True, True, False, False]
    assert results[4].status == "runtime_error"
    assert results[5].status == "no_code" and not results[5].correct


def test_a_wrong_answer_stops_the_solution_and_frees_the_worker():
    slow_wrong = "import time\ntime.sleep(0.3)\nprint(-1)"
    problem = _stdin_problem(num_tests=30)
    with SandboxPool(1, FAST) as pool:
        started = time.monotonic()
        wrong, right = grade_code_batch(
            [(problem, _fenced(slow_wrong)), (problem, _fenced(ADD))], pool
        )
        elapsed = time.monotonic() - started
        assert pool.num_replaced == 0
    assert wrong.status == "wrong_answer" and wrong.num_passed == 0
    assert right.correct and right.num_passed == 30
    assert elapsed < 5  # not 30 x 0.3 s: the worker skipped the wrong solution's other tests


def test_per_test_deadline_keeps_the_worker():
    with SandboxPool(1, FAST) as pool:
        hang, ok = grade_code_batch(
            [
                (_stdin_problem(3), _fenced("while True:\n    pass")),
                (_stdin_problem(3), _fenced(ADD)),
            ],
            pool,
        )
        assert pool.num_replaced == 0  # the runner killed the test, the worker stayed
    assert hang.status == "timeout" and ok.correct


def test_rollout_deadline_replaces_the_worker():
    slow = "import time\ntime.sleep(0.6)\n" + ADD
    with SandboxPool(1, FAST, rollout_timeout_s=1.5) as pool:
        started = time.monotonic()
        slow_result, ok = grade_code_batch(
            [(_stdin_problem(20), _fenced(slow)), (_stdin_problem(3), _fenced(ADD))], pool
        )
        elapsed = time.monotonic() - started
        assert pool.num_deadline_kills == 1 and pool.num_replaced == 1
    assert slow_result.status == "timeout" and "rollout deadline" in slow_result.detail
    assert 0 < slow_result.num_passed < 20
    assert ok.correct
    assert elapsed < 15


def test_a_solution_that_kills_its_runner_costs_only_itself():
    killer = "import os, signal\nos.kill(-1, signal.SIGKILL)\nprint(0)"
    with SandboxPool(1, FAST) as pool:
        results = grade_code_batch(
            [(_stdin_problem(2), _fenced(ADD)), (_stdin_problem(2), _fenced(killer))]
            + [(_stdin_problem(2), _fenced(ADD))] * 3,
            pool,
        )
        # the runner is the sandbox's pid 1, which kill(-1) does not reach: only the zygote
        # (and the test) die, and the runner forks a new zygote for the next solution
        assert pool.num_replaced == 0
    assert [r.correct for r in results] == [True, False, True, True, True]


def test_nothing_of_one_solution_reaches_the_next():
    leave = (
        "import os, ctypes, time\n"
        "for d in ['/tmp', '/dev/shm', '.']:\n"
        "    open(os.path.join(d, 'left-behind'), 'w').write('x')\n"
        "os.makedirs('/tmp/locked/inner', exist_ok=True)\nos.chmod('/tmp/locked', 0)\n"
        "libc = ctypes.CDLL(None)\nlibc.shmget(0x5EED, 4096, 0o1666)\n"
        "if os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n    os._exit(0)\n"
        "print('left')"
    )
    look = (
        "import os, ctypes\nfound = []\n"
        "for d in ['/tmp', '/dev/shm']:\n    found += os.listdir(d)\n"
        "libc = ctypes.CDLL(None)\n"
        "if libc.shmget(0x5EED, 0, 0) >= 0:\n    found.append('shm')\n"
        "others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) > 3 "
        "and int(p) != os.getpid()]\n"
        "found += ['pid' + p for p in others]\n"
        "print('clean' if not found else found)"
    )
    problem = Problem("iso/1", "q", "code", tests=(CodeTest("", "clean\n", "stdin"),))
    with SandboxPool(1, FAST) as pool:
        results = grade_code_batch(
            [(problem, _fenced(leave)), (problem, _fenced(look))], pool, stop_at_first_failure=False
        )
        assert pool.num_replaced == 0  # the same worker ran both
    assert results[1].correct, results[1]


def test_many_threads_share_one_pool():
    problem = _stdin_problem(4)
    outcomes: list[bool] = []
    lock = threading.Lock()
    with SandboxPool(2, FAST) as pool:

        def work(index: int) -> None:
            code = ADD if index % 3 else "print(0)"
            results = grade_code_batch([(problem, _fenced(code))] * 5, pool)
            with lock:
                outcomes.extend(r.correct == bool(index % 3) for r in results)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    assert len(outcomes) == 30 and all(outcomes)


def test_close_stops_every_worker_and_refuses_new_jobs():
    pool = SandboxPool(2, FAST)
    runs = pool.run([SandboxJob(ADD, ("1 2",)) for _ in range(4)])
    uids = {r.isolation["uid"] for r in runs}
    assert all(r.outcomes[0].out == "3\n" for r in runs)
    pool.close()
    assert all(processes_of(uid) == [] for uid in uids)
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(SandboxJob(ADD, ("1 2",)))


def test_no_sandbox_no_run(monkeypatch):
    monkeypatch.setenv("ROLLCLI_BWRAP", "/nonexistent/bwrap")
    monkeypatch.delenv("ROLLCLI_SANDBOX_ALLOW_WEAK", raising=False)
    with SandboxPool(1, FAST) as pool:
        future = pool.submit(SandboxJob(ADD, ("1 2",)))
        with pytest.raises(SandboxUnavailable, match="bubblewrap"):
            future.result(timeout=60)
        (result,) = grade_code_batch([(_stdin_problem(1), _fenced(ADD))], pool)
    assert result.status == "sandbox_unavailable" and not result.correct


def test_weak_isolation_when_allowed_still_separates_solutions(monkeypatch):
    monkeypatch.setenv("ROLLCLI_BWRAP", "/nonexistent/bwrap")
    weak = SandboxLimits(timeout_s=2.0, memory_mb=512, num_procs=16, allow_weak=True)
    leave = "open('left-behind', 'w').write('x')\nprint('left')"
    look = "import os\nprint(os.listdir('.') or 'clean')"
    problem = Problem("weak/1", "q", "code", tests=(CodeTest("", "clean\n", "stdin"),))
    with SandboxPool(1, weak) as pool:
        results = grade_code_batch(
            [
                (problem, _fenced(leave)),
                (problem, _fenced(look)),
                (_stdin_problem(3), _fenced(ADD)),
            ],
            pool,
            stop_at_first_failure=False,
        )
    assert [r.correct for r in results] == [False, True, True]
