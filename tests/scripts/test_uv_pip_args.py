"""scripts/uv_pip_args.py: pip's index, find-links and constraint settings as uv arguments."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "uv_pip_args.py"
_spec = importlib.util.spec_from_file_location("uv_pip_args", SCRIPT)
uv_pip_args = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(uv_pip_args)

LISTING = """\
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/old-wheels'
:env:.default-timeout='180'
:env:.find-links='/opt/wheels'
"""


def test_every_value_becomes_an_argument_and_the_environment_wins():
    assert uv_pip_args.uv_args(uv_pip_args.pip_settings(LISTING)) == [
        *("--index-strategy", "unsafe-best-match"),
        *("--extra-index-url", "file:///opt/pypi/simple"),
        *("--extra-index-url", "file:///opt/pypi-more/simple"),
        *("--find-links", "/opt/wheels"),
        *("--constraint", "/etc/xdg/pip/constraints.txt"),
    ]


def test_no_pip_config_leaves_only_the_index_strategy():
    assert uv_pip_args.uv_args(uv_pip_args.pip_settings("global.cert='/x'\n")) == [
        *("--index-strategy", "unsafe-best-match"),
    ]


def test_the_script_reads_this_pip_and_uv_accepts_its_arguments(tmp_path):
    env_file = tmp_path / "pip.conf"
    env_file.write_text("[global]\nfind-links = /opt/a-wheel-folder\n")
    out = subprocess.run(
        [sys.executable, str(SCRIPT)],
        capture_output=True,
        text=True,
        check=True,
        env={"PIP_CONFIG_FILE": str(env_file), "PATH": "/usr/bin:/bin"},
    ).stdout.splitlines()
    assert out[:2] == ["--index-strategy", "unsafe-best-match"]
    assert out[out.index("--find-links") + 1] == "/opt/a-wheel-folder"
    # uv accepts them (a dry run of an installed package, offline: nothing changes)
    dry_run = ["--dry-run", "--offline", "--no-deps", "--python", sys.executable]
    check = subprocess.run(
        [sys.executable, "-m", "uv", "pip", "install", *dry_run, *out, "pip"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0 and "Would make no changes" in check.stderr, check.stderr
