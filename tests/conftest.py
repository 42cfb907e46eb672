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
