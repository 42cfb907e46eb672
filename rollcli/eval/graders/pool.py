"""A process pool for math grading that kills a stuck worker at a per-answer deadline.

``concurrent.futures.ProcessPoolExecutor`` cannot cancel a running task: one pathological
answer would pin a worker forever. This small pool owns its workers directly. Each worker is a
plain ``python -m rollcli.eval.graders._math_worker`` subprocess joined to the parent by a socket pair
(no multiprocessing main-module re-import, no forking of the parent's threads). The parent hands
one (gold, response) pair to an idle worker (pairs whose last box is literally the gold are
decided in the parent without sympy, see :func:`exact_match`), waits on all sockets with the nearest deadline as
timeout, and SIGKILLs a worker whose task passes its deadline: that answer keeps the verdict of
the string fallback, which the worker computes and sends first (``method="timeout"``; a worker
killed before even that gives a wrong verdict with no extracted answer), and a replacement worker
starts (~0.3 s to import math-verify). The parent itself grades nothing but literal matches, so
its loop over every worker's deadline never stalls on one answer: a call returns within the
deadline (plus the kill) whatever the input. Responses longer than ``MAX_RESPONSE_CHARS`` are
graded on their tail (the last box is what counts).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path

from rollcli.eval.graders.math import MathResult, exact_match

__all__ = ["MathGradingPool", "GradingPoolError", "MAX_RESPONSE_CHARS"]

MAX_RESPONSE_CHARS = 100_000  # ~25k tokens: far past any max_response_len in use
# larger tasks go to idle workers only, so a send never blocks on a busy worker's full socket
_PIPELINE_MAX_CHARS = 16_384

_MAX_STARTUP_FAILURES = 3
_STARTUP_TIMEOUT_S = 120.0  # import + warm-up on a badly overloaded machine


class GradingPoolError(RuntimeError):
    """Workers cannot start (broken environment): raised instead of respawning forever."""


_PIPELINE_DEPTH = 2  # tasks queued per worker, so it never idles waiting for the parent


@dataclass
class _Worker:
    process: subprocess.Popen
    conn: Connection
    ready: bool = False
    tasks: deque = field(default_factory=deque)
    started: float = 0.0  # when the head task started (sent to an idle worker, or previous done)
    spawned: float = field(default_factory=time.monotonic)
    provisional: dict = field(default_factory=dict)  # task -> the fallback's (correct, extracted)

    @property
    def task(self) -> int | None:
        return self.tasks[0] if self.tasks else None


class MathGradingPool:
    """Grade (gold, response) pairs with math-verify in ``num_workers`` killable processes.

    ``deadline_s`` bounds the time of one answer: a call to :meth:`grade` never waits on one
    answer longer than that. ``exact_first=False`` sends every pair to math-verify (benchmarks). Use as a context manager (or call :meth:`close`).
    """

    def __init__(
        self, num_workers: int | None = None, deadline_s: float = 5.0, *, exact_first: bool = True
    ) -> None:
        if deadline_s <= 0:
            raise ValueError(f"deadline_s must be > 0, got {deadline_s}")
        self.num_workers = num_workers or max(1, min(os.cpu_count() or 1, 8))
        self.deadline_s = deadline_s
        self.exact_first = exact_first
        self.num_killed = 0
        self._startup_failures = 0
        self._workers: list[_Worker] = [self._spawn() for _ in range(self.num_workers)]

    def _spawn(self) -> _Worker:
        parent_sock, child_sock = socket.socketpair()
        root = str(Path(__file__).resolve().parents[3])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        process = subprocess.Popen(
            [sys.executable, "-m", "rollcli.eval.graders._math_worker", str(child_sock.fileno())],
            pass_fds=(child_sock.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=env,
        )
        child_sock.close()
        conn = Connection(parent_sock.detach())
        return _Worker(process, conn)

    def _kill(self, worker: _Worker) -> None:
        if worker.process.poll() is None:
            worker.process.kill()
        worker.process.wait(timeout=10)
        worker.conn.close()

    def _replace(self, index: int) -> None:
        self._kill(self._workers[index])
        self._workers[index] = self._spawn()

    def grade(self, pairs: Sequence[tuple[str, str]]) -> list[MathResult]:
        """Results in the order of ``pairs``; a pair past its deadline falls back to strings."""
        pairs = [(gold, response[-MAX_RESPONSE_CHARS:]) for gold, response in pairs]
        results: list[MathResult | None] = [
            exact_match(*pair) if self.exact_first else None for pair in pairs
        ]
        queue = deque(i for i, result in enumerate(results) if result is None)
        while queue or any(w.task is not None for w in self._workers):
            self._dispatch(pairs, queue)
            now = time.monotonic()
            busy = [w.started + self.deadline_s for w in self._workers if w.task is not None]
            timeout = max(0.0, min(busy) - now) if busy else 1.0
            ready_conns = wait([w.conn for w in self._workers], timeout=timeout)
            for index, worker in enumerate(list(self._workers)):
                if worker.conn in ready_conns:
                    self._receive(index, worker, pairs, results, queue)
            now = time.monotonic()
            for index, worker in enumerate(self._workers):
                if not worker.ready and now - worker.spawned > _STARTUP_TIMEOUT_S:
                    self._startup_failed()
                    self._replace(index)
                if worker.task is not None and now - worker.started > self.deadline_s:
                    task = worker.tasks.popleft()
                    results[task] = self._provisional(worker, task, "timeout")
                    self.num_killed += 1
                    queue.extendleft(reversed(worker.tasks))  # queued behind it: not started
                    self._replace(index)
        return [r for r in results if r is not None]

    def _dispatch(self, pairs: Sequence[tuple[str, str]], queue: deque) -> None:
        # idle workers first, one task each, then the pipeline: two stuck answers run (and are
        # killed) side by side instead of queueing behind each other
        now = time.monotonic()
        for depth in range(_PIPELINE_DEPTH):
            for worker in self._workers:
                if not queue:
                    return
                if not worker.ready or len(worker.tasks) != depth:
                    continue
                task = queue[0]
                if depth and sum(map(len, pairs[task])) > _PIPELINE_MAX_CHARS:
                    continue
                queue.popleft()
                worker.conn.send((task, *pairs[task]))
                if not worker.tasks:
                    worker.started = now
                worker.tasks.append(task)

    def _receive(self, index, worker, pairs, results, queue) -> None:
        try:
            message = worker.conn.recv()
        except (EOFError, OSError):
            # the worker died (OOM killer, crash, or it could not start)
            if not worker.ready:
                self._startup_failed()
            if worker.tasks:
                task = worker.tasks.popleft()
                results[task] = self._provisional(worker, task, "error")
                queue.extendleft(reversed(worker.tasks))
            self._replace(index)
            return
        if message[0] == "ready":
            worker.ready = True
            self._startup_failures = 0
            return
        if message[0] == "fallback":
            worker.provisional[message[1]] = message[2:]
            return
        task, correct, extracted, method = message
        if task == worker.task:
            results[task] = MathResult(correct, extracted, method)
            worker.tasks.popleft()
            worker.provisional.pop(task, None)
            worker.started = time.monotonic()

    @staticmethod
    def _provisional(worker: _Worker, task: int, method: str) -> MathResult:
        """The fallback verdict the worker sent before it died or was killed (else wrong)."""
        correct, extracted = worker.provisional.pop(task, (False, None))
        return MathResult(bool(correct), extracted, method)  # type: ignore[arg-type]

    def _startup_failed(self) -> None:
        self._startup_failures += 1
        if self._startup_failures >= _MAX_STARTUP_FAILURES:
            self.close()
            raise GradingPoolError(
                "math grading workers fail to start; run "
                "`python -m rollcli.eval.graders._math_worker 0` to see why"
            )

    def close(self) -> None:
        """Stop every worker (politely, then SIGKILL after a second)."""
        for worker in self._workers:
            with contextlib.suppress(OSError, ValueError):
                worker.conn.send(None)
        for worker in self._workers:
            try:
                worker.process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait(timeout=10)
            worker.conn.close()
        self._workers = []

    def __enter__(self) -> MathGradingPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_workers", None):
            self.close()
