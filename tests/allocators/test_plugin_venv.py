"""An allocator from an outside package runs through ``rollcli run`` with no change to rollcli.

``plugin_pkg/`` is a package as a third-party author writes one (its own pyproject with a
``rollcli.allocators`` entry point, its own contract tests). It is pip-installed into a
temporary venv made with ``--system-site-packages`` on top of this interpreter's packages (a
``.pth`` file adds them, since this interpreter may itself be a venv), never into the shared
one; then the real ``rollcli`` CLI in that venv validates, lists, runs and reports a sim spec
that uses the plug-in's kind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import rollcli
from rollcli.store.atomic import read_json, read_jsonl

pytestmark = pytest.mark.slow

PLUGIN_SRC = Path(__file__).parent / "plugin_pkg"
ROLLCLI_ROOT = Path(rollcli.__file__).resolve().parents[1]

SPEC = """\
name: plugin-run
backend: {kind: sim, num_train_prompts: 128, num_eval_prompts: 64}
budget: {steps: 6, rollouts_per_step: 32}
allocators:
  grpo: {kind: uniform, n: 4}
  demo: {kind: demo_random, preset: small}
seeds: [0]
eval: {every: 2}
target: {baseline: grpo}
launch: {executor: local, max_parallel: 2}
tracking: {wandb: {mode: disabled}}
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv that sees this interpreter's packages and has the plug-in installed; its python."""
    root = tmp_path_factory.mktemp("plugin-venv")
    env_dir = root / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(env_dir)],
        check=True,
    )
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    shared = sysconfig.get_paths()["purelib"]
    Path(site, "_rollcli_shared_venv.pth").write_text(f"import site; site.addsitedir({shared!r})\n")
    source = root / "src"
    shutil.copytree(PLUGIN_SRC, source)  # the build writes next to the sources: not in the repo
    pip = [python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "--no-index", str(source)], check=True, env=_env(), cwd=root)
    return python


def _env() -> dict[str, str]:
    """This checkout's rollcli first on the path, as the shared venv's own tests have it."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROLLCLI_ROOT), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env.update(COLUMNS="120", NO_COLOR="1")
    return env


def _rollcli(python: Path, *args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, "-m", "rollcli.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=cwd,
        timeout=300,
    )


def test_outside_allocator_runs_through_rollcli(venv: Path, tmp_path: Path) -> None:
    installed = subprocess.run(
        [
            venv,
            "-c",
            "import rollcli_demo_plugin, rollcli; print(rollcli_demo_plugin.__file__, rollcli.__file__)",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        check=True,
    ).stdout.split()
    assert Path(installed[0]).is_relative_to(venv.parents[1])  # in the temporary venv
    assert Path(installed[1]).is_relative_to(ROLLCLI_ROOT)  # this checkout, unchanged

    spec = tmp_path / "plugin-run.yaml"
    spec.write_text(SPEC)
    listed = _rollcli(venv, "init", "--list", cwd=tmp_path)
    assert listed.returncode == 0 and "demo_random" in listed.stdout.split(), listed.stderr
    schema = json.loads(_rollcli(venv, "schema", cwd=tmp_path).stdout)
    assert schema["$defs"]["RandomBaselineConfig"]["properties"]["preset"]["enum"] == ["small"]
    typo = tmp_path / "typo.yaml"
    typo.write_text(SPEC.replace("kind: demo_random", "kind: demo_randm"))
    bad = _rollcli(venv, "validate", typo, cwd=tmp_path)
    assert bad.returncode == 2 and "did you mean 'demo_random'" in bad.stderr, bad.stderr

    run = _rollcli(venv, "run", spec, "--runs-dir", tmp_path / "runs", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    run_dir = tmp_path / "runs" / "plugin-run"
    jobs = read_json(run_dir / "manifest.json")["plan"]["jobs"]
    demo = next(j for j in jobs if j.get("allocator") == "demo")
    job_dir = run_dir / "jobs" / demo["id"]
    assert read_json(job_dir / "state.json")["status"] == "done"
    rows = read_jsonl(job_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(7))
    assert [r["cum_rollouts"] for r in rows[1:]] == [32 * s for s in range(1, 7)]
    assert [r["cum_rollouts_trained"] for r in rows[1:]] == [32 * s for s in range(1, 7)]
    # groups of equal rewards learn under their baseline (a prompt drawn again): the backend
    # trained more groups than GRPO's advantage would have (it is 0 for those)
    spread = [round((1 - r["zero_var_frac"]) * r["prompts_trained"]) for r in rows[1:]]
    informative = [r["train/informative_groups"] for r in rows[1:]]
    assert any(i > s for i, s in zip(informative, spread, strict=True)), (informative, spread)

    # the outside author's own tests: rollcli's contract suite, run on the plug-in by factory
    # (the copy the venv was built from, outside this repo's pytest configuration)
    tests = subprocess.run(
        [
            venv,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(venv.parents[2] / "src" / "tests"),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=300,
    )
    assert tests.returncode == 0 and re.search(r"\b6 passed\b", tests.stdout), (
        tests.stdout + tests.stderr
    )
