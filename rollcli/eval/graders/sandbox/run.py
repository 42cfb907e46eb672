"""Run one untrusted program against a list of test inputs (one sandbox per solution).

:func:`run_in_sandbox` starts :mod:`._runner` in a fresh sandbox (:func:`.isolate.start_isolated`),
sends it the code and the inputs (never the expected outputs: comparison happens in the caller,
so the code cannot forge a pass), and reads one result row per test from the runner's stdout.
The parent enforces a wall deadline per test on top of the runner's own, caps every line it
reads, validates every row (a garbled, out-of-order or oversized row ends the run with a reason,
never an exception), and afterwards kills the sandbox and removes its cgroups. It opens no file
the sandbox could have placed: there is no host work directory at all.
"""

from __future__ import annotations

import json
import os
import selectors
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rollcli.eval.graders.sandbox.isolate import SandboxUnavailable, start_isolated

__all__ = [
    "RUNNER_SOURCE",
    "SandboxLimits",
    "SandboxRun",
    "TestOutcome",
    "parse_row",
    "run_in_sandbox",
]

RUNNER_SOURCE = Path(__file__).with_name("_runner.py").read_text("utf-8")
_STARTUP_GRACE_S = 15.0  # interpreter start + namespaces + preloads, on a loaded machine
_DEADLINE_GRACE_S = 1.0
_STATUSES = ("ok", "error", "timeout", "killed")


@dataclass(frozen=True)
class SandboxLimits:
    """Per-solution limits. ``timeout_s`` is per test (LiveCodeBench uses 6 s).

    ``memory_mb`` bounds everything the sandbox holds (processes, its tmpfs files, shared
    memory, memfds); ``tmpfs_mb`` caps ``/tmp`` and ``/dev/shm`` each; ``num_procs`` counts the
    program's processes and threads. ``allow_weak`` runs even where bubblewrap or cgroup limits
    are missing (rlimits only; see docs/eval.md): never for untrusted code on a shared machine.
    """

    timeout_s: float = 6.0
    memory_mb: int = 4096
    file_size_mb: int = 32
    num_procs: int = 16
    output_cap_bytes: int = 16 << 20
    tmpfs_mb: int = 64
    allow_weak: bool = False


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
    usage: dict[str, int] = field(default_factory=dict)
    stopped_early: bool = False
    killed_reason: str | None = None
    seconds: float = 0.0
    stderr_tail: str = ""  # the last 2 kB the sandbox wrote to its own stderr


def run_in_sandbox(
    code: str,
    inputs: Sequence[str],
    *,
    mode: Literal["stdin", "functional", "assert"] = "stdin",
    func_name: str | None = None,
    limits: SandboxLimits = SandboxLimits(),
    on_outcome: Callable[[TestOutcome], bool] | None = None,
) -> SandboxRun:
    """Run ``code`` on each input; ``on_outcome`` returning False stops (and kills) the run.

    Raises :class:`SandboxUnavailable` where the sandbox cannot be built (and weak isolation
    was not allowed); everything the program does is reported in the returned run.
    """
    if mode == "functional" and not func_name:
        raise ValueError("functional tests need func_name (the Solution method to call)")
    started = time.monotonic()
    sandbox = start_isolated(
        ["-c", RUNNER_SOURCE],
        memory_bytes=limits.memory_mb << 20,
        max_procs=limits.num_procs,
        tmpfs_bytes=limits.tmpfs_mb << 20,
        allow_weak=limits.allow_weak,
    )
    run = SandboxRun(isolation=sandbox.isolation)
    job = {
        "code": code,
        "inputs": list(inputs),
        "mode": mode,
        "func_name": func_name,
        "timeout_s": limits.timeout_s,
        "address_space": limits.memory_mb << 20,
        "fsize": limits.file_size_mb << 20,
        "nproc": limits.num_procs if sandbox.isolation["weak"] and sandbox.uid else 0,
        "output_cap": limits.output_cap_bytes,
        "pidns": sandbox.isolation["bwrap"],
    }
    try:
        try:
            assert sandbox.process.stdin is not None
            sandbox.process.stdin.write(json.dumps(job).encode("utf-8", "surrogateescape"))
            sandbox.process.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        _collect(sandbox.process, len(inputs), limits, run, on_outcome)
    finally:
        run.usage = sandbox.stop()
    short = run.killed_reason is None and len(run.outcomes) < len(inputs)
    if short and run.usage.get("oom_kills"):
        run.killed_reason = "memory limit"
    run.seconds = time.monotonic() - started
    return run


def _row(line: bytes, index: int) -> TestOutcome | str:
    """A validated outcome, or why the line is not one."""
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):
        return "garbled result stream"
    return parse_row(row, index)


def parse_row(row: Any, index: int) -> TestOutcome | str:
    """The outcome of test ``index`` from one decoded result row, or why the row is not one."""
    if not isinstance(row, dict) or row.get("i") != index:
        return "out-of-order result"
    status, out, error = row.get("status"), row.get("out", ""), row.get("error", "")
    if status not in _STATUSES or not isinstance(out, str) or not isinstance(error, str):
        return "malformed result row"
    return TestOutcome(index, status, out, error[:500])


def _collect(process, num_tests, limits, run, on_outcome) -> None:
    selector = selectors.DefaultSelector()
    out_fd, err_fd = process.stdout.fileno(), process.stderr.fileno()
    selector.register(out_fd, selectors.EVENT_READ)
    selector.register(err_fd, selectors.EVENT_READ)
    buffer, stderr = bytearray(), bytearray()
    # one row holds one test's output, JSON-escaped (at most 6x for \uXXXX): cap each line, so
    # a hostile stream cannot grow our memory while many honest tests still fit
    line_cap = limits.output_cap_bytes * 6 + 65536
    deadline = time.monotonic() + _STARTUP_GRACE_S + limits.timeout_s
    try:
        while len(run.outcomes) < num_tests:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                run.killed_reason = "wall-clock deadline"
                run.outcomes.append(TestOutcome(len(run.outcomes), "timeout", error="deadline"))
                return
            events = selector.select(timeout=remaining)
            for key, _ in events:
                chunk = os.read(key.fd, 1 << 20)
                if key.fd == err_fd:
                    if not chunk:
                        selector.unregister(err_fd)
                    stderr += chunk
                    del stderr[:-2048]
                    continue
                if not chunk:
                    return  # the sandbox exited (crash, limit, or done)
                buffer += chunk
                while (newline := buffer.find(b"\n")) >= 0:
                    line = bytes(buffer[:newline])
                    del buffer[: newline + 1]
                    outcome = _row(line, len(run.outcomes))
                    if isinstance(outcome, str):
                        run.killed_reason = outcome
                        return
                    run.outcomes.append(outcome)
                    deadline = time.monotonic() + limits.timeout_s + _DEADLINE_GRACE_S
                    if on_outcome is not None and not on_outcome(outcome):
                        run.stopped_early = True
                        return
                    if len(run.outcomes) >= num_tests:
                        return
                if len(buffer) > line_cap:
                    run.killed_reason = "result line over its cap"
                    return
    finally:
        selector.close()
        run.stderr_tail = stderr.decode("utf-8", "replace")


__all__ += ["SandboxUnavailable"]
