"""LiveCodeBench-style grading of honest code in the sandbox, its isolation report, and its
refusal where bubblewrap or cgroup limits are missing (the hostile corpus:
test_sandbox_hostile.py)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from rollcli.eval.benchmarks import CodeTest, Problem, load_benchmark
from rollcli.eval.graders.code import extract_code, grade_code, stdout_matches
from rollcli.eval.graders.sandbox import SandboxLimits, SandboxUnavailable, run_in_sandbox
from rollcli.eval.graders.sandbox.bwrap import check_bwrap

FULL_SANDBOX = os.geteuid() == 0 and check_bwrap(1_234_567) is None
needs_sandbox = pytest.mark.skipif(
    not FULL_SANDBOX, reason="the sandbox needs root (cgroups) and bubblewrap (scripts/test.sh)"
)
FAST = SandboxLimits(timeout_s=2.0, memory_mb=1024, file_size_mb=8, num_procs=8)


def _problem(expected: str, test_input: str = "") -> Problem:
    return Problem("hostile/1", "q", "code", tests=(CodeTest(test_input, expected, "stdin"),))


def _grade_hostile(code: str, expected: str) -> tuple:
    started = time.monotonic()
    result = grade_code(_problem(expected), f"```python\n{code}\n```", FAST)
    elapsed = time.monotonic() - started
    return result, elapsed


def _assert_contained(result, elapsed, limit_s=15.0):
    assert not result.correct, result
    assert elapsed < limit_s, f"took {elapsed:.1f}s"


@needs_sandbox
def test_infinite_loop_times_out():
    result, elapsed = _grade_hostile("while True:\n    pass", "1")
    _assert_contained(result, elapsed, limit_s=FAST.timeout_s + 8)
    assert result.status in ("timeout", "runtime_error")


@needs_sandbox
def test_huge_allocation_fails():
    result, elapsed = _grade_hostile("x = bytearray(10 * 1024**3)\nprint('allocated')", "allocated")
    _assert_contained(result, elapsed)
    assert "MemoryError" in result.detail or "killed" in result.detail


@needs_sandbox
def test_environment_is_not_inherited(monkeypatch):
    monkeypatch.setenv("ROLLCLI_TEST_SECRET", "s3cr3t")
    code = "import os\nprint(os.environ.get('ROLLCLI_TEST_SECRET', 'none'))"
    result, elapsed = _grade_hostile(code, "s3cr3t")
    _assert_contained(result, elapsed)
    run = run_in_sandbox("import os\nprint(sorted(os.environ))", [""], limits=FAST)
    names = json.loads(run.outcomes[0].out.replace("'", '"'))
    assert "ROLLCLI_TEST_SECRET" not in names and len(names) < 15


@needs_sandbox
def test_isolation_report():
    run = run_in_sandbox("print(1)", [""], limits=FAST)
    if os.geteuid() != 0:
        pytest.skip("cgroups and the uid drop need root here")
    assert run.isolation["bwrap"] and not run.isolation["weak"], run.isolation
    assert run.isolation["cgroup"] == {"memory": 1, "pids": 1} or run.isolation["cgroup"]
    assert run.isolation["uid"] != 0
    assert run.usage["memory_peak_bytes"] > 0


def test_missing_bubblewrap_refuses_unless_weak_is_allowed(monkeypatch):
    problem = _problem("2\n", "1\n")
    monkeypatch.setenv("ROLLCLI_BWRAP", "/nonexistent/bwrap")
    monkeypatch.delenv("ROLLCLI_SANDBOX_ALLOW_WEAK", raising=False)
    check_bwrap.cache_clear()
    try:
        refused = grade_code(problem, "```python\nprint(int(input()) * 2)\n```", FAST)
        assert not refused.correct and refused.status == "sandbox_unavailable"
        assert "apt-get install bubblewrap" in refused.detail
        import glob

        assert glob.glob(f"/sys/fs/cgroup/*/rollcli-sandbox-{os.getpid()}-*") == []  # undone
        weak = SandboxLimits(timeout_s=2.0, memory_mb=1024, allow_weak=True)
        run = run_in_sandbox("print(int(input()) * 2)", ["1\n"], limits=weak)
        assert run.isolation["weak"] and not run.isolation["bwrap"]
        assert run.outcomes[0].out == "2\n"
    finally:
        check_bwrap.cache_clear()


def test_missing_cgroup_limits_refuse_unless_weak_is_allowed(monkeypatch):
    from rollcli.eval.graders.sandbox import isolate
    from rollcli.eval.graders.sandbox.cgroup import CgroupUnavailable

    def unavailable(*args, **kwargs):
        raise CgroupUnavailable("no cgroup controller memory is mounted")

    monkeypatch.setattr(isolate, "create_cgroup", unavailable)
    monkeypatch.delenv("ROLLCLI_SANDBOX_ALLOW_WEAK", raising=False)
    with pytest.raises(SandboxUnavailable, match="memory"):
        run_in_sandbox("print(1)", [""], limits=FAST)
    monkeypatch.setenv("ROLLCLI_SANDBOX_ALLOW_WEAK", "1")
    run = run_in_sandbox("print(1)", [""], limits=FAST)
    assert run.isolation["weak"] and run.isolation["cgroup"] is None
    assert run.outcomes[0].out == "1\n"


@needs_sandbox
def test_grading_errors_are_failed_verdicts():
    no_func = Problem("f/1", "q", "code", tests=(CodeTest("1", "1", "functional"),))
    result = grade_code(no_func, "```python\nclass Solution: pass\n```", FAST)
    assert not result.correct and result.status == "grader_error" and "func_name" in result.detail
    no_tests = Problem("f/2", "q", "code", tests=())
    assert grade_code(no_tests, "```python\nprint(1)\n```", FAST).status == "grader_error"


@needs_sandbox
def test_lcb_fixture_solutions_graded(lcb_dir):
    solutions = json.loads((lcb_dir / "solutions.json").read_text())
    for problem in load_benchmark("livecodebench", path=lcb_dir):
        qid = problem.id.split("/", 1)[1]
        good = grade_code(problem, f"```python\n{solutions[qid]['correct']}```")
        bad = grade_code(problem, f"```python\n{solutions[qid]['wrong']}```")
        assert good.correct and good.num_passed == len(problem.tests), (qid, good)
        assert not bad.correct and bad.num_passed == 0, (qid, bad)


@needs_sandbox
def test_common_stdin_idioms_work():
    problem = _problem("6\n", "1 2 3\n")
    idioms = [
        "print(sum(map(int, open(0).read().split())))",
        "import sys\nprint(sum(map(int, sys.stdin.buffer.read().split())))",
        "print(sum(map(int, input().split())))\nexit()",
        "import threading\ndef f():\n    print(sum(map(int, input().split())))\n"
        "t = threading.Thread(target=f)\nt.start()\nt.join()",
    ]
    for code in idioms:
        assert grade_code(problem, f"```python\n{code}\n```").correct, code


def test_stdout_comparison_like_livecodebench():
    assert stdout_matches("2.5\n4\n", "2.50\n4")
    assert stdout_matches("1 2 3", "1   2 3  \n")
    assert not stdout_matches("2.5\n4", "2.5")
    assert not stdout_matches("1.3333333333333333", "1.3333333333")
    assert not stdout_matches("Yes", "yes")


def test_extract_code_takes_last_python_block():
    text = "plan\n```\nnot this\n```\n```python\nprint(1)\n```\nthen\n```python\nprint(2)\n```"
    assert extract_code(text) == "print(2)\n"
    assert extract_code("no code here") is None


@needs_sandbox
def test_many_tests_with_large_honest_outputs_fit():
    limits = SandboxLimits(timeout_s=6.0, output_cap_bytes=4 << 20)
    run = run_in_sandbox("print('x' * 3_000_000)", [""] * 12, limits=limits)
    assert len(run.outcomes) == 12 and run.killed_reason is None
    assert all(o.status == "ok" and len(o.out) == 3_000_001 for o in run.outcomes)


def test_unprivileged_caller_refuses_then_runs_weakly_with_namespaces():
    """As a non-root caller (nobody, via setpriv) no cgroup can be created on v1: the sandbox
    refuses; opted in, bubblewrap still gives it no network and a private /tmp."""
    import shutil
    import subprocess

    python = "/usr/bin/python3"
    if os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists(python):
        pytest.skip("needs root (to become nobody), setpriv and a system python3")
    root = str(Path(__file__).resolve().parents[2])
    code = (
        "import json, os\nfrom rollcli.eval.graders.sandbox import run_in_sandbox, SandboxLimits\n"
        "from rollcli.eval.graders.sandbox import SandboxUnavailable\n"
        "prog = 'import ctypes, struct\\nlibc = ctypes.CDLL(None)\\nfd = libc.socket(2, 1, 0)\\n"
        'a = struct.pack("<HH4s8x", 2, 0x5000, bytes([127, 0, 0, 1]))\\n'
        'print(libc.connect(fd, a, len(a)))\\nopen("/tmp/rollcli-unpriv-probe", "w")\'\n'
        "try:\n    run_in_sandbox(prog, [''], limits=SandboxLimits(timeout_s=3))\n"
        "    refused = ''\nexcept SandboxUnavailable as e:\n    refused = str(e)\n"
        "r = run_in_sandbox(prog, [''], limits=SandboxLimits(timeout_s=3, allow_weak=True))\n"
        "print(json.dumps({'refused': refused, 'iso': r.isolation, 'out': r.outcomes[0].out}))"
    )
    result = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": root},
    )
    if result.returncode != 0:
        pytest.skip(f"cannot run rollcli as nobody here: {result.stderr[-300:]}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert "cgroup" in report["refused"]
    assert report["iso"]["weak"] and report["iso"]["cgroup"] is None
    if not report["iso"]["bwrap"]:
        pytest.skip("this kernel refuses unprivileged user namespaces (documented fallback)")
    assert report["out"].split()[0] == "-1"  # connect failed: no network in the namespace
    assert not Path("/tmp/rollcli-unpriv-probe").exists()
