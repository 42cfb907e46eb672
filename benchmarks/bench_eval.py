"""Evaluation benchmark: math grading answers/s and sandbox test executions/s.

Run ``python benchmarks/bench_eval.py`` (about a minute on 2 cores). It prints a rich table and
writes it, with the command, the machine and its load, to ``docs/benchmarks/eval.md``:

(a) math grading on the 500 MATH-500 (gold, reference solution) pairs with
    :class:`MathGradingPool` (2 workers, 10 s deadline), every pair through math-verify
    (``exact_first=False``): a cold pass (gold parses not cached, workers already started) and a
    warm pass; answers/s of wall time and CPU ms per answer (worker CPU). Then the default path,
    where a last box literally equal to the gold is decided without sympy (all 500 here, since
    MATH-500's golds are those boxes). Target >= 300 answers/s on 2 cores.
(b) sandbox throughput for short programs: an A+B stdin program run against 10 tests per
    solution (one sandboxed process per solution, 2 solutions at a time), and against 1 test
    per solution (process start-up dominated); test executions/s. Target >= 30/s.
(c) the same through a :class:`SandboxPool` of 2 warm workers (the code training reward):
    solutions submitted as one batch, 10 tests and 1 test per solution, every test still in a
    fresh child of its worker; test executions/s of wall time and CPU ms per test (workers,
    their test children and the dispatcher). Target >= 1,000 test executions/s on 2 cores.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rollcli.eval.benchmarks import CodeTest, Problem
from rollcli.eval.benchmarks.math_sets import read_shipped_jsonl
from rollcli.eval.graders.code import grade_code, grade_code_batch
from rollcli.eval.graders.pool import MathGradingPool
from rollcli.eval.graders.sandbox import SandboxPool
from rollcli.store.atomic import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]


def _worker_cpu_s(pool: MathGradingPool) -> float:
    total = 0.0
    for worker in pool._workers:  # noqa: SLF001 - a benchmark may peek
        try:
            fields = Path(f"/proc/{worker.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError):
            pass
    return total


def bench_math(num_workers: int) -> list[tuple[str, str, str]]:
    rows = read_shipped_jsonl("math500.jsonl")
    pairs = [(r["answer"], r["solution"]) for r in rows]
    out = []
    with MathGradingPool(num_workers, deadline_s=10.0, exact_first=False) as pool:
        pool.grade([("1", "\\boxed{1}")] * num_workers)  # wait until every worker is ready
        for label in ("math-verify, cold", "math-verify, warm"):
            cpu0, parent0, t0 = _worker_cpu_s(pool), time.process_time(), time.perf_counter()
            results = pool.grade(pairs)
            wall = time.perf_counter() - t0
            cpu = _worker_cpu_s(pool) - cpu0 + time.process_time() - parent0
            correct = sum(r.correct for r in results)
            out.append(
                (
                    f"math grading, MATH-500 gold vs solution ({label}), {num_workers} workers",
                    f"{len(pairs) / wall:.0f} answers/s",
                    f"{correct}/500 correct, {1000 * cpu / len(pairs):.2f} ms CPU/answer "
                    f"(workers + parent; {2 * len(pairs) / cpu:.0f} answers/s on 2 idle cores), "
                    f"{pool.num_killed} killed, {wall:.2f} s",
                )
            )
    with MathGradingPool(num_workers, deadline_s=10.0) as pool:
        t0 = time.perf_counter()
        results = pool.grade(pairs)
        wall = time.perf_counter() - t0
        exact = sum(r.method == "exact" for r in results)
        out.append(
            (
                f"math grading, MATH-500 gold vs solution (default: exact match first), "
                f"{num_workers} workers",
                f"{len(pairs) / wall:.0f} answers/s",
                f"{sum(r.correct for r in results)}/500 correct, {exact} decided by exact match "
                f"(the golds are these boxes), {wall:.3f} s incl. worker start",
            )
        )
    return out


def bench_sandbox(num_tests: int, num_solutions: int, threads: int) -> tuple[str, str, str]:
    tests = tuple(CodeTest(f"{i} {2 * i}\n", f"{3 * i}\n", "stdin") for i in range(num_tests))
    problem = Problem("bench/ab", "A+B", "code", tests=tests)
    response = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    t0, c0 = time.perf_counter(), os.times()
    with ThreadPoolExecutor(threads) as executor:
        results = list(executor.map(lambda _: grade_code(problem, response), range(num_solutions)))
    wall, c1 = time.perf_counter() - t0, os.times()
    cpu = sum(c1[:4]) - sum(c0[:4])  # parent + reaped sandboxes
    assert all(r.correct for r in results), results[0]
    executions = num_tests * num_solutions
    return (
        f"sandbox, A+B, {num_tests} test(s)/solution, {threads} at a time",
        f"{executions / wall:.0f} tests/s",
        f"{num_solutions / wall:.1f} solutions/s, {executions} executions in {wall:.2f} s; "
        f"{1000 * cpu / num_solutions:.0f} ms CPU/solution ({2 * executions / cpu:.0f} tests/s "
        "on 2 idle cores)",
    )


def bench_pool(num_tests: int, num_solutions: int, workers: int) -> tuple[str, str, str]:
    tests = tuple(CodeTest(f"{i} {2 * i}\n", f"{3 * i}\n", "stdin") for i in range(num_tests))
    problem = Problem("bench/ab", "A+B", "code", tests=tests)
    response = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    with SandboxPool(workers) as pool:
        grade_code_batch([(problem, response)] * (2 * workers), pool)  # start the workers
        warm_cpu, c0 = pool.cpu_s, os.times()
        t0 = time.perf_counter()
        results = grade_code_batch([(problem, response)] * num_solutions, pool)
        wall = time.perf_counter() - t0
        cpu = pool.cpu_s - warm_cpu + sum(os.times()[:2]) - sum(c0[:2])  # + the dispatcher
        killed = pool.num_replaced
    assert all(r.correct for r in results), results[0]
    executions = num_tests * num_solutions
    return (
        f"sandbox pool, A+B, {num_tests} test(s)/solution, {workers} warm workers",
        f"{executions / wall:.0f} tests/s",
        f"{num_solutions / wall:.0f} solutions/s, {executions} executions in {wall:.2f} s; "
        f"{1000 * cpu / executions:.2f} ms CPU/test ({2 * executions / cpu:.0f} tests/s on "
        f"2 idle cores), {killed} workers replaced",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--solutions", type=int, default=40)
    parser.add_argument("--pool-solutions", type=int, default=1000)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()
    rows = bench_math(args.workers)
    rows.append(bench_sandbox(10, args.solutions, 2))
    rows.append(bench_sandbox(1, args.solutions, 2))
    rows.append(bench_pool(10, args.pool_solutions, 2))
    rows.append(bench_pool(1, args.pool_solutions, 2))
    table = Table(title="rollcli eval benchmark")
    for column in ("what", "throughput", "detail"):
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    Console().print(table)
    if args.no_write:
        return
    lines = [
        "# Evaluation benchmark",
        "",
        f"Command: `{' '.join(['python', 'benchmarks/bench_eval.py', *sys.argv[1:]])}`  ",
        f"Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; "
        f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"load average at start {load[0]:.1f} (the 2 cores are shared).",
        "",
        "Targets: math grading >= 300 answers/s on 2 cores; sandbox >= 30 test executions/s "
        "with one sandbox per solution, >= 1,000/s through the warm pool (2 workers).",
        "",
        "| what | throughput | detail |",
        "|---|---|---|",
        *[f"| {a} | {b} | {c} |" for a, b, c in rows],
        "",
    ]
    atomic_write_text(ROOT / "docs" / "benchmarks" / "eval.md", "\n".join(lines))


if __name__ == "__main__":
    main()
