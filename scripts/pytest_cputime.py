"""A pytest plugin: wall and CPU seconds of every test, so CI time can be judged on a loaded machine.

    PYTHONPATH=scripts:. python -m pytest -p pytest_cputime --cputime-json=times.jsonl ...

CPU is read from a cgroup v1 ``cpuacct.usage`` file when ROLLCLI_CPUACCT names one that holds
the pytest process (it then counts every descendant, Ray's workers and raylet included, and
nothing of other users' load); otherwise from ``getrusage`` of this process and its
waited-for children (Ray's workers, reparented when their raylet exits, are then missed).
Jobs that Slurm runs are counted by neither: slurmd starts them. Under xdist every worker
records its own tests; the cgroup figure then includes the other workers' concurrent CPU.
"""

from __future__ import annotations

import json
import os
import resource
import time

import pytest

_ROWS: list[dict] = []


def _cpu_s() -> float:
    path = os.environ.get("ROLLCLI_CPUACCT")
    if path:
        with open(path, encoding="ascii") as f:
            return int(f.read()) / 1e9
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cputime-json", default=None, help="append a JSON line of wall/CPU seconds per test"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    wall0, cpu0 = time.monotonic(), _cpu_s()
    yield
    row = {
        "test": item.nodeid,
        "wall_s": round(time.monotonic() - wall0, 2),
        "cpu_s": round(_cpu_s() - cpu0, 2),
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
    }
    _ROWS.append(row)
    out = item.config.getoption("--cputime-json")
    if out:  # a line per test as it ends, so a run stopped half-way keeps what it measured
        with open(out, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    rows = sorted(_ROWS, key=lambda r: -r["wall_s"])[:25]
    if not rows:
        return
    terminalreporter.section("wall and CPU seconds (slowest 25, setup+call+teardown)")
    for r in rows:
        terminalreporter.write_line(f"{r['wall_s']:8.1f} wall {r['cpu_s']:8.1f} cpu  {r['test']}")
