"""The light core: ``pip install rollcli`` without extras runs the sim backend and the reports.

A fresh venv (``python -m venv``) gets this checkout's package without any extra, installed from
PyPI by uv (pip when uv is absent; both resolve pyproject.toml's ``dependencies`` only). Then, from
an empty folder: torch, wandb, math-verify and sympy do not import there; ``rollcli run
experiments/sim-allocators.yaml`` (shortened by overrides: 6 steps, 2 seeds; every allocator of
the spec, its eval and its report job) ends with the speedup table; ``rollcli report`` on the run
writes the tables, report.json and the PDF figures; a tiny spec fails validation in one line that
names the `tiny` extra. About 1-2 minutes here (the install ~30 s, network-bound).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.network, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
ALLOCATORS = ("grpo", "dapo", "pc", "vigor", "oracle")  # experiments/sim-allocators.yaml's
# a light venv is ~0.3 GB (numpy, scipy, matplotlib); torch alone would add more than this
MAX_LIGHT_MB = 600


def _pypi_answers() -> bool:
    try:
        with urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=10):
            return True
    except OSError:
        return False


def _run(cmd: list[str], cwd: Path, env: dict[str, str], ok: bool = True):
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if ok:
        assert proc.returncode == 0, f"{cmd} -> {proc.returncode}\n{proc.stdout}{proc.stderr}"
    return proc


def _size_mb(path: Path) -> float:
    return (
        sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 2**20
    )


@pytest.fixture(scope="module")
def light(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh venv with rollcli installed without extras; (its bin folder, the environment)."""
    if not _pypi_answers():
        pytest.skip("pypi.org does not answer: the light core's install was not checked")
    root = tmp_path_factory.mktemp("light")
    src = root / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    shutil.copytree(REPO / "rollcli", src / "rollcli", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "ROLLCLI_TEMPLATES")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], root, env)
    python = str(venv / "bin" / "python")
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv:
        # uv's own cache: the venv is fresh either way, the wheels need not be downloaded again
        install = [uv, "pip", "install", "--python", python, str(src)]
    else:
        install = [sys.executable, "-m", "pip", "--isolated", "--python", python, "install",
                   str(src)]  # fmt: skip
    _run(install, root, env)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    print(f"light-core venv: {_size_mb(venv):.0f} MB")
    return venv / "bin", env


def test_no_heavy_package_is_installed(light, tmp_path):
    bin_dir, env = light
    for module in ("torch", "wandb", "math_verify", "sympy", "safetensors"):
        proc = _run([str(bin_dir / "python"), "-c", f"import {module}"], tmp_path, env, ok=False)
        assert proc.returncode == 1 and "ModuleNotFoundError" in proc.stderr, module
    code = "import rollcli; print(rollcli.__file__)"
    out = _run([str(bin_dir / "python"), "-c", code], tmp_path, env).stdout
    assert out.startswith(str(bin_dir.parent)), out  # the installed package, not this checkout
    assert _size_mb(bin_dir.parent) < MAX_LIGHT_MB


def test_the_sim_spec_runs_and_reports(light, tmp_path):
    bin_dir, env = light
    rollcli = str(bin_dir / "rollcli")
    spec = str(REPO / "experiments" / "sim-allocators.yaml")
    overrides = ["budget.steps=6", "seeds=[0,1]"]
    run = _run([rollcli, "run", spec, *overrides], tmp_path, env)
    assert "sim-allocators: rollouts to target" in run.stdout, run.stdout
    for name in ALLOCATORS:
        assert f"│ {name} " in run.stdout, name
    run_dir = tmp_path / "runs" / "sim-allocators"
    report = _run([rollcli, "report", str(run_dir)], tmp_path, env)
    assert "rollouts to target" in report.stdout
    folder = run_dir / "report"
    data = json.loads((folder / "report.json").read_text())
    assert data["order"] == list(ALLOCATORS) and set(data["allocators"]) == set(ALLOCATORS)
    for name in ("report.md", "report.tex", "report.csv", "accuracy.pdf", "accuracy.png"):
        assert (folder / name).stat().st_size > 0, name


def test_a_tiny_spec_names_the_tiny_extra(light, tmp_path):
    bin_dir, env = light
    spec = str(REPO / "experiments" / "quickstart.yaml")
    proc = _run([str(bin_dir / "rollcli"), "validate", spec], tmp_path, env, ok=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: {spec}: backend tiny needs the `tiny` extra: pip install 'rollcli[tiny]' "
        "(missing: torch, safetensors)"
    )
