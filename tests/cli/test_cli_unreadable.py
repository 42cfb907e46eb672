"""An unreadable spec, sweep file or run folder is one ``error:`` line naming it, not click's
five-line usage box (issue 26). As root the file is made unreadable by running the CLI without
the capabilities that bypass file permissions."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SPEC = "name: b\nbackend: {kind: sim}\nbudget: {steps: 2, rollouts_per_step: 64}\n"
CLI = "import sys\nfrom rollcli.cli.app import main\nsys.argv[0] = 'rollcli'\nmain()\n"


def _as_unprivileged() -> list[str]:
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("root without setpriv: permissions cannot be made to count")
    drop = "-dac_override,-dac_read_search"
    return ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}"]


@pytest.mark.parametrize("command", ["validate", "plan", "run", "sweep", "report", "status"])
def test_an_unreadable_path_is_one_line(command: str, tmp_path: Path) -> None:
    target = tmp_path / ("run" if command in ("report", "status") else "spec.yaml")
    if command in ("report", "status"):
        target.mkdir()
    else:
        target.write_text(SPEC)
    target.chmod(0)
    try:
        done = subprocess.run(
            [*_as_unprivileged(), sys.executable, "-c", CLI, command, str(target)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
    finally:
        target.chmod(0o700)
    lines = done.stderr.strip().splitlines()
    assert done.returncode in (1, 2), done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert str(target) in lines[0] and "Permission denied" in lines[0], lines[0]
