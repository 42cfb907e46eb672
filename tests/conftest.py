"""Shared test helpers: run ``rollcli.cli.app.main`` in-process with captured output (real error lines and exit codes)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str
    output: str


def invoke(args: Sequence[str], env: Mapping[str, str] | None = None) -> CliResult:
    """``rollcli ARGS`` through the real console entry point (error lines and exit codes)."""
    from rollcli.cli.app import main

    runner = CliRunner()
    with runner.isolation(env={"COLUMNS": "120", **(env or {})}) as (out, err, mixed):
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
        return CliResult(
            code,
            out.getvalue().decode(),
            err.getvalue().decode(),
            mixed.getvalue().decode(),
        )


@pytest.fixture
def cli() -> Callable[..., CliResult]:
    return invoke


# The local test clusters run every "node" on this machine, so pytest's run folders under /tmp
# are visible to all of them; real clusters get the refusal (rollcli.launch.shared_fs).
os.environ.setdefault("ROLLCLI_ALLOW_NODE_LOCAL_RUN_DIR", "1")

# Ray starts its workers at nice 15 (its `worker_niceness`), so beside the suite's other tests
# (nice 0) the workers that do a verl job's work (task runner, FSDP, rollout, reward) got a
# fraction of a core and a verl test took twice as long on a 2-core CI box (docs/LOG.md, "CI in
# two phases"). Every Ray cluster a test starts (in-process, through `rollcli run`, or
# in a Slurm job, which inherits the environment) runs its workers at the suite's priority.
os.environ.setdefault("RAY_worker_niceness", "0")


# pytest-xdist (scripts/test.sh runs `-n 2 --dist loadgroup`) gives each group to one worker:
# tests that share a cluster's state run one at a time on it, and the tests of an expensive
# module- or session-scoped fixture share one worker, so the fixture is built once. Groups are
# keyed by node-id prefix because xdist's controller sees only node ids (and xdist 3.8's own
# `xdist_group` marks do not reach it under pytest 9.2: it renames `item._nodeid`, which pytest
# 9.2 no longer reads). The collection check below keeps the table honest.
XDIST_GROUPS = {
    "tests/launch/test_slurm.py": "slurm-1node",
    "tests/launch/test_slurm_cli.py": "slurm-1node",
    "tests/launch/test_ray_bootstrap.py": "slurm-1node",
    "tests/sweep/test_sweep_run.py": "slurm-1node",
    "tests/launch/test_multinode.py": "slurm-2node",
    "tests/launch/test_slurm_local_2node.py": "slurm-2node",  # stops and restarts the cluster
    "tests/backends/verl/test_verl_multinode.py": "slurm-2node",
    # session fixture smollm2_engine: dequantising SmolLM2-135M takes ~50 s
    "tests/eval/test_humaneval.py::test_smollm2": "smollm2",
    "tests/eval/test_runner.py::test_smollm2": "smollm2",
    # module fixtures: a venv with the wheel, a venv with the plug-in, an uninterrupted
    # reference run, one Ray cluster
    "tests/packaging/test_wheel.py": "wheel",
    "tests/allocators/test_plugin_venv.py": "plugin-venv",
    "tests/launch/test_local_resume.py": "local-resume",
    # test_verl_cpu's 4 tests share one Ray cluster (a module fixture); the vLLM modules stay on
    # one worker, as before: never two vLLM clusters at once
    "tests/backends/verl/test_verl_cpu.py": "verl-cpu-ray",
    "tests/backends/verl/test_verl_vllm_cpu.py": "vllm",
    "tests/backends/verl/test_verl_vllm_grpo.py": "vllm",
}


# The tests that run verl's trainer end to end on one node (each trainer run ~100-140 CPU-s,
# most of it start-up: Ray, and six actor processes that each import verl): scripts/test.sh's
# second run, on 2 xdist workers beside each other only. Two at once took ~155 s each against
# ~102 s alone (docs/LOG.md 2026-12-07, "CI time"); three verl jobs at once, or one beside the
# rest of the suite, ran out of Ray's fixed 30 s node start (a local start now starts again).
VERL_E2E_MODULES = (
    "tests/backends/verl/test_verl_cpu.py",
    "tests/backends/verl/test_verl_experiments.py",
    "tests/backends/verl/test_verl_peers_subset.py",
    "tests/backends/verl/test_verl_peers_budget.py",
    "tests/backends/verl/test_verl_issue29_peers.py",
    "tests/backends/verl/test_verl_issue29_field.py",
    "tests/backends/verl/test_verl_vllm_cpu.py",
    "tests/backends/verl/test_verl_vllm_grpo.py",
)
# Two-node Ray clusters inside Slurm jobs: the third run, alone on the machine. Beside the other
# xdist worker, node 1's `ray start --head` and node 2's ran out of Ray's 30 s (two CI rehearsals
# on 2026-12-07); a head cannot safely start again (a worker may be joining the dead one).
TWO_NODE_MODULES = (
    "tests/backends/verl/test_verl_multinode.py",
    "tests/launch/test_multinode.py",
)
TIERS = ("all", "main", "verl", "two-node")


def tier_of(nodeid: str) -> str:
    """Which run of scripts/test.sh holds the test ``nodeid`` (``--tier``)."""
    if nodeid.startswith(TWO_NODE_MODULES):
        return "two-node"
    return "verl" if nodeid.startswith(VERL_E2E_MODULES) else "main"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        choices=TIERS,
        default="all",
        help="run one of scripts/test.sh's three runs: the verl end-to-end tests "
        "(VERL_E2E_MODULES: verl), the two-node tests (TWO_NODE_MODULES: two-node), or the "
        "rest (main); all (the default) runs everything",
    )
    parser.addoption(
        "--verl-matrix",
        action="store_true",
        help="also run every allocator of the verl end-to-end matrix (tests marked verl_matrix: "
        "one trainer run each), not only the ones that cover each ask shape",
    )


def xdist_group_of(nodeid: str) -> str | None:
    """The group of the test ``nodeid`` (longest matching prefix), or None: any worker."""
    matches = [prefix for prefix in XDIST_GROUPS if nodeid.startswith(prefix)]
    return XDIST_GROUPS[max(matches, key=len)] if matches else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A Slurm test or a SmolLM2 test outside its group would share its cluster or rebuild
    the model on a second worker: refuse to run, naming it and the table to add it to."""
    tier = config.getoption("--tier")
    if tier != "all":
        keep, dropped = [], []
        for item in items:
            (keep if tier_of(item.nodeid) == tier else dropped).append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep
    if not config.getoption("--verl-matrix"):
        skip = pytest.mark.skip(reason="the rest of the verl allocator matrix: --verl-matrix")
        for item in items:
            if item.get_closest_marker("verl_matrix"):
                item.add_marker(skip)
    for item in items:
        group = xdist_group_of(item.nodeid)
        if item.get_closest_marker("slurm") and not (group or "").startswith("slurm-"):
            raise pytest.UsageError(f"{item.nodeid}: a Slurm test; add it to XDIST_GROUPS")
        if "smollm2_engine" in item.fixturenames and group != "smollm2":
            raise pytest.UsageError(f"{item.nodeid}: uses smollm2_engine; add it to XDIST_GROUPS")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadgroup`` schedules by XDIST_GROUPS (xdist's load scheduling otherwise)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid) or nodeid

    return GroupScheduling(config, log)
