"""docs/allocators.md "Write your own allocator": its code runs as written.

The section's fenced blocks are written to a temporary folder under the file names their first
lines give (``# skip_solved.py``, ...); pytest then runs the example's own test file in a
subprocess (the contract suite by config and by factory, and its exact test), and the entry
point block must name the example's class under its kind.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import tomllib

import rollcli

DOC = Path(__file__).resolve().parents[2] / "docs" / "allocators.md"
ROLLCLI_ROOT = Path(rollcli.__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.M | re.S)


def section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def code_files(text: str) -> dict[str, tuple[str, str]]:
    """File name -> (language, code) for every fenced block whose first line is ``# <name>``."""
    files = {}
    for language, code in FENCE.findall(text):
        first = code.splitlines()[0]
        if re.fullmatch(r"# [\w.]+\.(py|toml)", first):
            files[first[2:]] = (language, code)
    return files


def test_write_your_own_allocator_runs(tmp_path: Path) -> None:
    files = code_files(section(DOC.read_text(), "Write your own allocator"))
    assert sorted(files) == ["pyproject.toml", "skip_solved.py", "test_skip_solved.py"]
    for name, (_, code) in files.items():
        (tmp_path / name).write_text(code)

    entry_points = tomllib.loads(files["pyproject.toml"][1])["project"]["entry-points"]
    assert entry_points == {
        "rollcli.allocators": {"skip_solved": "skip_solved:SkipSolvedAllocator"}
    }
    code = files["skip_solved.py"][1]
    # the helpers, not hand-written copies of them (issue 28)
    assert "class SkipSolvedAllocator(KeptGroups, BaseAllocator):" in code
    assert "self.prompts_per_step(config.n" in code
    assert "def _train_groups" not in code and "rollouts_per_step %" not in code

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROLLCLI_ROOT)])}
    # `rollcli init --list` describes the kind by its module docstring's first line (the doc says)
    listing = subprocess.run(
        [sys.executable, "-c", "import skip_solved\nfrom rollcli.cli.spec import "
         "allocator_kinds_listing\nprint('\\n'.join(allocator_kinds_listing(200)))"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    first_line = code.splitlines()[1].strip('"').rstrip(".")
    assert re.search(rf"^skip_solved +{re.escape(first_line)}\.?$", listing.stdout, re.M), (
        listing.stdout + listing.stderr
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_skip_solved.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # 3 contract tests x 2 cases, and the exact test
    assert result.returncode == 0 and re.search(r"\b7 passed\b", result.stdout), (
        result.stdout + result.stderr
    )
