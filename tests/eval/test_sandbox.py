"""The code sandbox against a hostile corpus, plus LiveCodeBench-style grading of honest code.

Every hostile program is written so that it would produce the expected output only if the
attack worked on the host; each must be graded as a failure, leave no process behind, leave
the host's files as they were, and come back within a few seconds. Several bypass the Python
guard on purpose (``posix.fork``, ``posix.system``, ctypes sockets) to exercise the OS layer.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from rollcli.eval.benchmarks import CodeTest, Problem, load_benchmark
from rollcli.eval.graders.code import extract_code, grade_code, stdout_matches
from rollcli.eval.graders.sandbox import SandboxLimits, _processes_of, run_in_sandbox

FAST = SandboxLimits(timeout_s=2.0, memory_mb=1024, file_size_mb=8, num_procs=8)


def _problem(expected: str, test_input: str = "") -> Problem:
    return Problem("hostile/1", "q", "code", tests=(CodeTest(test_input, expected, "stdin"),))


def _grade_hostile(code: str, expected: str) -> tuple:
    started = time.monotonic()
    result = grade_code(_problem(expected), f"```python\n{code}\n```", FAST)
    elapsed = time.monotonic() - started
    return result, elapsed


@pytest.fixture()
def host_dir(tmp_path_factory) -> Path:
    """A host folder outside /tmp (under $HOME) with a file the attacks target."""
    base = Path.home() / ".cache" / f"rollcli-sandbox-test-{os.getpid()}-{time.monotonic_ns()}"
    base.mkdir(parents=True)
    (base / "keep.txt").write_text("precious")
    yield base
    for child in base.iterdir():
        child.unlink()
    base.rmdir()


def _assert_contained(result, elapsed, limit_s=15.0):
    assert not result.correct, result
    assert elapsed < limit_s, f"took {elapsed:.1f}s"


@pytest.mark.slow
def test_fork_bomb_is_contained():
    before = len(os.listdir("/proc"))
    code = "import posix\nwhile True:\n    try:\n        posix.fork()\n    except OSError:\n        pass"
    result, elapsed = _grade_hostile(code, "done")
    _assert_contained(result, elapsed)
    time.sleep(0.2)
    assert len(os.listdir("/proc")) < before + 20


def test_infinite_loop_times_out():
    result, elapsed = _grade_hostile("while True:\n    pass", "1")
    _assert_contained(result, elapsed, limit_s=FAST.timeout_s + 8)
    assert result.status in ("timeout", "runtime_error")


def test_huge_allocation_fails():
    result, elapsed = _grade_hostile("x = bytearray(10 * 1024**3)\nprint('allocated')", "allocated")
    _assert_contained(result, elapsed)
    assert "MemoryError" in result.detail


def test_writes_outside_workdir_do_not_reach_host(tmp_path, host_dir):
    targets = [tmp_path / "escaped.txt", host_dir / "escaped.txt", Path("/tmp/rollcli-escaped.txt")]
    code = (
        "import posix\n"
        f"for p in {[str(t) for t in targets]!r}:\n"
        "    try:\n"
        "        fd = posix.open(p, posix.O_WRONLY | posix.O_CREAT, 0o644)\n"
        "        posix.write(fd, b'x')\n"
        "    except OSError:\n"
        "        pass\n"
        f"print(open({str(host_dir / 'escaped.txt')!r}).read())"
    )
    result, elapsed = _grade_hostile(code, "x")
    _assert_contained(result, elapsed)
    for target in targets:
        assert not target.exists(), target


def test_deleting_host_files_fails(tmp_path, host_dir):
    victim = tmp_path / "victim.txt"
    victim.write_text("data")
    code = (
        "import posix\n"
        f"for p in [{str(victim)!r}, {str(host_dir / 'keep.txt')!r}]:\n"
        "    posix.unlink(p)\n"
        "print('deleted')"
    )
    result, elapsed = _grade_hostile(code, "deleted")
    _assert_contained(result, elapsed)
    assert victim.read_text() == "data"
    assert (host_dir / "keep.txt").read_text() == "precious"


def test_environment_is_not_inherited(monkeypatch):
    monkeypatch.setenv("ROLLCLI_TEST_SECRET", "s3cr3t")
    code = "import os\nprint(os.environ.get('ROLLCLI_TEST_SECRET', 'none'))"
    result, elapsed = _grade_hostile(code, "s3cr3t")
    _assert_contained(result, elapsed)
    run = run_in_sandbox("import os\nprint(sorted(os.environ))", [""], limits=FAST)
    names = json.loads(run.outcomes[0].out.replace("'", '"'))
    assert "ROLLCLI_TEST_SECRET" not in names and len(names) < 15


def test_socket_cannot_reach_host():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                accepted.append(server.accept())
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    code = (
        "import ctypes, struct\n"
        "ok = False\n"
        "try:\n"
        "    import socket\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=1); ok = True\n"
        "except Exception:\n"
        "    pass\n"
        "libc = ctypes.CDLL(None)\n"
        "fd = libc.socket(2, 1, 0)\n"
        f"addr = struct.pack('<HH4s8x', 2, (({port} >> 8) | (({port} & 255) << 8)), "
        "bytes([127, 0, 0, 1]))\n"
        "if fd >= 0 and libc.connect(fd, addr, len(addr)) == 0:\n"
        "    ok = True\n"
        "print('connected' if ok else 'blocked')"
    )
    result, elapsed = _grade_hostile(code, "connected")
    stop.set()
    thread.join()
    server.close()
    _assert_contained(result, elapsed)
    assert accepted == []


def test_shell_spawn_is_contained(tmp_path, host_dir):
    target = host_dir / "shell.txt"
    code = (
        "import posix\n"
        f"posix.system('echo pwned > {target}; echo pwned > {tmp_path / 'shell.txt'}')\n"
        f"print(open({str(target)!r}).read().strip())"
    )
    result, elapsed = _grade_hostile(code, "pwned")
    _assert_contained(result, elapsed)
    assert not target.exists() and not (tmp_path / "shell.txt").exists()


@pytest.mark.parametrize(
    "code",
    [
        "import sys\nwhile True:\n    sys.stdout.write('x' * 1000000)",
        "import posix\nwhile True:\n    posix.write(1, b'x' * 1000000)",
        "import sys\nwhile True:\n    sys.stderr.write('x' * 1000000)",
    ],
    ids=["print", "fd-write", "stderr"],
)
def test_printing_gigabytes_is_capped(code):
    result, elapsed = _grade_hostile(code, "x")
    _assert_contained(result, elapsed)


def test_no_process_or_workdir_left_behind(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    run = run_in_sandbox(
        "import posix, time\nif posix.fork() == 0:\n    posix.setsid()\n    time.sleep(60)\n"
        "print('parent')",
        [""],
        limits=FAST,
    )
    assert run.outcomes[0].status == "ok"
    assert list(tmp_path.iterdir()) == []
    uid = run.isolation.get("uid")
    if uid is not None and uid != os.getuid():
        assert _processes_of(uid) == []


def test_isolation_report_as_root():
    run = run_in_sandbox("print(1)", [""], limits=FAST)
    if os.geteuid() != 0:
        pytest.skip("namespaces and uid drop are only guaranteed when run as root")
    assert run.isolation["netns"] and run.isolation["mountns"] and run.isolation["private_tmp"]
    assert run.isolation["uid"] != 0


def test_lcb_fixture_solutions_graded(lcb_dir):
    solutions = json.loads((lcb_dir / "solutions.json").read_text())
    for problem in load_benchmark("livecodebench", path=lcb_dir):
        qid = problem.id.split("/", 1)[1]
        good = grade_code(problem, f"```python\n{solutions[qid]['correct']}```")
        bad = grade_code(problem, f"```python\n{solutions[qid]['wrong']}```")
        assert good.correct and good.num_passed == len(problem.tests), (qid, good)
        assert not bad.correct and bad.num_passed == 0, (qid, bad)


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


def test_many_tests_with_large_honest_outputs_fit():
    limits = SandboxLimits(timeout_s=6.0, output_cap_bytes=4 << 20)
    run = run_in_sandbox("print('x' * 3_000_000)", [""] * 12, limits=limits)
    assert len(run.outcomes) == 12 and run.killed_reason is None
    assert all(o.status == "ok" and len(o.out) == 3_000_001 for o in run.outcomes)


def test_unprivileged_caller_still_gets_namespaces():
    """As a non-root caller (nobody, via setpriv) an unprivileged user namespace gives the same
    network and /tmp isolation; skipped where that cannot be arranged."""
    import shutil
    import subprocess

    python = "/usr/bin/python3"
    if os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists(python):
        pytest.skip("needs root (to become nobody), setpriv and a system python3")
    root = str(Path(__file__).resolve().parents[2])
    code = (
        "import json\nfrom rollcli.eval.graders.sandbox import run_in_sandbox, SandboxLimits\n"
        "prog = 'import ctypes, struct\\nlibc = ctypes.CDLL(None)\\nfd = libc.socket(2, 1, 0)\\n"
        'a = struct.pack("<HH4s8x", 2, 0x5000, bytes([127, 0, 0, 1]))\\n'
        'print(libc.connect(fd, a, len(a)))\\nopen("/tmp/rollcli-unpriv-probe", "w")\'\n'
        "r = run_in_sandbox(prog, [''], limits=SandboxLimits(timeout_s=3))\n"
        "print(json.dumps({'iso': r.isolation, 'out': r.outcomes[0].out}))"
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
    if not report["iso"].get("netns"):
        pytest.skip("this kernel refuses unprivileged user namespaces (documented fallback)")
    assert report["out"].split()[0] == "-1"  # connect failed: no network in the namespace
    assert report["iso"]["private_tmp"]
    assert not Path("/tmp/rollcli-unpriv-probe").exists()
