"""What a user installs works: build the wheel, install it (not editable) into a fresh venv, use it.

The wheel is built from a copy of the source tree (so the build leaves nothing in the checkout)
without build isolation or an index, and installed with ``--no-deps`` into a new venv whose only
link to this environment is a path entry for the already installed dependencies (torch and
friends are reused, nothing is downloaded; their ``.pth`` files, including this checkout's
editable install, are not processed). Then, from an empty folder with no ``PYTHONPATH``: ``rollcli
init`` from every template, ``rollcli validate`` of every file of ``experiments/``, and ``rollcli
plan --sbatch`` of a Slurm spec, whose scripts need the package's sbatch templates.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SHIPPED = (
    "rollcli/templates/specs/base.yaml",
    "rollcli/templates/specs/quickstart.yaml",
    "rollcli/templates/sbatch/setup.sh",
    "rollcli/templates/sbatch/multinode.sh",
    "rollcli/data/benchmarks/math500.jsonl",
    "rollcli/data/train/math_train_deepscaler.json",
    "rollcli/data/tiny_base/manifest.json",
    "rollcli/data/tiny_base/e09645f9b6dc0046.safetensors",  # the default recipe, base_seed 0
)


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)} -> {proc.returncode}\n{proc.stdout}{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh venv with the wheel installed; returns (its bin folder, the environment to use)."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    shutil.copytree(REPO / "rollcli", src / "rollcli", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ROLLCLI_TEMPLATES")}
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", "dist"]
    _run([*build, str(src)], root, env)
    (wheel,) = (root / "dist").glob("rollcli-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert not [n for n in SHIPPED if n not in names], "files missing from the wheel"

    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], root, env)
    (site,) = venv.glob("lib/python*/site-packages")
    deps = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "rollcli_test_deps.pth").write_text("".join(f"{p}\n" for p in deps))
    _run([*pip, "--python", str(venv / "bin" / "python"), "install", "--no-deps", "--no-index",
          str(wheel)], root, env)  # fmt: skip
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return venv / "bin", env


def test_the_installed_package_is_the_wheel(installed, tmp_path):
    bin_dir, env = installed
    code = "import rollcli, rollcli.templates as t; print(rollcli.__file__); print(t.spec_templates_dir())"
    out = _run([str(bin_dir / "python"), "-c", code], tmp_path, env).stdout.split()
    site = str(bin_dir.parent / "lib")
    assert out[0].startswith(site) and out[1].startswith(site), out  # not this checkout


def test_init_validate_and_plan_from_the_wheel(installed, tmp_path):
    bin_dir, env = installed
    rollcli = str(bin_dir / "rollcli")
    listed = _run([rollcli, "init", "--list"], tmp_path, env).stdout
    templates = [p.stem for p in (REPO / "rollcli/templates/specs").glob("*.yaml")]
    complete = [t for t in templates if t != "base"]
    assert complete and all(t in listed for t in complete)
    for template in complete:
        _run([rollcli, "init", f"my-{template}", "-t", template, "--dir", "."], tmp_path, env)
        _run([rollcli, "validate", f"my-{template}.yaml"], tmp_path, env)
    experiments = sorted((REPO / "experiments").glob("*.yaml"))
    assert len(experiments) >= 5
    for spec in experiments:
        _run([rollcli, "validate", str(spec)], tmp_path, env)
    plan = _run([rollcli, "plan", str(REPO / "experiments/pc-1.5b-h200.yaml"), "--sbatch"],
                tmp_path, env).stdout  # fmt: skip
    assert "#SBATCH --gpus-per-node=8" in plan
    assert "export ROLLCLI_EXECUTOR=slurm" in plan  # rollcli/templates/sbatch/setup.sh
    assert "ROLLCLI_RAY_PORT" in plan  # multinode.sh: the spec runs on two nodes
