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


# pytest-xdist (scripts/test.sh runs `-n 3 --dist loadgroup`) gives each group to one worker:
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
    # the verl-on-CPU end-to-end tests, one at a time: Ray gives a node 30 s (hard-coded) to
    # register, and three verl jobs starting at once on 2 cores missed it in a clean-clone CI
    # run (docs/LOG.md, "lead: six branches merged"); test_verl_cpu's 4 tests share one Ray
    # cluster; the vLLM modules' Pilot-Commit and VIGOR share one, never two vLLM clusters at once
    "tests/backends/verl/test_verl_cpu.py": "verl-e2e",
    "tests/backends/verl/test_verl_experiments.py": "verl-e2e",
    "tests/backends/verl/test_verl_peers_subset.py": "verl-e2e",
    "tests/backends/verl/test_verl_peers_budget.py": "verl-e2e",
    "tests/backends/verl/test_verl_issue29_peers.py": "verl-e2e",
    "tests/backends/verl/test_verl_issue29_field.py": "verl-e2e",
    "tests/backends/verl/test_verl_vllm_cpu.py": "verl-e2e",
    "tests/backends/verl/test_verl_vllm_grpo.py": "verl-e2e",
}


# The tests that run verl's trainer end to end (each ~100 CPU-s, ~85-90 % of it start-up: Ray,
# task runner, FSDP, agent-loop and reward workers). scripts/test.sh runs the rest on xdist
# workers (`--verl-e2e exclude`), then these serially on the idle machine (`--verl-e2e only`).
VERL_E2E_MODULES = tuple(p for p, g in XDIST_GROUPS.items() if g == "verl-e2e") + (
    "tests/backends/verl/test_verl_multinode.py",
    # two-node Ray clusters inside Slurm jobs: beside the other xdist worker, node 1's `ray start
    # --head` and node 2's ran out of Ray's fixed 30 s to register (two CI rehearsals on
    # 2026-12-07, docs/LOG.md); on the idle machine of the second run they have the cores
    "tests/launch/test_multinode.py",
)


def is_verl_e2e(nodeid: str) -> bool:
    """A test that runs verl's trainer end to end (the second phase of scripts/test.sh)."""
    return nodeid.startswith(VERL_E2E_MODULES)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--verl-e2e",
        choices=("include", "exclude", "only"),
        default="include",
        help="the verl end-to-end tests (VERL_E2E_MODULES): run them with the rest (include), "
        "leave them out (exclude) or run only them (only)",
    )


def xdist_group_of(nodeid: str) -> str | None:
    """The group of the test ``nodeid`` (longest matching prefix), or None: any worker."""
    matches = [prefix for prefix in XDIST_GROUPS if nodeid.startswith(prefix)]
    return XDIST_GROUPS[max(matches, key=len)] if matches else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A Slurm test or a SmolLM2 test outside its group would share its cluster or rebuild
    the model on a second worker: refuse to run, naming it and the table to add it to."""
    split = config.getoption("--verl-e2e")
    if split != "include":
        keep, dropped = [], []
        for item in items:
            (keep if is_verl_e2e(item.nodeid) == (split == "only") else dropped).append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep
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
