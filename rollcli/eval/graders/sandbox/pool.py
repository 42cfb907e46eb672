"""Warm sandboxed workers that run many solutions each: the code sandbox at training speed.

:func:`rollcli.eval.graders.sandbox.run_in_sandbox` builds a sandbox per solution (~50 ms of
namespaces, cgroups and interpreter start). A :class:`SandboxPool` keeps ``num_workers``
sandboxes alive instead, each a ``_runner.py serve`` process inside its own cgroups and
bubblewrap namespaces (:func:`.isolate.start_isolated`, the same set-up as one solution's), and
hands them solutions one job at a time. Inside, every test still runs in a fresh child with
the same rlimits, and between solutions the runner wipes what the last one left (files, IPC
objects, keys; its processes are killed after every test), so each solution is isolated and
limited as in a sandbox of its own while the start-up cost is paid once per worker.

The host side is one dispatcher thread: callers :meth:`SandboxPool.submit` jobs from any thread
and get a :class:`concurrent.futures.Future` of a :class:`SandboxRun`. The dispatcher

* queues at most two jobs per worker (one running, one waiting in its pipe), writes without
  blocking, and reads every worker's result stream with the checks of ``run_in_sandbox``
  (capped lines, rows in order, for the job in hand);
* calls the job's host-side ``check`` on each outcome as it arrives (the expected outputs never
  enter a sandbox) and, on a failure, resolves the job at once and tells the worker to skip
  its remaining tests;
* enforces two deadlines: a **per-test** one (the runner's own, plus a backstop here) and a
  **per-rollout** one (``rollout_timeout_s`` for a whole solution); a worker past either is
  killed with everything in it and replaced, its job resolved with what it had
  (``killed_reason``), and a job queued behind it moved to another worker;
* replaces workers that die (a solution that kills its runner, the OOM killer) or that still
  hold a process of a finished job (see :meth:`SandboxPool._survivor`), and gives up with
  :class:`SandboxUnavailable` on every pending job after repeated failed starts.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import selectors
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Literal

from rollcli.eval.graders.sandbox.isolate import (
    IsolatedProcess,
    SandboxUnavailable,
    start_isolated,
)
from rollcli.eval.graders.sandbox.run import (
    RUNNER_SOURCE,
    SandboxLimits,
    SandboxRun,
    TestOutcome,
    parse_row,
)

__all__ = ["SandboxJob", "SandboxPool"]

log = logging.getLogger(__name__)

_STARTUP_GRACE_S = 30.0  # namespaces + interpreter + preloads, on a badly loaded machine
_TEST_GRACE_S = 2.0  # the runner enforces each test's limit; this is the backstop past it
_MAX_START_FAILURES = 3
_QUEUE_DEPTH = 2  # jobs per worker: one running, one waiting in its pipe


@dataclass(frozen=True)
class SandboxJob:
    """One solution to run: its code, the test inputs, how to run them.

    ``mode``: ``stdin`` (print to stdout), ``functional`` (``Solution().<func_name>(*args)``,
    one JSON argument per input line) or ``assert`` (the program holds its own tests and
    passes by running to its end; HumanEval). ``timeout_s`` overrides the pool's per-test
    limit. ``check(outcome) -> bool`` runs in the host on every outcome (compare with the
    expected output there); with ``stop_on_failure`` the first test that fails it, or does
    not exit cleanly, ends the job.
    """

    code: str
    inputs: tuple[str, ...]
    mode: Literal["stdin", "functional", "assert"] = "stdin"
    func_name: str | None = None
    timeout_s: float | None = None
    stop_on_failure: bool = True
    check: Callable[[TestOutcome], bool] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.mode == "functional" and not self.func_name:
            raise ValueError("functional tests need func_name (the Solution method to call)")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s}")


@dataclass
class _Task:
    job_id: int
    job: SandboxJob
    future: Future
    run: SandboxRun = field(default_factory=SandboxRun)
    started: float | None = None  # when the worker began it (None: still waiting in the pipe)
    resolved: bool = False

    @property
    def timeout_s(self) -> float:
        return float(self.job.timeout_s)  # filled in by submit()


@dataclass
class _Worker:
    sandbox: IsolatedProcess
    spawned: float = field(default_factory=time.monotonic)
    ready: bool = False
    tasks: deque = field(default_factory=deque)
    inbox: bytearray = field(default_factory=bytearray)
    outbox: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    last_row: float = field(default_factory=time.monotonic)
    cpu_s: float = 0.0  # runner + test children, as the runner reports it

    @property
    def stdin_fd(self) -> int:
        return self.sandbox.process.stdin.fileno()

    @property
    def stdout_fd(self) -> int:
        return self.sandbox.process.stdout.fileno()

    @property
    def stderr_fd(self) -> int:
        return self.sandbox.process.stderr.fileno()


class SandboxPool:
    """``num_workers`` warm sandboxes running submitted solutions (see the module docstring).

    ``limits`` apply to every worker (memory, processes, tmpfs are per worker, i.e. per running
    solution; the per-test time limit may be overridden per job). ``rollout_timeout_s`` bounds
    one solution's whole run (None: only the per-test limits). Workers start on first use.
    Use as a context manager or call :meth:`close`; safe to submit from many threads.
    """

    def __init__(
        self,
        num_workers: int | None = None,
        limits: SandboxLimits = SandboxLimits(),
        *,
        rollout_timeout_s: float | None = None,
    ) -> None:
        if rollout_timeout_s is not None and not rollout_timeout_s > 0:
            raise ValueError(f"rollout_timeout_s must be > 0, got {rollout_timeout_s}")
        self.num_workers = num_workers or max(1, min(os.cpu_count() or 1, 8))
        self.limits = limits
        self.rollout_timeout_s = rollout_timeout_s
        self.num_deadline_kills = 0  # workers killed at a deadline (a hanging solution)
        self.num_replaced = 0  # workers replaced for any reason (deadline, death, garbage)
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._queue: deque[_Task] = deque()
        self._workers: list[_Worker] = []
        self._closed = False
        self._start_failures = 0
        self._unavailable: str | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._thread: threading.Thread | None = None
        self._selector: selectors.BaseSelector | None = None
        self._retired_cpu_s = 0.0
        self._pid = os.getpid()

    # -- public -----------------------------------------------------------------------------
    def submit(self, job: SandboxJob) -> Future:
        """Queue one solution; the future's result is its :class:`SandboxRun` (or the
        :class:`SandboxUnavailable` exception where no sandbox can be built here)."""
        if job.timeout_s is None:
            job = _with_timeout(job, self.limits.timeout_s)
        task = _Task(next(self._ids), job, Future())
        with self._lock:
            if self._closed:
                raise RuntimeError("the sandbox pool is closed")
            if self._unavailable is not None:
                task.future.set_exception(SandboxUnavailable(self._unavailable))
                return task.future
            self._queue.append(task)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="rollcli-sandbox-pool", daemon=True
                )
                self._thread.start()
        self._wake()
        return task.future

    def run(self, jobs: Sequence[SandboxJob]) -> list[SandboxRun]:
        """Run every job (in parallel over the workers); results in the jobs' order."""
        futures = [self.submit(job) for job in jobs]
        return [future.result() for future in futures]

    @property
    def cpu_s(self) -> float:
        """CPU seconds the workers reported (runners and their test processes) so far."""
        return sum(w.cpu_s for w in list(self._workers)) + self._retired_cpu_s

    def close(self) -> None:
        """Stop the dispatcher and every worker; pending jobs fail with RuntimeError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=60)
        for worker in self._workers:
            self._stop_worker(worker, "the pool was closed")
        self._workers = []
        with self._lock:
            pending, self._queue = list(self._queue), deque()
        for task in pending:
            _fail(task, RuntimeError("the sandbox pool was closed"))
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_pid", None) == os.getpid() and not getattr(self, "_closed", True):
            with contextlib.suppress(Exception):
                self.close()

    # -- the dispatcher thread --------------------------------------------------------------
    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"x")

    def _loop(self) -> None:
        self._selector = selector = selectors.DefaultSelector()
        selector.register(self._wake_r, selectors.EVENT_READ, None)
        try:
            while True:
                with self._lock:
                    if self._closed:
                        return
                self._fill()
                timeout = self._next_deadline()
                for key, _ in selector.select(timeout):
                    if key.data is None:
                        with contextlib.suppress(BlockingIOError):
                            os.read(self._wake_r, 4096)
                        continue
                    worker, stream = key.data
                    if worker not in self._workers:
                        continue
                    if stream == "in":
                        self._flush(worker)
                    elif stream == "out":
                        self._read(worker)
                    else:
                        self._read_stderr(worker)
                self._check_deadlines()
        except BaseException as error:  # noqa: BLE001 - never leave a caller waiting forever
            log.exception("sandbox pool dispatcher failed")
            with self._lock:
                self._closed = True
                pending, self._queue = list(self._queue), deque()
            for worker in self._workers:
                pending.extend(worker.tasks)
            for task in pending:
                _fail(task, RuntimeError(f"the sandbox pool failed: {error}"))
        finally:
            selector.close()

    def _fill(self) -> None:
        """Start missing workers and hand queued jobs to the least loaded ready ones."""
        with self._lock:
            if not self._queue and not any(w.tasks for w in self._workers):
                return
        while len(self._workers) < self.num_workers and self._unavailable is None:
            if not self._spawn():
                break
        for depth in range(_QUEUE_DEPTH):
            for worker in self._workers:
                if len(worker.tasks) != depth:
                    continue
                with self._lock:
                    if not self._queue:
                        return
                    task = self._queue.popleft()
                self._send(worker, task)

    def _spawn(self) -> bool:
        limits = self.limits
        try:
            sandbox = start_isolated(
                ["-c", RUNNER_SOURCE, "serve"],
                memory_bytes=limits.memory_mb << 20,
                max_procs=limits.num_procs,
                tmpfs_bytes=limits.tmpfs_mb << 20,
                allow_weak=limits.allow_weak,
            )
        except (SandboxUnavailable, OSError) as error:
            self._give_up(str(error))
            return False
        worker = _Worker(sandbox)
        for fd in (worker.stdin_fd, worker.stdout_fd, worker.stderr_fd):
            os.set_blocking(fd, False)
        self._selector.register(worker.stdout_fd, selectors.EVENT_READ, (worker, "out"))
        self._selector.register(worker.stderr_fd, selectors.EVENT_READ, (worker, "err"))
        self._workers.append(worker)
        shared = {  # the limits every job of this worker runs under (the runner's first line)
            "address_space": limits.memory_mb << 20,
            "fsize": limits.file_size_mb << 20,
            "nproc": limits.num_procs if sandbox.isolation["weak"] and sandbox.uid else 0,
            "pidns": sandbox.isolation["bwrap"],
        }
        self._queue_bytes(worker, json.dumps(shared).encode() + b"\n")
        return True

    def _give_up(self, reason: str) -> None:
        """No sandbox can be built: every pending and future job fails with the reason."""
        with self._lock:
            self._unavailable = reason
            pending, self._queue = list(self._queue), deque()
        for worker in self._workers:
            pending.extend(worker.tasks)
            worker.tasks.clear()
        for task in pending:
            _fail(task, SandboxUnavailable(reason))

    def _send(self, worker: _Worker, task: _Task) -> None:
        job = task.job
        message = {
            "id": task.job_id,
            "code": job.code,
            "inputs": list(job.inputs),
            "mode": job.mode,
            "func_name": job.func_name,
            "timeout_s": job.timeout_s,
            "output_cap": self.limits.output_cap_bytes,
            "stop_on_failure": job.stop_on_failure,
        }
        task.run = SandboxRun(isolation=worker.sandbox.isolation)
        if not worker.tasks and worker.ready:
            task.started = time.monotonic()
            worker.last_row = task.started
        worker.tasks.append(task)
        self._queue_bytes(worker, json.dumps(message).encode("utf-8", "surrogateescape") + b"\n")

    def _queue_bytes(self, worker: _Worker, data: bytes) -> None:
        worker.outbox += data
        self._flush(worker)

    def _flush(self, worker: _Worker) -> None:
        """Write what the worker's pipe takes now; watch it for the rest."""
        try:
            while worker.outbox:
                sent = os.write(worker.stdin_fd, worker.outbox[: 1 << 20])
                del worker.outbox[:sent]
        except BlockingIOError:
            pass
        except OSError:  # the worker is gone; its stdout's EOF will say so
            worker.outbox.clear()
        registered = worker.stdin_fd in self._selector.get_map()
        if worker.outbox and not registered:
            self._selector.register(worker.stdin_fd, selectors.EVENT_WRITE, (worker, "in"))
        elif not worker.outbox and registered:
            self._selector.unregister(worker.stdin_fd)

    def _read_stderr(self, worker: _Worker) -> None:
        try:
            chunk = os.read(worker.stderr_fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(worker.stderr_fd)
            return
        worker.stderr += chunk
        del worker.stderr[:-2048]

    def _read(self, worker: _Worker) -> None:
        try:
            chunk = os.read(worker.stdout_fd, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._replace(worker, "the sandbox exited (a limit, or the solution killed it)")
            return
        worker.inbox += chunk
        line_cap = self.limits.output_cap_bytes * 6 + 65536
        while (newline := worker.inbox.find(b"\n")) >= 0:
            line = bytes(worker.inbox[:newline])
            del worker.inbox[: newline + 1]
            problem = self._handle(worker, line)
            if problem is not None:
                self._replace(worker, problem)
                return
        if len(worker.inbox) > line_cap:
            self._replace(worker, "result line over its cap")

    def _handle(self, worker: _Worker, line: bytes) -> str | None:
        """Apply one row of the worker's stream; a reason string when the stream is broken."""
        now = time.monotonic()
        worker.last_row = now
        if not worker.ready:
            if line.strip() != b'{"ready": true}':
                return "garbled result stream"
            worker.ready = True
            self._start_failures = 0
            if worker.tasks:
                worker.tasks[0].started = now
            return None
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            return "garbled result stream"
        if not isinstance(row, dict) or not worker.tasks or row.get("j") != worker.tasks[0].job_id:
            return "out-of-order result"
        task = worker.tasks[0]
        if row.get("end") is True:
            cpu = row.get("cpu_s")
            if isinstance(cpu, (int, float)) and cpu >= worker.cpu_s:
                worker.cpu_s = float(cpu)
            worker.tasks.popleft()
            self._resolve(task)
            survivor = self._survivor(worker, row)
            if survivor is not None:  # the next job goes to a fresh worker
                for queued in worker.tasks:
                    queued.started = None
                return survivor
            if worker.tasks:
                worker.tasks[0].started = now
            return None
        outcome = parse_row(row, len(task.run.outcomes))
        if isinstance(outcome, str):
            return outcome
        if task.resolved:
            return None  # tests the runner ran before it read our stop
        task.run.outcomes.append(outcome)
        checked = _checked(task.job, outcome)  # called on every outcome: callers count them
        passed = outcome.status == "ok" and checked
        if len(task.run.outcomes) == len(task.job.inputs):
            self._resolve(task)  # the end row only frees the worker
        elif not passed and task.job.stop_on_failure:
            task.run.stopped_early = True
            self._resolve(task)
            self._queue_bytes(worker, b'{"stop": %d}\n' % task.job_id)
        return None

    def _survivor(self, worker: _Worker, end: dict) -> str | None:
        """Why the worker must not serve another job: a process of the last one is alive.

        The runner (the sandbox's pid 1) and its zygote are all a worker holds between jobs;
        the runner counts its pid namespace, and when no job is queued behind (nothing may be
        starting) the host counts the worker's cgroup too: bubblewrap, runner, zygote."""
        if not worker.sandbox.isolation.get("bwrap"):
            return None
        procs = end.get("procs")
        if not isinstance(procs, int) or procs > 2:
            return f"a process outlived its job ({procs} in the sandbox)"
        cgroup = worker.sandbox.cgroup
        if cgroup is not None and not worker.tasks:
            with contextlib.suppress(OSError):
                if len(found := cgroup.pids()) > 3:
                    return f"a process outlived its job ({len(found)} in its cgroup)"
        return None

    def _resolve(self, task: _Task) -> None:
        if task.resolved:
            return
        task.resolved = True
        if task.started is not None:
            task.run.seconds = time.monotonic() - task.started
        if not task.future.done():
            task.future.set_result(task.run)

    def _next_deadline(self) -> float:
        """Seconds until the nearest deadline (at most 1 s, so a close is noticed)."""
        now, nearest = time.monotonic(), 1.0
        for worker in self._workers:
            for when in self._deadlines(worker):
                nearest = min(nearest, max(0.0, when - now))
        return nearest

    def _deadlines(self, worker: _Worker) -> list[float]:
        if not worker.ready:
            return [worker.spawned + _STARTUP_GRACE_S]
        if not worker.tasks or worker.tasks[0].started is None:
            return []
        task = worker.tasks[0]
        out = [worker.last_row + task.timeout_s + _TEST_GRACE_S]
        if self.rollout_timeout_s is not None:
            out.append(task.started + self.rollout_timeout_s)
        return out

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for worker in list(self._workers):
            if not worker.ready and now > worker.spawned + _STARTUP_GRACE_S:
                self._replace(worker, "the sandbox did not start in time")
                continue
            if not worker.tasks or worker.tasks[0].started is None:
                continue
            task = worker.tasks[0]
            rollout = self.rollout_timeout_s
            if rollout is not None and now > task.started + rollout:
                reason = f"rollout deadline ({rollout:g} s)"
            elif now > worker.last_row + task.timeout_s + _TEST_GRACE_S:
                reason = "wall-clock deadline"
            else:
                continue
            self.num_deadline_kills += 1
            if not task.resolved:
                index = len(task.run.outcomes)
                task.run.outcomes.append(TestOutcome(index, "timeout", error="deadline"))
            self._replace(worker, reason, deadline=True)

    def _replace(self, worker: _Worker, reason: str, *, deadline: bool = False) -> None:
        """Kill the worker (and everything in it), resolve its running job with ``reason``,
        requeue the job waiting behind it, and let :meth:`_fill` start a replacement."""
        if worker not in self._workers:
            return
        self._workers.remove(worker)
        self.num_replaced += 1
        for fd in (worker.stdin_fd, worker.stdout_fd, worker.stderr_fd):
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(fd)
        if not worker.ready:
            self._start_failures += 1
        usage = self._stop_worker(worker, reason)
        tasks = list(worker.tasks)
        worker.tasks.clear()
        if tasks and tasks[0].started is not None:
            running = tasks.pop(0)
            if not running.resolved:
                running.run.killed_reason = reason
                running.run.usage = usage
                running.run.stderr_tail = worker.stderr.decode("utf-8", "replace")
                if usage.get("oom_kills") and not deadline:
                    running.run.killed_reason = "memory limit"
            self._resolve(running)
        with self._lock:  # not started yet: they go to another worker
            self._queue.extendleft(reversed([t for t in tasks if not t.resolved]))
        if self._start_failures >= _MAX_START_FAILURES and self._unavailable is None:
            tail = worker.stderr.decode("utf-8", "replace").strip()
            self._give_up(f"sandbox workers fail to start ({reason}): {tail[-300:]}")

    def _stop_worker(self, worker: _Worker, reason: str) -> dict[str, int]:
        self._retired_cpu_s += worker.cpu_s
        worker.cpu_s = 0.0
        try:
            return worker.sandbox.stop()
        except Exception:  # noqa: BLE001 - a failed teardown must not stop the others
            log.exception("stopping a sandbox worker (%s) failed", reason)
            return {}


def _checked(job: SandboxJob, outcome: TestOutcome) -> bool:
    """The job's host-side check of one outcome (a check that raises counts as a failure)."""
    if job.check is None:
        return True
    try:
        return bool(job.check(outcome))
    except Exception:  # noqa: BLE001 - a caller's bug must not stop the dispatcher
        log.exception("a sandbox job's check raised")
        return False


def _with_timeout(job: SandboxJob, timeout_s: float) -> SandboxJob:
    from dataclasses import replace

    return replace(job, timeout_s=timeout_s)


def _fail(task: _Task, error: BaseException) -> None:
    task.resolved = True
    if not task.future.done():
        task.future.set_exception(error)
