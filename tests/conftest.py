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


# pytest-xdist (scripts/test.sh runs `-n 3 --dist loadgroup`) gives each group to one worker.
# Tests that share a cluster's state run one at a time on it (a module's explicit xdist_group
# wins: the two-node tests use "slurm-2node"); tests of an expensive module- or session-scoped
# fixture share one worker, so the fixture is built once.
SHARED_FIXTURES = {
    "smollm2_engine": "smollm2",  # session: dequantising SmolLM2-135M takes ~50 s
    "installed": "wheel",  # tests/packaging/test_wheel.py: a venv with the built wheel
    "venv": "plugin-venv",  # tests/allocators/test_plugin_venv.py
    "reference": "local-resume",  # tests/launch/test_local_resume.py: an uninterrupted run
    "ray_cluster": "verl-cpu-ray",  # tests/backends/verl/test_verl_cpu.py: one Ray cluster
}


def xdist_group_of(item: pytest.Item) -> str | None:
    """The pytest-xdist group ``item`` belongs to, or None when it may run anywhere."""
    if item.get_closest_marker("slurm"):
        return "slurm-1node"
    for fixture, group in SHARED_FIXTURES.items():
        if fixture in item.fixturenames:
            return group
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = None if item.get_closest_marker("xdist_group") else xdist_group_of(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
